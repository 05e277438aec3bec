/*
 * The libevent transport of httpc (struct httpc_transport): evhttp carries
 * each request, bufferevent_openssl its TLS. The small front `yard`
 * (src/front.c) uses it: loading libevent and OpenSSL costs a third of the
 * CPU that loading Debian's libcurl does, which sets the floor of every CLI
 * call (docs/design-notes.md, "A CLI as cheap as sbatch").
 *
 * A request runs the client's own event loop until it is answered, fails,
 * passes c->timeout_ms or is cancelled. The connection is kept for the next
 * request to the same master, and made again once the master closed it.
 */
#include "base/compat.h"
#include "common/httpc.h"

#include "base/crypto.h"
#include "base/xalloc.h"
#include "common/httpc_impl.h"
#include "common/tlslib.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

/* how often a request looks at c->cancelled */
#define CANCEL_POLL_MS 250
/* a request without c->timeout_ms: the most a connection may stay silent */
#define IDLE_LIMIT_S 600
/* the most one write to the socket sends: libevent's default, 16 KiB, is
 * a system call and a loop turn for every 16 KiB of a log chunk */
#define WRITE_MAX (4u << 20)

/* One client's connection state (struct httpc's conn). */
struct ev_conn {
	struct event_base *base;
	struct evhttp_connection *evcon; /* to key, or NULL */
	char *key;                       /* the master's URL evcon goes to */
	bool closed;                     /* evcon's connection was closed: make another */
	bool connected;                  /* evcon's connection was made (for the request now) */
	SSL_CTX *ctx;                    /* https: made at the first request */
	const struct httpc *c;           /* the client of the request now (its trust) */
	bool pin_failed;                 /* the master's key did not match the pin */
	SSL *ssl;                        /* evcon's, owned by its bufferevent */
};

/* One request in flight. */
struct ev_req {
	struct ev_conn *ec;
	struct evhttp_request *req;      /* until done (evhttp frees it) */
	struct httpc_response *res;
	bool done, answered, errored, timed_out, cancelled;
	/* no answer and no error: evhttp gave up connecting, which it does
	 * without a word only when the connection was refused (a connect
	 * that takes too long meets our timer first) */
	bool refused;
	unsigned long ssl_err;           /* the TLS handshake's error, if it failed */
	const struct httpc *c;
	struct event *cancel_poll;
	bool new_conn;                   /* it goes on a connection of its own, not a kept one */
};

/* OpenSSL once loaded (common/tlslib.h), and the index of an SSL's
 * ev_conn among its ex data: both set at the first https request */
static const struct tlslib *tl;
static int ssl_index = -1;
static pthread_once_t ssl_index_once = PTHREAD_ONCE_INIT;

static void ssl_index_new(void)
{
	ssl_index = tl->CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_SSL, 0, NULL, NULL, NULL, NULL);
}

static void *ev_open(void)
{
	struct ev_conn *ec = xcalloc(1, sizeof(*ec));

	ec->base = event_base_new();
	if (!ec->base)
		die("cannot initialise libevent");
	return ec;
}

static void drop_connection(struct ev_conn *ec)
{
	if (ec->evcon)
		evhttp_connection_free(ec->evcon); /* frees its bufferevent and SSL */
	ec->evcon = NULL;
	ec->ssl = NULL;
	free(ec->key);
	ec->key = NULL;
	ec->closed = false;
}

static void ev_close(void *conn)
{
	struct ev_conn *ec = conn;

	drop_connection(ec);
	if (ec->ctx)
		tl->SSL_CTX_free(ec->ctx);
	event_base_free(ec->base);
	free(ec);
}

static void on_closed(struct evhttp_connection *evcon, void *arg)
{
	struct ev_conn *ec = arg;

	ec->closed = true;
	ec->connected = true; /* evhttp tells only of a connection that was made */
}

/* Whether the DER SubjectPublicKeyInfo of n bytes hashes to one of the
 * pins ("sha256//BASE64", ';' between several). */
