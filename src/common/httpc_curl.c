/*
 * The libcurl transport of httpc (struct httpc_transport), which the
 * daemons and the full CLI use, and the upgraded connections of sessions,
 * which only it carries (httpc.h).
 */
#include "base/compat.h"
#include "common/httpc.h"

#include "base/clock.h"
#include "base/parse.h"
#include "base/xalloc.h"
#include "common/curllib.h"
#include "common/httphead.h"
#include "common/httpc_impl.h"
#include "common/wsframe.h"

#include <ctype.h>
#include <poll.h>
#include <sys/socket.h>

/* libcurl's progress callback: non-zero aborts the transfer. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	const struct httpc *c = arg;

	return c->cancelled(c->cancel_arg) ? 1 : 0;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct httpc_response *res = arg;
	strbuf_add(&res->body, data, size * nmemb);
	return size * nmemb;
}

static void take_header(char **slot, const char *line, size_t len, const char *name)
{
	size_t n = strlen(name);
	if (len <= n || strncasecmp(line, name, n) != 0)
		return;
	const char *v = line + n;
	const char *end = line + len;
	while (v < end && isspace((unsigned char)*v))
		v++;
	while (end > v && isspace((unsigned char)end[-1]))
		end--;
	free(*slot);
	*slot = xstrndup(v, (size_t)(end - v));
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct httpc_response *res = arg;
	size_t len = size * nmemb;
	take_header(&res->offset_hdr, data, len, "X-Yard-Offset:");
	take_header(&res->size_hdr, data, len, "X-Yard-Size:");
	take_header(&res->eof_hdr, data, len, "X-Yard-Eof:");
	take_header(&res->content_type, data, len, "Content-Type:");
	take_header(&res->leader_hdr, data, len, "X-Yard-Leader:");
	take_header(&res->retry_after_hdr, data, len, "Retry-After:");
	return len;
}

static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

void httpc_cloexec(void *curl)
{
	curllib.easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, open_socket);
}

/* Sets how the master is verified (struct httpc_tls) on handle h. */
static void set_tls(const struct httpc *c, CURL *h)
{
	if (c->ca_file)
		curllib.easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
	if (c->pin) {
		curllib.easy_setopt(h, CURLOPT_PINNEDPUBLICKEY, c->pin);
		if (!c->ca_file) {
			/* the pin is the whole check: a self-signed certificate
			 * names no CA, and the master may be reached by any name */
			curllib.easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
			curllib.easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
		}
	}
}

/* A failed transfer as the user should read it: trust failures say what to
 * give, the rest is the transport's message. */
static int transfer_error(struct httpc *c, const char *master, const char *url, CURLcode rc,
			  const char *detail, struct errbuf *eb)
{
	const char *why = detail && *detail ? detail : curllib.easy_strerror(rc);

	switch (rc) {
	case CURLE_PEER_FAILED_VERIFICATION:
		return error(eb, YERR(FORBIDDEN),
			     "master %s: certificate not trusted: %s (give --ca FILE or --pin "
			     "sha256//...)", master, why);
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
		return error(eb, YERR(FORBIDDEN),
			     "master %s: the certificate's public key does not match the pin '%s'",
			     master, c->pin ? c->pin : "");
	case CURLE_SSL_CACERT_BADFILE:
		return error(eb, YERR(FORBIDDEN), "master %s: cannot use the CA file '%s': %s",
			     master, c->ca_file ? c->ca_file : "(system)", why);
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
		if (!strncmp(master, "http://", 7))
			return error(eb, YERR(UNAVAILABLE),
				     "cannot reach '%s': %s (does the master serve https?)", url,
				     why);
		break;
	case CURLE_SSL_CONNECT_ERROR:
		if (!strncmp(master, "https://", 8))
			return error(eb, YERR(UNAVAILABLE),
				     "cannot reach '%s': %s (does the master serve plain http?)",
				     url, why);
		break;
	default:
		break;
	}
	return error(eb, YERR(UNAVAILABLE), "cannot reach '%s': %s", url, why);
}

/* Whether a failed transfer provably sent nothing: no connection was made. */
static bool never_connected(CURLcode rc)
{
	return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
	       rc == CURLE_COULDNT_RESOLVE_PROXY;
}

