/*
 * libcurl, loaded at its first use (dlopen) rather than by the dynamic
 * loader at every start. Debian's libcurl maps some forty libraries
 * (OpenSSL, Kerberos, LDAP, SASL, SSH, RTMP, ...): 6 MiB of an idle
 * agent's RSS before it ever calls it, and 2 more once initialised, while
 * an agent over plain http talks to its master on libevent
 * (common/httpc_ev.c) and needs libcurl only for Docker's socket, S3,
 * staging and sessions (docs/design-notes.md, "An agent as small as
 * slurmd"). The table's members are libcurl's functions without their
 * "curl_" prefix, with their own prototypes from <curl/curl.h>:
 * curllib.easy_setopt(h, CURLOPT_URL, url) is curl_easy_setopt(h,
 * CURLOPT_URL, url).
 */
#ifndef YARD_CURLLIB_H
#define YARD_CURLLIB_H

#include <curl/curl.h>

#include "base/error.h"

/* The shared object the Debian package libcurl4 installs. */
#define CURLLIB_SONAME "libcurl.so.4"

#define CURLLIB_FUNCS(X)                                                                           \
	X(easy_cleanup) X(easy_escape) X(easy_getinfo) X(easy_init) X(easy_perform)                \
	X(easy_recv) X(easy_reset) X(easy_send) X(easy_setopt) X(easy_strerror) X(free)            \
	X(global_init) X(slist_append) X(slist_free_all)

struct curllib {
#define CURLLIB_MEMBER(f) __typeof__(curl_##f) *f;
	CURLLIB_FUNCS(CURLLIB_MEMBER)
#undef CURLLIB_MEMBER
};

/* The functions, filled by the first curllib_load: nothing may call them
 * before a curllib_load returned 0 (every path to a handle passes one). */
extern struct curllib curllib;

/* curllib_load loads and initialises libcurl once (thread-safe: Debian's
 * is built "threadsafe", so curl_global_init may run on any thread): 0, or
 * YERR(INTERNAL) with eb naming the library and why it cannot be loaded. */
int curllib_load(struct errbuf *eb);

#endif
