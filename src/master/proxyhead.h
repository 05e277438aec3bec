/*
 * What the HTTP proxy (master/proxy.h) reads and writes of requests and
 * answers, as pure functions of bytes and fields (no I/O, no MHD): the
 * proxy's path, the request head it sends upstream, the answer's fields it
 * passes on. tests/fuzz/fuzz_wsframe.c runs them on what an upstream may
 * send.
 */
#ifndef YARD_MASTER_PROXYHEAD_H
#define YARD_MASTER_PROXYHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "base/strbuf.h"
#include "common/httphead.h"

/* The name of the cookie that carries a browser's token. */
#define PROXY_TOKEN_COOKIE "yard_token"

/* Where a proxied request goes: "ROLE/INDEX/PORT/REST" of the route's
 * {path} (decoded). */
struct proxy_target {
	char *role;             /* owned */
	unsigned index;
	unsigned port;          /* 1..65535 */
	bool slash;             /* a '/' followed PORT (REST may be empty) */
};

/* proxy_target_parse reads path into *t (released with
 * proxy_target_release, also on error): 0, or YERR(BAD_REQUEST) naming
 * the part that is wrong. */
int proxy_target_parse(const char *path, struct proxy_target *t, struct errbuf *eb);
void proxy_target_release(struct proxy_target *t);

/* A header field as the client sent it, or as the upstream did. */
struct proxy_field {
	const char *name, *value; /* borrowed */
};

/* What proxy_request_head writes upstream. */
struct proxy_request {
	const char *method;
	const char *target;     /* path?query exactly as the client sent it */
	bool ws;                /* an upgrade to a WebSocket (HTTP/1.1), else HTTP/1.0 */
	const struct proxy_field *fields; /* the client's, in order */
	size_t nfields;
	const char *client_addr; /* X-Forwarded-For, or NULL */
	bool https;             /* X-Forwarded-Proto https, else http */
	const char *prefix;     /* X-Forwarded-Prefix: "/v1/jobs/7/proxy/worker/0/8888" */
	bool has_body;          /* Content-Length: body_len goes up */
	uint64_t body_len;
};

/* proxy_request_check: 0 when the request's target and fields can go
 * upstream as they are, else YERR(BAD_REQUEST) naming the first that
 * holds a control character (a CR, say, which an upstream could read as
 * the end of a line: a field the client smuggles past the master's, such
 * as X-Forwarded-For) or a field name that is not a token. */
int proxy_request_check(const struct proxy_request *req, struct errbuf *eb);

/* proxy_request_head appends the request head (through its empty line)
 * to out: the request line, the client's fields but the hop-by-hop ones
 * (Connection and the fields it names, Keep-Alive, Proxy-*, TE, Trailer,
 * Transfer-Encoding, Upgrade, Expect), Content-Length (its own is sent
 * when has_body), the master's credentials (Authorization; yard_token
 * taken out of Cookie) and any X-Forwarded-* or Forwarded of the client's;
 * then "Connection: close" (http) or "Connection: Upgrade" and "Upgrade:
 * websocket" (ws), and X-Forwarded-For, -Proto, -Host (the client's Host)
 * and -Prefix. */
void proxy_request_head(const struct proxy_request *req, struct strbuf *out);

/* proxy_cookie_filter: a Cookie field's value without the pairs named
 * PROXY_TOKEN_COOKIE (caller frees), NULL when none is left. */
char *proxy_cookie_filter(const char *cookie);

/* What the client gets of an upstream's answer. */
struct proxy_answer {
	int status;
	bool interim;           /* a 1xx other than 101: skip it, the answer follows */
	bool has_length;        /* Content-Length: length bytes of body */
	uint64_t length;
	struct proxy_field *fields; /* owned array (strings borrowed from the head): what to send */
	size_t nfields;
};

/* proxy_answer_plan reads the parsed head h of an upstream's answer to a
 * request (ws: an upgrade) into *a (released with proxy_answer_release,
 * also on error): 0, or YERR(BAD_GATEWAY) saying why it cannot be
 * relayed: a 101 that is not a WebSocket's or that was not asked for, a
 * Transfer-Encoding (not HTTP/1.0's to send), a Content-Length that is no
 * number or that disagrees with another. The fields kept are the head's
 * but the hop-by-hop ones (as proxy_request_head's), Content-Length,
 * X-Content-Type-Options (every answer of the master has nosniff) and a
 * Set-Cookie of PROXY_TOKEN_COOKIE. */
int proxy_answer_plan(const struct http_head *h, bool ws, struct proxy_answer *a, struct errbuf *eb);
void proxy_answer_release(struct proxy_answer *a);

#endif