/* struct httpc_transport's request. */
static int request_once(struct httpc *c, const char *base, const char *method, const char *path,
			const void *body, size_t body_len, const char *content_type,
			struct httpc_response *res, enum httpc_reach *reach, int *os_errno,
			struct errbuf *eb)
{
	CURL *h = c->conn;
	struct curl_slist *hdrs = NULL;
	struct strbuf url = STRBUF_INIT, line = STRBUF_INIT;
	char detail[CURL_ERROR_SIZE] = "";
	CURLcode rc;
	int ret = 0;

	curllib.easy_reset(h);
	strbuf_addf(&url, "%s%s", base, path);
	curllib.easy_setopt(h, CURLOPT_URL, url.buf);
	httpc_cloexec(h);
	curllib.easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curllib.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curllib.easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curllib.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curllib.easy_setopt(h, CURLOPT_WRITEDATA, res);
	curllib.easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curllib.easy_setopt(h, CURLOPT_HEADERDATA, res);
	curllib.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curllib.easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
	set_tls(c, h);
	if (c->timeout_ms)
		curllib.easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	if (c->cancelled) {
		curllib.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curllib.easy_setopt(h, CURLOPT_XFERINFODATA, c);
		curllib.easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	}
	if (c->token) {
		strbuf_addf(&line, "Authorization: Bearer %s", c->token);
		hdrs = curllib.slist_append(hdrs, line.buf);
	}
	if (body || !strcmp(method, "POST") || !strcmp(method, "PUT")) {
		strbuf_reset(&line);
		strbuf_addf(&line, "Content-Type: %s",
			    content_type ? content_type : "application/octet-stream");
		hdrs = curllib.slist_append(hdrs, line.buf);
		/* no "Expect: 100-continue" round trip for large bodies */
		hdrs = curllib.slist_append(hdrs, "Expect:");
		curllib.easy_setopt(h, CURLOPT_POSTFIELDS, body ? (const char *)body : "");
		curllib.easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
	}
	if (!strcmp(method, "GET"))
		curllib.easy_setopt(h, CURLOPT_HTTPGET, 1L);
	curllib.easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	rc = curllib.easy_perform(h);
	*reach = HTTPC_ANSWERED;
	*os_errno = 0;
	if (rc != CURLE_OK) {
		long oserr = 0;
		*reach = never_connected(rc) ? HTTPC_NOT_CONNECTED : HTTPC_MAYBE_SENT;
		curllib.easy_getinfo(h, CURLINFO_OS_ERRNO, &oserr);
		*os_errno = (int)oserr;
		ret = transfer_error(c, base, url.buf, rc, detail, eb);
		goto out;
	}
	curllib.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &res->status);
out:
	curllib.slist_free_all(hdrs);
	strbuf_release(&url);
	strbuf_release(&line);
	return ret;
}

static void *curl_open(void)
{
	struct errbuf eb = ERRBUF_INIT;
	CURL *h;

	/* loaded by the first client: a missing libcurl is a broken install
	 * (the package depends on it) */
	if (curllib_load(&eb))
		die("%s", eb.msg);
	if (!(h = curllib.easy_init()))
		die("cannot initialise libcurl");
	return h;
}

static void curl_close(void *conn)
{
	curllib.easy_cleanup(conn);
}

static char *curl_local_ip(void *conn)
{
	char *ip = NULL;

	if (curllib.easy_getinfo(conn, CURLINFO_LOCAL_IP, &ip) == CURLE_OK && ip && *ip)
		return xstrdup(ip);
	return NULL;
}

const struct httpc_transport httpc_curl = {
	.open = curl_open,
	.close = curl_close,
	.request = request_once,
	.local_ip = curl_local_ip,
};

/* ---- upgraded connections (sessions) ---- */

#define UPGRADE_TIMEOUT_MS 15000L
/* the most of an error reply's body read after a refused upgrade */
#define UPGRADE_ERROR_BODY_MAX (1 << 20)

/* Waits until fd is ready for events or deadline (mono_ms; 0: none)
 * passes: 0 when ready, YERR(UNAVAILABLE) when the time is up. */
static int wait_fd(int fd, short events, uint64_t deadline, const char *what, struct errbuf *eb)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		uint64_t now = mono_ms();
		int ms = -1, r;
		if (deadline) {
			if (now >= deadline)
				return error(eb, YERR(UNAVAILABLE), "%s: no answer in time", what);
			ms = (int)(deadline - now);
		}
		r = poll(&p, 1, ms);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return error(eb, YERR(UNAVAILABLE), "%s: poll: %s", what, strerror(errno));
	}
}

