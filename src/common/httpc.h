/*
 * A small blocking HTTP client over libcurl, shared by the agent and the CLI.
 * One struct httpc per thread (it keeps its connection alive between calls).
 * curl_global_init is done once by main() before any thread starts.
 */
#ifndef YARD_HTTPC_H
#define YARD_HTTPC_H

#include <jansson.h>
#include <stddef.h>

#include "base/error.h"
#include "base/strbuf.h"

/*
 * How an https master is verified. Both NULL: the system's CA store. With a
 * CA file, the master's certificate must chain to it and name the host of
 * the URL. With a pin alone, the pin replaces both checks: the master's
 * public key must hash to it, whatever signed the certificate and whatever
 * names it holds (a self-signed master reached by any address). With both,
 * both must hold. Plain http:// URLs ignore all of it.
 */
struct httpc_tls {
	const char *ca_file; /* PEM file of trusted certificates, or NULL */
	const char *pin;     /* "sha256//BASE64" of the SubjectPublicKeyInfo (';' between
				several), or NULL */
};

struct httpc {
	void *curl;          /* CURL *, owned */
	char *base_url;      /* owned, no trailing slash: "http://127.0.0.1:7420" */
	char *token;         /* owned or NULL: sent as a bearer token */
	char *ca_file, *pin; /* owned or NULL: struct httpc_tls */
	long timeout_ms;     /* whole-request limit; 0 = none */
	unsigned retry_429;  /* answers 429 (rate limited) waited out, each for its
				Retry-After (at most HTTPC_RETRY_AFTER_MAX_S), before
				the 429 is returned; 0 = none */
	/* NULL, or: a request in flight stops, as a failed transfer, once
	 * cancelled(cancel_arg) is true (libcurl asks about once a second,
	 * and as data moves), so that a thread in a long poll can be joined */
	bool (*cancelled)(void *cancel_arg);
	void *cancel_arg;    /* borrowed */
};

#define HTTPC_RETRY_AFTER_MAX_S 10

struct httpc_response {
	long status;           /* HTTP status, 0 when no response came */
	struct strbuf body;    /* owned; released by httpc_response_release */
	char *offset_hdr;      /* X-Yard-Offset value or NULL (owned) */
	char *size_hdr;        /* X-Yard-Size (owned) */
	char *eof_hdr;         /* X-Yard-Eof (owned) */
	char *content_type;    /* owned or NULL */
};

/* httpc_init prepares a client of base_url; tls (may be NULL: the system's
 * CAs) and token are copied. */
void httpc_init(struct httpc *c, const char *base_url, const struct httpc_tls *tls,
		const char *token);
void httpc_release(struct httpc *c);
void httpc_set_token(struct httpc *c, const char *token);

/* httpc_request sends METHOD base_url+path (path starts with '/', already
 * escaped) with an optional body and content type. A transport failure
 * returns YERR(UNAVAILABLE) with the curl message in eb; a master whose
 * certificate or key is not trusted (struct httpc_tls) returns
 * YERR(FORBIDDEN) with what failed and how to trust it, which retrying does
 * not mend; any HTTP status returns 0 with res->status set (a 429 only
 * after c->retry_429 waits and tries more). Caller releases
 * res, also after an error. */
int httpc_request(struct httpc *c, const char *method, const char *path,
		  const void *body, size_t body_len, const char *content_type,
		  struct httpc_response *res, struct errbuf *eb);

/* httpc_json sends a JSON body (or none when body is NULL) and parses a JSON
 * reply into *out (new reference, may be NULL when the reply is empty). A
 * status >= 400 with the API's error document becomes that error (code from
 * error.code, message, field) and returns its negative code; *status gets the
 * HTTP status if status is not NULL. */
int httpc_json(struct httpc *c, const char *method, const char *path, json_t *body,
	       json_t **out, long *status, struct errbuf *eb);

/* httpc_error_from_reply fills eb from an API error document; returns the code. */
int httpc_error_from_reply(const struct httpc_response *res, struct errbuf *eb);

void httpc_response_init(struct httpc_response *res);
void httpc_response_release(struct httpc_response *res);

/* httpc_tls_check checks what a user gave as trust: the CA file is a
 * readable file and the pin is "sha256//" and 44 base64 characters (';'
 * between several). The error names opt_ca or opt_pin (the option or
 * variable the value came from) and the value. */
int httpc_tls_check(const struct httpc_tls *tls, const char *opt_ca, const char *opt_pin,
		    struct errbuf *eb);

/* url_escape: percent-encode s for a path segment or query value (caller frees). */
char *url_escape(const char *s);

#endif
