/*
 * A small blocking HTTP client, shared by the agent and the CLI. One struct
 * httpc per thread (it keeps its connection alive between calls). What
 * carries a request is a transport, a table of ops (struct
 * httpc_transport): libcurl's (common/httpc_curl.c), which the master and
 * yard-core use, and libevent's evhttp (common/httpc_ev.c), which the small
 * front `yard` and yard-agent use (src/front.c, src/agent_prog.c say why).
 * main() picks one with httpc_global_init before any thread starts.
 *
 * Several masters may share one store, one leading and the others standing
 * by (docs/faults.md). A client is given their URLs as one comma-separated
 * list and finds the leader itself: a standby answers every request but
 * GET /healthz with 503 not_leader, naming the leader when it knows one, and
 * has done nothing, so the request goes again to the leader it names, or to
 * the next URL. A request that provably reached no server (no connection:
 * refused, no route, no such host) goes to the next URL too. One that may
 * have been processed (a timeout or a reset once connected) is never sent
 * again, since a second submit could make a second job: it fails as it
 * would with one master, and the client's next request goes to the next URL.
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

struct httpc_transport;

struct httpc {
	const struct httpc_transport *tp; /* the transport httpc_global_init chose */
	void *conn;          /* the transport's connection state, owned */
	char **urls;         /* owned: the masters, each without trailing slash,
				"http://127.0.0.1:7420"; leaders that a standby
				named are added (at most HTTPC_URLS_MAX in all) */
	size_t nurls;        /* >= 1 */
	size_t cur;          /* index in urls of the master requests go to now */
	bool refused;        /* OUT of the last httpc_request: it failed because
				no master it tried listened (every connection was
				refused): masters that are down, not a partition */
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
#define HTTPC_URLS_MAX 16
/* leaders named by standbys followed by one httpc_request, beyond the one
 * round of its URLs */
#define HTTPC_LEADER_HOPS 3

struct httpc_response {
	long status;           /* HTTP status, 0 when no response came */
	struct strbuf body;    /* owned; released by httpc_response_release (a
				* response given to another request keeps its buffer) */
	char *offset_hdr;      /* X-Yard-Offset value or NULL (owned) */
	char *size_hdr;        /* X-Yard-Size (owned) */
	char *eof_hdr;         /* X-Yard-Eof (owned) */
	char *content_type;    /* owned or NULL */
	char *leader_hdr;      /* X-Yard-Leader (owned): the leader a standby names */
	char *retry_after_hdr; /* Retry-After (owned): a 429's seconds to wait */
};

/* How far a failed request got, which decides where it may go again. */
enum httpc_reach {
	HTTPC_ANSWERED,      /* a response came (or none was needed) */
	HTTPC_NOT_CONNECTED, /* no connection was made: nothing was sent */
	HTTPC_MAYBE_SENT,    /* it failed once connected: it may have been processed */
};

/*
 * A transport: how one request reaches one master. request sends METHOD
 * base+path with the body, the token as a bearer and the TLS trust of c,
 * within c->timeout_ms (0: none) and stopping when c->cancelled says so;
 * it fills res (headers as struct httpc_response names them) and returns
 * 0 once any answer came; otherwise YERR(FORBIDDEN) for a master that is
 * not trusted (what failed and how to trust it), else YERR(UNAVAILABLE)
 * naming the URL, with *reach and *os_errno (the connect's errno, 0 when
 * unknown) saying how far it got.
 */
struct httpc_transport {
	/* a connection's state; a transport loads its library here, at its
	 * first use (libcurl's, common/curllib.h) */
	void *(*open)(void);
	void (*close)(void *conn);
	int (*request)(struct httpc *c, const char *base, const char *method, const char *path,
		       const void *body, size_t body_len, const char *content_type,
		       struct httpc_response *res, enum httpc_reach *reach, int *os_errno,
		       struct errbuf *eb);
	/* the local address of the connection of the last request ("10.0.0.2"),
	 * caller frees; NULL when unknown */
	char *(*local_ip)(void *conn);
};