static bool pin_matches(const char *pins, const unsigned char *spki, size_t n)
{
	uint8_t md[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;
	char b64[64];
	size_t len;

	sha256_init(&ctx);
	sha256_update(&ctx, n, spki);
	sha256_digest(&ctx, sizeof(md), md);
	len = base64_encode(md, sizeof(md), b64);
	for (const char *p = pins;;) {
		size_t k = strcspn(p, ";");
		if (k == 8 + len && !strncmp(p, "sha256//", 8) && !memcmp(p + 8, b64, len))
			return true;
		if (!p[k])
			return false;
		p += k + 1;
	}
}

/* OpenSSL's check of each certificate of the master's chain: the CA's
 * verdict, the pin's at the master's own (depth 0). */
static int verify_cb(int ok, X509_STORE_CTX *x)
{
	SSL *ssl = tl->X509_STORE_CTX_get_ex_data(x, tl->SSL_get_ex_data_X509_STORE_CTX_idx());
	struct ev_conn *ec = tl->SSL_get_ex_data(ssl, ssl_index);
	unsigned char *der = NULL;
	int n;

	if (!ec || !ec->c->pin)
		return ok;
	if (!ec->c->ca_file)
		ok = 1; /* a self-signed master reached by any name: the pin decides */
	if (!ok || tl->X509_STORE_CTX_get_error_depth(x) != 0)
		return ok;
	n = tl->i2d_X509_PUBKEY(tl->X509_get_X509_PUBKEY(tl->X509_STORE_CTX_get_current_cert(x)), &der);
	ok = n > 0 && pin_matches(ec->c->pin, der, (size_t)n);
	tl->CRYPTO_free(der, OPENSSL_FILE, OPENSSL_LINE);
	if (!ok) {
		ec->pin_failed = true;
		tl->X509_STORE_CTX_set_error(x, X509_V_ERR_APPLICATION_VERIFICATION);
	}
	return ok;
}


/* The TLS context of c's requests: its CA file, or the system's CAs, or
 * the pin alone. */
static int tls_context(struct ev_conn *ec, const struct httpc *c, const char *master,
		       struct errbuf *eb)
{
	if (ec->ctx)
		return 0;
	/* OpenSSL is loaded at its first use, here: a plain http call never
	 * pays for it */
	if (!(tl = tlslib_load(eb)))
		return YERR(INTERNAL);
	pthread_once(&ssl_index_once, ssl_index_new);
	ec->ctx = tl->SSL_CTX_new(tl->TLS_client_method());
	if (!ec->ctx)
		die("cannot initialise OpenSSL");
	tl->SSL_CTX_set_verify(ec->ctx, SSL_VERIFY_PEER, verify_cb);
	if (c->ca_file && tl->SSL_CTX_load_verify_locations(ec->ctx, c->ca_file, NULL) != 1) {
		char why[256];
		tl->ERR_error_string_n(tl->ERR_get_error(), why, sizeof(why));
		tl->SSL_CTX_free(ec->ctx);
		ec->ctx = NULL;
		return error(eb, YERR(FORBIDDEN), "master %s: cannot use the CA file '%s': %s", master,
			     c->ca_file, why);
	}
	if (!c->ca_file && !c->pin)
		tl->SSL_CTX_set_default_verify_paths(ec->ctx);
	return 0;
}

/* The parts of a master's URL (evhttp_uri_parse's): scheme, host without
 * brackets, port, the authority as the Host header names it, and the path
 * prefix requests go under. */
struct master_addr {
	bool tls;
	unsigned port;
	char *host, *authority, *prefix; /* owned */
};

static bool parse_master(const char *base, struct master_addr *a)
{
	struct evhttp_uri *u = evhttp_uri_parse(base);
	const char *scheme = u ? evhttp_uri_get_scheme(u) : NULL, *host = u ? evhttp_uri_get_host(u) : NULL;
	const char *path = u ? evhttp_uri_get_path(u) : NULL;
	int port = u ? evhttp_uri_get_port(u) : -1;
	size_t n = host ? strlen(host) : 0;
	bool ok = scheme && n && (!strcasecmp(scheme, "http") || !strcasecmp(scheme, "https"));

	memset(a, 0, sizeof(*a));
	if (ok) {
		a->tls = !strcasecmp(scheme, "https");
		a->port = port > 0 ? (unsigned)port : a->tls ? 443 : 80;
		a->host = *host == '[' && n > 2 ? xstrndup(host + 1, n - 2) : xstrdup(host);
		a->authority = port > 0 ? xasprintf("%s:%d", host, port) : xstrdup(host);
		a->prefix = xstrdup(path ? path : "");
	}
	if (u)
		evhttp_uri_free(u);
	return ok;
}

static void master_addr_release(struct master_addr *a)
{
	free(a->host);
	free(a->authority);
	free(a->prefix);
}

/* TCP_NODELAY on ec's socket, when it has one. */
static void set_nodelay(struct ev_conn *ec)
{
	struct bufferevent *bev = ec->evcon ? evhttp_connection_get_bufferevent(ec->evcon) : NULL;
	int fd = bev ? bufferevent_getfd(bev) : -1, one = 1;

	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* A connection to the master at base: the one kept when it is still open
 * and goes there (*kept), else a new one. */
static int connection(struct ev_conn *ec, const struct httpc *c, const char *base,
		      const struct master_addr *a, bool *kept, struct errbuf *eb)
{
	struct bufferevent *bev;
	int ret;

	/* a close the master sent since is seen now (on_closed) */
	if (ec->evcon && !ec->closed)
		event_base_loop(ec->base, EVLOOP_NONBLOCK);
	*kept = ec->evcon && !ec->closed && !strcmp(ec->key, base);
	if (*kept) {
		ec->connected = true; /* it answered before */
		return 0;
	}
	drop_connection(ec);
	ec->connected = false;
	if (a->tls) {
		struct in6_addr ip;
		if ((ret = tls_context(ec, c, base, eb)))
			return ret;
		ec->ssl = tl->SSL_new(ec->ctx);
		if (!ec->ssl)
			die("cannot initialise OpenSSL");
		tl->SSL_set_ex_data(ec->ssl, ssl_index, ec);
		if (inet_pton(AF_INET, a->host, &ip) == 1 || inet_pton(AF_INET6, a->host, &ip) == 1) {
			if (c->ca_file || !c->pin)
				tl->X509_VERIFY_PARAM_set1_ip_asc(tl->SSL_get0_param(ec->ssl), a->host);
		} else {
			tl->SSL_ctrl(ec->ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, a->host);
			if (c->ca_file || !c->pin)
				tl->SSL_set1_host(ec->ssl, a->host);
		}
		bev = tl->bufferevent_openssl_socket_new(ec->base, -1, ec->ssl, BUFFEREVENT_SSL_CONNECTING,
						     BEV_OPT_CLOSE_ON_FREE);
		if (bev)
			tl->bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	} else {
		bev = bufferevent_socket_new(ec->base, -1, BEV_OPT_CLOSE_ON_FREE);
	}
	if (!bev)
		die("cannot initialise libevent");
	bufferevent_set_max_single_write(bev, WRITE_MAX);
	ec->evcon = evhttp_connection_base_bufferevent_new(ec->base, NULL, bev, a->host,
							   (unsigned short)a->port);
	if (!ec->evcon)
		die("cannot initialise libevent");
	evhttp_connection_set_closecb(ec->evcon, on_closed, ec);
	evhttp_connection_set_retries(ec->evcon, 0);
	ec->key = xstrdup(base);
	return 0;
}

static void take(char **slot, struct evkeyvalq *h, const char *name)
{
	const char *v = evhttp_find_header(h, name);

	*slot = v ? xstrdup(v) : NULL;
}

static void finish(struct ev_req *r)
{
	r->done = true;
	r->req = NULL;
	event_base_loopbreak(r->ec->base);
}

/* Keeps the TLS error of the failed handshake, if one did. */
static void take_ssl_error(struct ev_req *r)
{
	struct bufferevent *bev = r->ec->evcon ? evhttp_connection_get_bufferevent(r->ec->evcon) : NULL;
	unsigned long e;

	/* the first says why; what follows is noise (libevent adds its own) */
	while (r->ec->ssl && bev && (e = tl->bufferevent_get_openssl_error(bev)))
		if (!r->ssl_err)
			r->ssl_err = e;
}

static void on_done(struct evhttp_request *req, void *arg)
{
	struct ev_req *r = arg;

	if (req && evhttp_request_get_response_code(req)) {
		struct evkeyvalq *h = evhttp_request_get_input_headers(req);
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		size_t n = evbuffer_get_length(in);
		struct httpc_response *res = r->res;
		res->status = evhttp_request_get_response_code(req);
		strbuf_grow(&res->body, n);
		evbuffer_remove(in, res->body.buf + res->body.len, n);
		strbuf_setlen(&res->body, res->body.len + n);
		take(&res->offset_hdr, h, "X-Yard-Offset");
		take(&res->size_hdr, h, "X-Yard-Size");
		take(&res->eof_hdr, h, "X-Yard-Eof");
		take(&res->content_type, h, "Content-Type");
		take(&res->leader_hdr, h, "X-Yard-Leader");
		take(&res->retry_after_hdr, h, "Retry-After");
		r->answered = true;
		r->ec->connected = true;
	} else {
		r->refused = !r->errored;
		take_ssl_error(r);
	}
	finish(r);
}

static void on_error(enum evhttp_request_error e, void *arg)
{
	struct ev_req *r = arg;

	r->errored = true;
	take_ssl_error(r);
}

/* The time is up, or the caller cancelled: the request stops. */
static void stop_request(struct ev_req *r)
{
	if (r->req) {
		struct evhttp_request *req = r->req;
		r->req = NULL;
		evhttp_cancel_request(req); /* calls no done callback */
	}
	drop_connection(r->ec);
	finish(r);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct ev_req *r = arg;

	r->timed_out = true;
	stop_request(r);
}

static void on_cancel_poll(evutil_socket_t fd, short what, void *arg)
{
	struct ev_req *r = arg;

	if (r->c->cancelled(r->c->cancel_arg)) {
		r->cancelled = true;
		stop_request(r);
		return;
	}
	struct timeval tv = { 0, CANCEL_POLL_MS * 1000 };
	evtimer_add(r->cancel_poll, &tv);
}

static bool method_of(const char *method, enum evhttp_cmd_type *t)
{
	static const struct {
		const char *name;
		enum evhttp_cmd_type type;
	} methods[] = {
		{ "GET", EVHTTP_REQ_GET },   { "POST", EVHTTP_REQ_POST },
		{ "PUT", EVHTTP_REQ_PUT },   { "DELETE", EVHTTP_REQ_DELETE },
		{ "HEAD", EVHTTP_REQ_HEAD }, { "PATCH", EVHTTP_REQ_PATCH },
	};

	for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
		if (!strcmp(methods[i].name, method)) {
			*t = methods[i].type;
			return true;
		}
	return false;
}

/* Why a request that got no answer failed, as the user should read it
 * (httpc_curl.c's transfer_error says the same of libcurl's failures). */
static int failure(const struct ev_req *r, const struct httpc *c, const char *base,
		   const struct master_addr *a, const char *url, struct errbuf *eb)
{
	const struct ev_conn *ec = r->ec;
	unsigned long ssl_err = r->ssl_err ? r->ssl_err : a->tls && tl ? tl->ERR_peek_last_error() : 0;
	struct bufferevent *bev = ec->evcon ? evhttp_connection_get_bufferevent(ec->evcon) : NULL;
	int dns = bev ? bufferevent_socket_get_dns_error(bev) : 0;
	char why[256] = "";

	if (ec->pin_failed)
		return error(eb, YERR(FORBIDDEN),
			     "master %s: the certificate's public key does not match the pin '%s'", base,
			     c->pin ? c->pin : "");
	if (a->tls && ec->ssl && tl->SSL_get_verify_result(ec->ssl) != X509_V_OK)
		return error(eb, YERR(FORBIDDEN),
			     "master %s: certificate not trusted: %s (give --ca FILE or --pin "
			     "sha256//...)", base,
			     tl->X509_verify_cert_error_string(tl->SSL_get_verify_result(ec->ssl)));
	if (r->timed_out)
		return error(eb, YERR(UNAVAILABLE), "cannot reach '%s': no answer within %ld ms", url,
			     c->timeout_ms);
	if (r->cancelled)
		return error(eb, YERR(UNAVAILABLE), "cannot reach '%s': cancelled", url);
	if (!ec->connected) {
		if (a->tls && ssl_err) {
			const char *reason = tl->ERR_reason_error_string(ssl_err);
			if (reason)
				snprintf(why, sizeof(why), "%s", reason);
			else
				tl->ERR_error_string_n(ssl_err, why, sizeof(why));
			return error(eb, YERR(UNAVAILABLE),
				     "cannot reach '%s': TLS handshake failed: %s (does the master serve "
				     "plain http?)", url, why);
		}
		if (dns)
			return error(eb, YERR(UNAVAILABLE), "cannot reach '%s': cannot resolve %s: %s", url,
				     a->host, evutil_gai_strerror(dns));
		return error(eb, YERR(UNAVAILABLE), "cannot reach '%s': cannot connect to %s port %u%s",
			     url, a->host, a->port, r->refused ? ": Connection refused" : "");
	}
	if (!a->tls)
		return error(eb, YERR(UNAVAILABLE),
			     "cannot reach '%s': the connection closed without an answer (does the "
			     "master serve https?)", url);
	return error(eb, YERR(UNAVAILABLE), "cannot reach '%s': the connection closed without an answer",
		     url);
}

/* Sends one request on ec's connection and runs the loop until it is
 * answered, fails, passes c->timeout_ms or is cancelled: r says which. */
static void send_once(const struct httpc *c, struct ev_req *r, const struct master_addr *a,
		      enum evhttp_cmd_type type, const char *target, const void *body, size_t body_len,
		      const char *content_type)
{
	struct ev_conn *ec = r->ec;
	struct timeval idle = { c->timeout_ms ? c->timeout_ms / 1000 + 1 : IDLE_LIMIT_S, 0 };
	struct event *timer = NULL;
	struct evkeyvalq *h;

	ec->c = c;
	ec->pin_failed = false;
	if (a->tls)
		tl->ERR_clear_error();
	evhttp_connection_set_timeout_tv(ec->evcon, &idle);
	r->req = evhttp_request_new(on_done, r);
	evhttp_request_set_error_cb(r->req, on_error);
	h = evhttp_request_get_output_headers(r->req);
	evhttp_add_header(h, "Host", a->authority);
	evhttp_add_header(h, "User-Agent", "yard");
	if (c->token) {
		char *auth = xasprintf("Bearer %s", c->token);
		evhttp_add_header(h, "Authorization", auth);
		free(auth);
	}
	if (body || type == EVHTTP_REQ_POST || type == EVHTTP_REQ_PUT) {
		char len[32];
		evhttp_add_header(h, "Content-Type", content_type ? content_type : "application/octet-stream");
		snprintf(len, sizeof(len), "%zu", body ? body_len : 0);
		evhttp_add_header(h, "Content-Length", len);
		if (body && body_len)
			evbuffer_add(evhttp_request_get_output_buffer(r->req), body, body_len);
	}
	if (evhttp_make_request(ec->evcon, r->req, type, target)) {
		r->req = NULL; /* evhttp freed it */
		r->errored = r->done = true;
		return;
	}
	/* a new connection's socket exists now (it is connecting): a
	 * request's last segment must not wait for the ACK of the one before
	 * (Nagle's algorithm), as libcurl's do not; a kept one has it */
	if (r->new_conn)
		set_nodelay(ec);
	if (c->timeout_ms) {
		struct timeval tv = { c->timeout_ms / 1000, (c->timeout_ms % 1000) * 1000 };
		timer = evtimer_new(ec->base, on_timeout, r);
		evtimer_add(timer, &tv);
	}
	if (c->cancelled) {
		struct timeval tv = { 0, CANCEL_POLL_MS * 1000 };
		r->cancel_poll = evtimer_new(ec->base, on_cancel_poll, r);
		evtimer_add(r->cancel_poll, &tv);
	}
	/* a write to a connection the master closed must fail, not kill us:
	 * SIGPIPE is blocked in this thread meanwhile, and one our writes
	 * raised is taken before it is unblocked. Only meanwhile, and only in
	 * this thread (others may be in requests of their own): a CLI whose
	 * reader went away (yard logs -f | head) still ends by SIGPIPE as
	 * other programs do */
	sigset_t pipe, old;
	struct timespec now = { 0, 0 };
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, &old);
	while (!r->done)
		if (event_base_loop(ec->base, EVLOOP_ONCE) < 0)
			die("libevent's loop failed");
	while (sigtimedwait(&pipe, NULL, &now) > 0)
		;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (timer)
		event_free(timer);
	if (r->cancel_poll)
		event_free(r->cancel_poll);
	r->cancel_poll = NULL;
}

/* struct httpc_transport's request. */
static int ev_request(struct httpc *c, const char *base, const char *method, const char *path,
		      const void *body, size_t body_len, const char *content_type,
		      struct httpc_response *res, enum httpc_reach *reach, int *os_errno,
		      struct errbuf *eb)
{
	struct ev_conn *ec = c->conn;
	struct master_addr a;
	struct strbuf url = STRBUF_INIT;
	enum evhttp_cmd_type type;
	char *target = NULL;
	int ret = 0;

	*reach = HTTPC_NOT_CONNECTED;
	*os_errno = 0;
	strbuf_addf(&url, "%s%s", base, path);
	if (!parse_master(base, &a)) {
		ret = error(eb, YERR(UNAVAILABLE), "cannot reach '%s': not an http:// or https:// URL",
			    url.buf);
		goto out;
	}
	if (!method_of(method, &type)) {
		ret = error(eb, YERR(INTERNAL), "%s %s: a method this client does not send", method,
			    url.buf);
		goto out;
	}
	target = xasprintf("%s%s", a.prefix, path);
	for (unsigned tries = 0;; tries++) {
		struct ev_req r = { .ec = ec, .res = res, .c = c };
		bool kept;
		if ((ret = connection(ec, c, base, &a, &kept, eb)))
			goto out;
		r.new_conn = !kept;
		send_once(c, &r, &a, type, target, body, body_len, content_type);
		if (r.answered) {
			*reach = HTTPC_ANSWERED;
			goto out;
		}
		/* a kept connection that the master closed meanwhile (its idle
		 * limit; an HTTP/1.0 answer, which evhttp keeps open): once
		 * more on a new one, as libcurl does, when the connection only
		 * ended and nothing else went wrong */
		if (kept && !tries && r.errored && !r.timed_out && !r.cancelled && !ec->pin_failed) {
			drop_connection(ec);
			continue;
		}
		*reach = ec->connected ? HTTPC_MAYBE_SENT : HTTPC_NOT_CONNECTED;
		*os_errno = r.refused ? ECONNREFUSED : 0;
		ret = failure(&r, c, base, &a, url.buf, eb);
		drop_connection(ec);
		break;
	}
out:
	master_addr_release(&a);
	strbuf_release(&url);
	free(target);
	return ret;
}

static char *ev_local_ip(void *conn)
{
	struct ev_conn *ec = conn;
	struct bufferevent *bev = ec->evcon ? evhttp_connection_get_bufferevent(ec->evcon) : NULL;
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	char ip[INET6_ADDRSTRLEN];
	int fd = bev ? bufferevent_getfd(bev) : -1;

	if (fd < 0 || getsockname(fd, (struct sockaddr *)&sa, &len))
		return NULL;
	if (sa.ss_family == AF_INET &&
	    inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, ip, sizeof(ip)))
		return xstrdup(ip);
	if (sa.ss_family == AF_INET6 &&
	    inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, ip, sizeof(ip)))
		return xstrdup(ip);
	return NULL;
}

const struct httpc_transport httpc_ev = {
	.open = ev_open,
	.close = ev_close,
	.request = ev_request,
	.local_ip = ev_local_ip,
};