int httpc_stream_send(struct httpc_stream *s, const void *buf, size_t len, size_t *sent,
		      struct errbuf *eb)
{
	CURLcode rc;

	size_t n = 0;

	*sent = 0;
	if (!len)
		return 0;
	/* OpenSSL takes a write it answered "again" only with the same bytes
	 * at the same address: the caller's buffer may have moved since */
	if (!s->wlen) {
		s->wlen = len < sizeof(s->wbuf) ? len : sizeof(s->wbuf);
		memcpy(s->wbuf, buf, s->wlen);
	}
	rc = curllib.easy_send(s->curl, s->wbuf, s->wlen, &n);
	if (rc == CURLE_AGAIN || (rc == CURLE_OK && !n))
		return HTTPC_STREAM_AGAIN;
	if (rc != CURLE_OK) {
		s->wlen = 0;
		return error(eb, YERR(UNAVAILABLE), "the connection broke: %s", curllib.easy_strerror(rc));
	}
	/* a plain socket may take part of it: the rest is the caller's next bytes */
	memmove(s->wbuf, s->wbuf + n, s->wlen - n);
	s->wlen -= n;
	*sent = n;
	return 0;
}

int httpc_stream_send_all(struct httpc_stream *s, const void *buf, size_t len, long timeout_ms,
			  struct errbuf *eb)
{
	const char *p = buf;
	uint64_t deadline = timeout_ms > 0 ? mono_ms() + (uint64_t)timeout_ms : 0;

	while (len) {
		size_t n = 0;
		int rc = httpc_stream_send(s, p, len, &n, eb);
		if (rc < 0)
			return rc;
		if (rc == HTTPC_STREAM_AGAIN) {
			if ((rc = wait_fd(s->fd, POLLOUT, deadline, "sending", eb)))
				return rc;
			continue;
		}
		p += n;
		len -= n;
	}
	return 0;
}

int httpc_stream_recv(struct httpc_stream *s, void *buf, size_t len, size_t *got,
		      struct errbuf *eb)
{
	CURLcode rc;

	*got = 0;
	if (s->pending.len) {
		size_t n = s->pending.len < len ? s->pending.len : len;
		memcpy(buf, s->pending.buf, n);
		memmove(s->pending.buf, s->pending.buf + n, s->pending.len - n);
		strbuf_setlen(&s->pending, s->pending.len - n);
		*got = n;
		return 0;
	}
	rc = curllib.easy_recv(s->curl, buf, len, got);
	if (rc == CURLE_AGAIN)
		return HTTPC_STREAM_AGAIN;
	if (rc != CURLE_OK)
		return error(eb, YERR(UNAVAILABLE), "the connection broke: %s", curllib.easy_strerror(rc));
	return *got ? 0 : HTTPC_STREAM_EOF;
}

void httpc_stream_close(struct httpc_stream *s)
{
	if (s->curl)
		curllib.easy_cleanup(s->curl);
	s->curl = NULL;
	s->fd = -1;
	strbuf_release(&s->pending);
	free(s->protocol);
	s->protocol = NULL;
}

/* The request of one upgrade to base (a master's URL), with ws_key when
 * it is a WebSocket's. */
static void upgrade_request(const struct httpc *c, const char *base, const struct httpc_upgrade_req *req,
			    const char *ws_key, struct strbuf *out)
{
	const char *host = strstr(base, "://");
	size_t hlen;

	host = host ? host + 3 : base;
	hlen = strcspn(host, "/");
	/* a master's URL may carry a path prefix: the request's path goes under it */
	strbuf_addf(out, "GET %s%s HTTP/1.1\r\nHost: %.*s\r\nUser-Agent: yard\r\n", host + hlen,
		    req->path, (int)hlen, host);
	if (c->token)
		strbuf_addf(out, "Authorization: Bearer %s\r\n", c->token);
	strbuf_addf(out, "Connection: Upgrade\r\nUpgrade: %s\r\n", req->protocol);
	if (ws_key)
		strbuf_addf(out, "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n", ws_key);
	for (size_t i = 0; req->headers && req->headers[i]; i++)
		strbuf_addf(out, "%s\r\n", req->headers[i]);
	strbuf_addstr(out, "\r\n");
}

