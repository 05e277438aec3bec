/*
 * OpenSSL and libevent's OpenSSL glue for the front's transport
 * (common/httpc_ev.c), loaded at the first https request (dlopen) rather
 * than by the dynamic loader at every start: loading libssl and libcrypto
 * costs a CLI call about 0.6 ms of CPU, a fifth of a whole `sbatch`, and
 * a master reached over plain http never needs them (docs/design-notes.md,
 * "A CLI as cheap as sbatch"). The table's members are the libraries' own
 * functions with their prototypes from the headers: tl->SSL_new() is
 * SSL_new(). Three of OpenSSL's are macros over another function, which the
 * table holds instead (tlslib.c's helpers say which).
 */
#ifndef YARD_TLSLIB_H
#define YARD_TLSLIB_H

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/error.h"

/* libevent's OpenSSL glue, which loads libssl and libcrypto with it. */
#define TLSLIB_SONAME "libevent_openssl-2.1.so.7"

#define TLSLIB_FUNCS(X)                                                                            \
	X(CRYPTO_free) X(CRYPTO_get_ex_new_index) X(ERR_clear_error) X(ERR_error_string_n)         \
	X(ERR_get_error) X(ERR_peek_last_error) X(ERR_reason_error_string) X(SSL_CTX_free)         \
	X(SSL_CTX_load_verify_locations) X(SSL_CTX_new) X(SSL_CTX_set_default_verify_paths)         \
	X(SSL_CTX_set_verify) X(SSL_ctrl) X(SSL_get0_param) X(SSL_get_ex_data)                     \
	X(SSL_get_ex_data_X509_STORE_CTX_idx) X(SSL_get_verify_result) X(SSL_new) X(SSL_set1_host) \
	X(SSL_set_ex_data) X(TLS_client_method) X(X509_STORE_CTX_get_current_cert)                 \
	X(X509_STORE_CTX_get_error_depth) X(X509_STORE_CTX_get_ex_data) X(X509_STORE_CTX_set_error) \
	X(X509_VERIFY_PARAM_set1_ip_asc) X(X509_get_X509_PUBKEY) X(X509_verify_cert_error_string)  \
	X(bufferevent_get_openssl_error) X(bufferevent_openssl_set_allow_dirty_shutdown)           \
	X(bufferevent_openssl_socket_new) X(i2d_X509_PUBKEY)

struct tlslib {
#define TLSLIB_MEMBER(f) __typeof__(f) *f;
	TLSLIB_FUNCS(TLSLIB_MEMBER)
#undef TLSLIB_MEMBER
};

/* tlslib_load: the libraries, loaded once (thread-safe); NULL with eb
 * naming them and why when they cannot be loaded. */
const struct tlslib *tlslib_load(struct errbuf *eb);

#endif