/* libcurl's (common/httpc_curl.c) and libevent's (common/httpc_ev.c). */
extern const struct httpc_transport httpc_curl;
extern const struct httpc_transport httpc_ev;

/* httpc_global_init chooses transport t, in main() before any thread
 * starts: every client httpc_init makes afterwards uses it. */
void httpc_global_init(const struct httpc_transport *t);

/* httpc_local_ip: the local address c's last request went out from
 * (caller frees), or NULL. */
char *httpc_local_ip(struct httpc *c);

/* httpc_init prepares a client of base_url, one URL or a comma-separated
 * list of them (the masters sharing one store, spaces around commas
 * skipped; the first is used first); tls (may be NULL: the system's CAs)
 * and token are copied, and apply to every master. */
void httpc_init(struct httpc *c, const char *base_url, const struct httpc_tls *tls,
		const char *token);
/* httpc_init_bulk is httpc_init for a client that downloads large bodies
 * (staging chunks, checkpoints, images): on libcurl's transport, loaded at
 * its first use, whichever transport httpc_global_init chose, because
 * libevent 2.1's evhttp reads at most 4 KiB a system call. */
void httpc_init_bulk(struct httpc *c, const char *base_url, const struct httpc_tls *tls,
		     const char *token);
/* httpc_init_like: a client of the same masters (the one proto uses now
 * first), transport, TLS, token, timeout and 429 waits as proto, with a
 * connection of its own (for another thread). */
void httpc_init_like(struct httpc *c, const struct httpc *proto);
void httpc_release(struct httpc *c);
void httpc_set_token(struct httpc *c, const char *token);

/* httpc_url: the master the next request goes to first (for messages). */
const char *httpc_url(const struct httpc *c);

/* httpc_urls_check checks a list as httpc_init takes it: every entry is an
 * http:// or https:// URL with a host. The error names opt (the option or
 * variable the list came from) and the bad entry. */
int httpc_urls_check(const char *list, const char *opt, struct errbuf *eb);

/* httpc_request sends METHOD url+path (path starts with '/', already
 * escaped) with an optional body and content type, to the leader among the
 * client's masters (the header's comment: what is sent again and where).
 * A transport failure returns YERR(UNAVAILABLE) with the transport's message in
 * eb, and, with several masters, the masters tried; a master whose
 * certificate or key is not trusted (struct httpc_tls) returns
 * YERR(FORBIDDEN) with what failed and how to trust it, which retrying does
 * not mend; when no leader answered but a standby did (none naming a
 * leader that answers), YERR(NOT_LEADER) with the last standby's message,
 * so that no caller takes a standby's answer for the leader's (res holds
 * the last reply, the standby's 503 when it was last); any other HTTP
 * status returns 0 with res->status set (a 429 only after c->retry_429
 * waits and tries more). Caller releases res, also after an error. */
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

/* httpc_get_archive fetches GET /v1/code/DIGEST (a job's code archive,
 * digest "sha256:HEX") into path, written atomically
 * once its bytes hash to the digest: YERR(IO) names what arrived instead;
 * an error reply is returned as httpc_error_from_reply's. */
int httpc_get_archive(struct httpc *c, const char *digest, const char *path, struct errbuf *eb);

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

/*
 * An upgraded connection: a session's leg (docs/protocol.md, "Sessions").
 * httpc_upgrade opens a connection of its own with libcurl's CONNECT_ONLY
 * (TLS, the pin and the CA exactly as for every request of c), writes the
 * HTTP/1.1 request with "Connection: Upgrade" by hand and reads the 101 by
 * hand (Debian's libcurl 7.88 has no WebSocket support compiled in). The
 * bytes both ways then go through httpc_stream_send and httpc_stream_recv,
 * which never block; poll() on fd says when to call them again (with TLS,
 * read until HTTPC_STREAM_AGAIN: libcurl may hold decrypted bytes the
 * socket no longer shows).
 */
