/*
 * HTTP/1.x response heads read by hand, where libcurl cannot read them for
 * us: the 101 of an upgrade (httpc_upgrade, common/httpc.h), a container
 * engine's answer to a hijacked exec start (the agent), an upstream's
 * answer through a session (the master's HTTP proxy, master/proxy.h). Bounded, never
 * trusting: the input comes from the other end of a socket.
 */
#ifndef YARD_COMMON_HTTPHEAD_H
#define YARD_COMMON_HTTPHEAD_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

/* The longest head read (status line and fields). */
#define HTTP_HEAD_MAX (64 * 1024)
/* The most fields a head may have. */
#define HTTP_HEAD_FIELDS_MAX 128

struct http_field {
	char *name, *value;     /* owned; the value without surrounding blanks */
};

struct http_head {
	int minor;              /* HTTP/1.MINOR */
	int status;             /* 100 to 999 */
	char *reason;           /* owned, may be "" */
	struct http_field *fields; /* owned, in their order */
	size_t nfields;
};

/* http_head_end: the length of the head at the start of buf, through the
 * empty line that ends it (CRLF CRLF, or LF LF), or 0 when it has not ended
 * in the len bytes. */
size_t http_head_end(const char *buf, size_t len);

/* http_response_head_parse reads the len bytes of a whole response head
 * (http_head_end's length) into *h (released by the caller, also on
 * error): 0, or YERR(BAD_REQUEST) naming what is wrong (not HTTP/1.x, a
 * status that is not three digits, a field without a name or a colon, a
 * folded line, a control character, too many fields). */
int http_response_head_parse(const char *buf, size_t len, struct http_head *h, struct errbuf *eb);

/* http_head_get: the value of the first field called name (any case), or
 * NULL. */
const char *http_head_get(const struct http_head *h, const char *name);
/* http_list_has_token: whether a field's value (NULL: none) holds token
 * in its comma-separated list (any case): "keep-alive, Upgrade". */
bool http_list_has_token(const char *list, const char *token);
/* http_head_has_token: whether a field called name holds token in its
 * comma-separated list (any case): "Connection: keep-alive, Upgrade". */
bool http_head_has_token(const struct http_head *h, const char *name, const char *token);

void http_head_release(struct http_head *h);

#endif