/* Reads a refused upgrade's body after its head (head_len of what is in
 * got): its Content-Length (capped), or to the end of the connection. */
static void upgrade_error_body(struct httpc_stream *s, const struct http_head *h, struct strbuf *got,
			       size_t head_len, uint64_t deadline, struct strbuf *body)
{
	const char *cl = http_head_get(h, "Content-Length");
	uint64_t want = UPGRADE_ERROR_BODY_MAX;
	char buf[16384];

	if (cl) {
		uint64_t v = 0;
		const char *p = cl;
		if (!parse_u64(&p, &v) && !*p && v < want)
			want = v;
	}
	strbuf_add(body, got->buf + head_len, got->len - head_len < want ? got->len - head_len : (size_t)want);
	while (body->len < want) {
		size_t n = 0;
		int rc = httpc_stream_recv(s, buf, sizeof(buf), &n, NULL);
		if (rc == HTTPC_STREAM_AGAIN) {
			if (wait_fd(s->fd, POLLIN, deadline, "reading", NULL))
				break;
			continue;
		}
		if (rc)
			break;
		strbuf_add(body, buf, body->len + n > want ? (size_t)(want - body->len) : n);
	}
}

/* One upgrade to base. 0 with s open; otherwise *rc_out says how the
 * connection went (CURLE_OK once made), and a refusal fills res. */
static int upgrade_once(struct httpc *c, const char *base, const struct httpc_upgrade_req *req,
			struct httpc_stream *s, struct httpc_response *res, CURLcode *rc_out,
			struct errbuf *eb)
{
	char detail[CURL_ERROR_SIZE] = "", key[25], accept[29];
	struct strbuf url = STRBUF_INIT, out = STRBUF_INIT, got = STRBUF_INIT;
	struct http_head h;
	bool ws = !strcasecmp(req->protocol, "websocket");
	uint64_t deadline = mono_ms() + (uint64_t)(req->timeout_ms > 0 ? req->timeout_ms : UPGRADE_TIMEOUT_MS);
	curl_socket_t sock = CURL_SOCKET_BAD;
	size_t head_len = 0;
	CURLcode rc;
	int ret = 0;