struct httpc_stream {
	void *curl;             /* CURL *, owned: the connection's own handle */
	int fd;                 /* its socket, for poll(); closed by httpc_stream_close */
	struct strbuf pending;  /* bytes that came after the 101's head: read first */
	char *protocol;         /* owned or NULL: the Sec-WebSocket-Protocol chosen */
	/* what httpc_stream_send is sending: a TLS write that could not go
	 * must be tried again with the same bytes at the same address */
	char wbuf[65536];
	size_t wlen;
};

struct httpc_upgrade_req {
	const char *path;       /* escaped, with its query: "/v1/jobs/7/exec?cmd=ls" */
	/* the Upgrade token. "websocket" adds Sec-WebSocket-Version 13 and a
	 * fresh Sec-WebSocket-Key, and checks the server's accept key */
	const char *protocol;
	/* NULL or NULL-terminated extra header lines without CRLF
	 * ("Sec-WebSocket-Protocol: yard.exec.v1") */
	const char *const *headers;
	long timeout_ms;        /* connecting and the handshake; 0: 15 s */
};

/* What httpc_stream_send and httpc_stream_recv return besides 0 and errors. */
#define HTTPC_STREAM_AGAIN 1 /* nothing can move now: poll() fd */
#define HTTPC_STREAM_EOF 2   /* recv: the peer closed the connection */

/* httpc_upgrade opens s (released by httpc_stream_close, only on success)
 * to c's leader (standbys' answers followed as httpc_request follows them;
 * refused connections go to the next master). 0 once the server answered
 * 101 with the Upgrade asked for (and a good accept key); a refusal (the
 * API's error document, any status but 101) is returned as that error
 * (code, message, field; *status its HTTP status when status is not NULL);
 * a connection that fails is YERR(UNAVAILABLE), an untrusted master
 * YERR(FORBIDDEN), as for httpc_request. */
int httpc_upgrade(struct httpc *c, const struct httpc_upgrade_req *req, struct httpc_stream *s,
		  long *status, struct errbuf *eb);
/* httpc_stream_send sends what it can of len bytes: 0 with *sent > 0,
 * HTTPC_STREAM_AGAIN when none could go now, or YERR(UNAVAILABLE). After
 * HTTPC_STREAM_AGAIN the stream holds the bytes it tried (a copy, up to
 * sizeof(wbuf)): call it again with buf starting with the same bytes (more
 * may follow them). */
int httpc_stream_send(struct httpc_stream *s, const void *buf, size_t len, size_t *sent,
		      struct errbuf *eb);
/* httpc_stream_send_all sends all len bytes, waiting (poll) up to timeout_ms
 * (0: forever) for the connection to take them. */
int httpc_stream_send_all(struct httpc_stream *s, const void *buf, size_t len, long timeout_ms,
			  struct errbuf *eb);
/* httpc_stream_recv reads up to len bytes: 0 with *got > 0, HTTPC_STREAM_AGAIN
 * when none are there now, HTTPC_STREAM_EOF when the peer closed, or
 * YERR(UNAVAILABLE). */
int httpc_stream_recv(struct httpc_stream *s, void *buf, size_t len, size_t *got,
		      struct errbuf *eb);
void httpc_stream_close(struct httpc_stream *s);

/* httpc_cloexec makes every socket the libcurl handle curl (a CURL *)
 * opens close-on-exec from the start (SOCK_CLOEXEC): the agent starts shims
 * and sessions' commands from some threads while others hold connections
 * to the master, which must never leak into them (a leaked leg would
 * outlive its agent). Every handle of yard's gets it (libevent's sockets
 * are close-on-exec already). Defined in httpc_curl.c with the upgraded
 * connections, which are libcurl's. */
void httpc_cloexec(void *curl);

/* url_escape: percent-encode s for a path segment or query value (caller frees). */
char *url_escape(const char *s);

#endif