	/* a program on another transport loads libcurl at its first session */
	if (curllib_load(eb))
		return YERR(INTERNAL);
	memset(&h, 0, sizeof(h));
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	strbuf_init(&s->pending, 0);
	s->curl = curllib.easy_init();
	if (!s->curl)
		die("cannot initialise libcurl");
	strbuf_addf(&url, "%s%s", base, req->path);
	curllib.easy_setopt(s->curl, CURLOPT_URL, url.buf);
	httpc_cloexec(s->curl);
	curllib.easy_setopt(s->curl, CURLOPT_CONNECT_ONLY, 1L);
	curllib.easy_setopt(s->curl, CURLOPT_NOSIGNAL, 1L);
	curllib.easy_setopt(s->curl, CURLOPT_TCP_NODELAY, 1L);
	curllib.easy_setopt(s->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curllib.easy_setopt(s->curl, CURLOPT_ERRORBUFFER, detail);
	set_tls(c, s->curl);
	rc = curllib.easy_perform(s->curl);
	*rc_out = rc;
	if (rc != CURLE_OK) {
		ret = transfer_error(c, base, url.buf, rc, detail, eb);
		goto fail;
	}
	curllib.easy_setopt(s->curl, CURLOPT_ERRORBUFFER, NULL);
	if (curllib.easy_getinfo(s->curl, CURLINFO_ACTIVESOCKET, &sock) != CURLE_OK || sock == CURL_SOCKET_BAD) {
		ret = error(eb, YERR(UNAVAILABLE), "cannot reach '%s': no socket after connecting", url.buf);
		goto fail;
	}
	s->fd = (int)sock;
	if (ws)
		ws_key_new(key);
	upgrade_request(c, base, req, ws ? key : NULL, &out);
	if ((ret = httpc_stream_send_all(s, out.buf, out.len, (long)(deadline - mono_ms()), eb)))
		goto fail;
	/* the head of the answer, bounded */
	while (!(head_len = http_head_end(got.buf, got.len))) {
		char buf[4096];
		size_t n = 0;
		if (got.len > HTTP_HEAD_MAX) {
			ret = error(eb, YERR(UNAVAILABLE), "'%s' answered a head of over %d bytes", url.buf,
				    HTTP_HEAD_MAX);
			goto fail;
		}
		int r = httpc_stream_recv(s, buf, sizeof(buf), &n, eb);
		if (r == HTTPC_STREAM_AGAIN) {
			if ((ret = wait_fd(s->fd, POLLIN, deadline, url.buf, eb)))
				goto fail;
			continue;
		}
		if (r == HTTPC_STREAM_EOF) {
			ret = error(eb, YERR(UNAVAILABLE), "'%s' closed the connection without an answer",
				    url.buf);
			goto fail;
		}
		if (r < 0) {
			ret = r;
			goto fail;
		}
		strbuf_add(&got, buf, n);
	}
	if ((ret = http_response_head_parse(got.buf, head_len, &h, eb))) {
		char *why = xstrdup(eb->msg);
		ret = error(eb, YERR(UNAVAILABLE), "'%s': %s", url.buf, why);
		free(why);
		goto fail;
	}
	res->status = h.status;
	if (h.status != 101) {
		const char *ct = http_head_get(&h, "Content-Type"), *leader = http_head_get(&h, "X-Yard-Leader");
		upgrade_error_body(s, &h, &got, head_len, deadline, &res->body);
		res->content_type = ct ? xstrdup(ct) : NULL;
		res->leader_hdr = leader ? xstrdup(leader) : NULL;
		ret = 0; /* an answer: the caller reads it */
		goto fail;
	}
	if (!http_head_has_token(&h, "Upgrade", req->protocol)) {
		ret = error(eb, YERR(UNAVAILABLE), "'%s' answered 101 without 'Upgrade: %s'", url.buf,
			    req->protocol);
		goto fail;
	}
	if (ws) {
		const char *got_accept = http_head_get(&h, "Sec-WebSocket-Accept");
		const char *proto = http_head_get(&h, "Sec-WebSocket-Protocol");
		ws_accept_key(key, accept);
		if (!got_accept || strcmp(got_accept, accept)) {
			ret = error(eb, YERR(UNAVAILABLE), "'%s' answered the WebSocket handshake with a "
				    "wrong accept key", url.buf);
			goto fail;
		}
		s->protocol = proto ? xstrdup(proto) : NULL;
	}
	strbuf_add(&s->pending, got.buf + head_len, got.len - head_len);
	goto out;
fail:
	strbuf_release(&s->pending);
	free(s->protocol);
	s->protocol = NULL;
	if (s->curl)
		curllib.easy_cleanup(s->curl);
	s->curl = NULL;
	s->fd = -1;
	if (!ret && res->status == 101)
		ret = YERR(UNAVAILABLE); /* cannot happen: a 101 is taken above */
	if (!ret)
		ret = 1; /* a refusal in res */
out:
	http_head_release(&h);
	strbuf_release(&url);
	strbuf_release(&out);
	strbuf_release(&got);
	return ret;
}

int httpc_upgrade(struct httpc *c, const struct httpc_upgrade_req *req, struct httpc_stream *s,
		  long *status, struct errbuf *eb)
{
	struct httpc_response res;
	unsigned hops = 0;
	size_t tries = 0;
	int ret;

	if (status)
		*status = 0;
	httpc_response_init(&res);
	for (;;) {
		size_t i = c->cur;
		char *leader = NULL;
		CURLcode rc = CURLE_OK;

		httpc_response_release(&res);
		ret = upgrade_once(c, c->urls[i], req, s, &res, &rc, eb);
		tries++;
		if (ret == 0)
			break;
		if (ret < 0) {
			/* a master that nothing listens on: the next one */
			if (never_connected(rc) && tries < c->nurls) {
				c->cur = (i + 1) % c->nurls;
				continue;
			}
			break;
		}
		/* refused: a standby names the leader, or the answer is the error */
		if (status)
			*status = res.status;
		if (httpc_standby_answer(&res, c->urls[i], &leader) && hops < HTTPC_LEADER_HOPS) {
			size_t next = leader ? httpc_leader_index(c, leader) : SIZE_MAX;
			free(leader);
			if (next == SIZE_MAX && tries < c->nurls)
				next = (i + 1) % c->nurls;
			if (next != SIZE_MAX && next != i) {
				hops++;
				c->cur = next;
				continue;
			}
		}
		ret = httpc_error_from_reply(&res, eb);
		break;
	}
	httpc_response_release(&res);
	return ret;
}
