#include "base/compat.h"
#include "common/httpc.h"

#include "base/clock.h"
#include "base/crypto.h"
#include "base/parse.h"
#include "base/fsutil.h"
#include "base/xalloc.h"
#include "common/httphead.h"
#include "common/wsframe.h"

#include <ctype.h>
#include <curl/curl.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

/* Adds the URL of n bytes to c's list, without its trailing slashes;
 * returns its index. */
static size_t add_url(struct httpc *c, const char *url, size_t n)
{
	while (n && url[n - 1] == '/')
		n--;
	c->urls = xrealloc(c->urls, (c->nurls + 1) * sizeof(*c->urls));
	c->urls[c->nurls] = xstrndup(url, n);
	return c->nurls++;
}

void httpc_init(struct httpc *c, const char *base_url, const struct httpc_tls *tls,
		const char *token)
{
	c->curl = curl_easy_init();
	if (!c->curl)
		die("cannot initialise libcurl");
	c->urls = NULL;
	c->nurls = 0;
	for (const char *p = base_url;;) {
		size_t n, m;
		while (*p == ' ')
			p++;
		n = strcspn(p, ",");
		for (m = n; m && p[m - 1] == ' '; m--)
			;
		if (m && c->nurls < HTTPC_URLS_MAX)
			add_url(c, p, m);
		if (!p[n])
			break;
		p += n + 1;
	}
	if (!c->nurls)
		add_url(c, "", 0); /* nothing to reach: every request fails as it did */
	c->cur = 0;
	c->refused = false;
	c->token = token ? xstrdup(token) : NULL;
	c->ca_file = tls && tls->ca_file ? xstrdup(tls->ca_file) : NULL;
	c->pin = tls && tls->pin ? xstrdup(tls->pin) : NULL;
	c->timeout_ms = 0;
	c->retry_429 = 0;
	c->cancelled = NULL;
	c->cancel_arg = NULL;
}

void httpc_init_like(struct httpc *c, const struct httpc *proto)
{
	struct httpc_tls tls = { proto->ca_file, proto->pin };

	httpc_init(c, proto->urls[proto->cur], &tls, proto->token);
	for (size_t i = 0; i < proto->nurls; i++)
		if (i != proto->cur && c->nurls < HTTPC_URLS_MAX)
			add_url(c, proto->urls[i], strlen(proto->urls[i]));
	c->timeout_ms = proto->timeout_ms;
	c->retry_429 = proto->retry_429;
}

void httpc_release(struct httpc *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	for (size_t i = 0; i < c->nurls; i++)
		free(c->urls[i]);
	free(c->urls);
	free(c->token);
	free(c->ca_file);
	free(c->pin);
	c->curl = NULL;
	c->urls = NULL;
	c->nurls = c->cur = 0;
	c->token = c->ca_file = c->pin = NULL;
}

const char *httpc_url(const struct httpc *c)
{
	return c->urls[c->cur];
}

/* Whether the n bytes at url are an http:// or https:// URL with a host. */
static bool url_valid(const char *url, size_t n)
{
	size_t skip = n > 7 && !strncmp(url, "http://", 7)    ? 7
		    : n > 8 && !strncmp(url, "https://", 8) ? 8
							    : 0;

	if (!skip || url[skip] == '/' || url[skip] == ':')
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)url[i] <= ' ' || url[i] == 0x7f)
			return false;
	return true;
}

int httpc_urls_check(const char *list, const char *opt, struct errbuf *eb)
{
	size_t count = 0;

	for (const char *p = list;;) {
		size_t n, m;
		while (*p == ' ')
			p++;
		n = strcspn(p, ",");
		for (m = n; m && p[m - 1] == ' '; m--)
			;
		if (!url_valid(p, m))
			return error(eb, YERR(BAD_REQUEST),
				     "%s '%s': '%.*s' is not an http:// or https:// URL", opt, list,
				     (int)m, p);
		if (++count > HTTPC_URLS_MAX)
			return error(eb, YERR(BAD_REQUEST), "%s '%s': more than %d masters", opt,
				     list, HTTPC_URLS_MAX);
		if (!p[n])
			break;
		p += n + 1;
	}
	return 0;
}

void httpc_set_token(struct httpc *c, const char *token)
{
	free(c->token);
	c->token = token ? xstrdup(token) : NULL;
}

void httpc_response_init(struct httpc_response *res)
{
	memset(res, 0, sizeof(*res));
	strbuf_init(&res->body, 0);
}

/* Forgets the last answer; the body's buffer is kept for the next (a
 * stager fetches chunk after chunk of 8 MiB into one response: fresh
 * memory each time cost page faults for every byte). */
static void response_reset(struct httpc_response *res)
{
	strbuf_reset(&res->body);
	free(res->offset_hdr);
	free(res->size_hdr);
	free(res->eof_hdr);
	free(res->content_type);
	free(res->leader_hdr);
	res->offset_hdr = res->size_hdr = res->eof_hdr = res->content_type = res->leader_hdr = NULL;
	res->status = 0;
}

void httpc_response_release(struct httpc_response *res)
{
	response_reset(res);
	strbuf_release(&res->body);
}

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
	return len;
}

static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

void httpc_cloexec(void *curl)
{
	curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, open_socket);
}

/* Sets how the master is verified (struct httpc_tls) on handle h. */
static void set_tls(const struct httpc *c, CURL *h)
{
	if (c->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
	if (c->pin) {
		curl_easy_setopt(h, CURLOPT_PINNEDPUBLICKEY, c->pin);
		if (!c->ca_file) {
			/* the pin is the whole check: a self-signed certificate
			 * names no CA, and the master may be reached by any name */
			curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
			curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
		}
	}
}

/* A failed transfer as the user should read it: trust failures say what to
 * give, the rest is the transport's message. */
static int transfer_error(struct httpc *c, const char *master, const char *url, CURLcode rc,
			  const char *detail, struct errbuf *eb)
{
	const char *why = detail && *detail ? detail : curl_easy_strerror(rc);

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

/* One request to the master at base (one of c->urls); OUT *rc_out: how
 * the transfer went. */
static int request_once(struct httpc *c, const char *base, const char *method, const char *path,
			const void *body, size_t body_len, const char *content_type,
			struct httpc_response *res, CURLcode *rc_out, struct errbuf *eb)
{
	CURL *h = c->curl;
	struct curl_slist *hdrs = NULL;
	struct strbuf url = STRBUF_INIT, line = STRBUF_INIT;
	char detail[CURL_ERROR_SIZE] = "";
	CURLcode rc;
	int ret = 0;

	response_reset(res);
	curl_easy_reset(h);
	strbuf_addf(&url, "%s%s", base, path);
	curl_easy_setopt(h, CURLOPT_URL, url.buf);
	httpc_cloexec(h);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, res);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, res);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
	set_tls(c, h);
	if (c->timeout_ms)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	if (c->cancelled) {
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	}
	if (c->token) {
		strbuf_addf(&line, "Authorization: Bearer %s", c->token);
		hdrs = curl_slist_append(hdrs, line.buf);
	}
	if (body || !strcmp(method, "POST") || !strcmp(method, "PUT")) {
		strbuf_reset(&line);
		strbuf_addf(&line, "Content-Type: %s",
			    content_type ? content_type : "application/octet-stream");
		hdrs = curl_slist_append(hdrs, line.buf);
		/* no "Expect: 100-continue" round trip for large bodies */
		hdrs = curl_slist_append(hdrs, "Expect:");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? (const char *)body : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
	}
	if (!strcmp(method, "GET"))
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	rc = curl_easy_perform(h);
	*rc_out = rc;
	if (rc != CURLE_OK) {
		ret = transfer_error(c, base, url.buf, rc, detail, eb);
		goto out;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &res->status);
out:
	curl_slist_free_all(hdrs);
	strbuf_release(&url);
	strbuf_release(&line);
	return ret;
}

/* Whether two URLs have the same scheme. */
static bool same_scheme(const char *a, const char *b)
{
	size_t n = strcspn(a, ":");

	return n == strcspn(b, ":") && !strncasecmp(a, b, n);
}

/*
 * Whether res is a standby's answer (503 not_leader); if so, *leader gets
 * the leader it names (caller frees), or NULL when it names none, or one
 * of another scheme than base's (never sent from https to plain http).
 */
static bool standby_answer(const struct httpc_response *res, const char *base, char **leader)
{
	json_t *doc, *e;
	const char *code, *l;
	bool standby;

	*leader = NULL;
	if (res->status != 503)
		return false;
	doc = json_loadb(res->body.buf, res->body.len, 0, NULL);
	e = json_object_get(doc, "error");
	code = json_string_value(json_object_get(e, "code"));
	standby = code && !strcmp(code, "not_leader");
	l = json_string_value(json_object_get(e, "leader"));
	if (standby && !l && json_object_get(e, "leader") == NULL)
		l = res->leader_hdr; /* the body names none: the header may */
	if (standby && l && url_valid(l, strlen(l)) && same_scheme(l, base))
		*leader = xstrdup(l);
	json_decref(doc);
	return standby;
}

/* The index in c->urls of a leader URL, added when it is not there; SIZE_MAX
 * when the list is full. */
static size_t leader_index(struct httpc *c, const char *leader)
{
	size_t n = strlen(leader);

	while (n && leader[n - 1] == '/')
		n--;
	for (size_t i = 0; i < c->nurls; i++)
		if (strlen(c->urls[i]) == n && !strncasecmp(c->urls[i], leader, n))
			return i;
	return c->nurls < HTTPC_URLS_MAX ? add_url(c, leader, n) : SIZE_MAX;
}

/* Whether a failed transfer provably sent nothing: no connection was made. */
static bool never_connected(CURLcode rc)
{
	return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
	       rc == CURLE_COULDNT_RESOLVE_PROXY;
}

/*
 * One request to the leader among c's masters: from c->cur, each URL at
 * most once for a standby naming no leader or a connection not made, plus
 * up to HTTPC_LEADER_HOPS leaders named by standbys (httpc.h's header).
 */
static int request_leader(struct httpc *c, const char *method, const char *path,
			  const void *body, size_t body_len, const char *content_type,
			  struct httpc_response *res, struct errbuf *eb)
{
	bool tried[HTTPC_URLS_MAX] = { false };
	struct errbuf last = ERRBUF_INIT;    /* the last failure; eb gets only the outcome */
	struct errbuf standby = ERRBUF_INIT; /* the last standby's not_leader, if one answered */
	struct strbuf names = STRBUF_INIT;
	unsigned hops = 0, ntried = 0;
	bool all_refused = true;
	int ret;

	for (;;) {
		size_t i = c->cur, next = SIZE_MAX;
		char *leader = NULL;
		CURLcode rc = CURLE_OK;
		if (!tried[i]) {
			strbuf_addf(&names, "%s%s", ntried++ ? ", " : "", c->urls[i]);
			tried[i] = true;
		}
		ret = request_once(c, c->urls[i], method, path, body, body_len, content_type, res,
				   &rc, &last);
		if (!ret && !standby_answer(res, c->urls[i], &leader)) {
			all_refused = false;
			break; /* the leader's answer, or a master's of before standbys */
		}
		if (!ret) {
			all_refused = false;
			ret = httpc_error_from_reply(res, &standby);
			if (leader && hops < HTTPC_LEADER_HOPS)
				next = leader_index(c, leader);
			free(leader);
			if (next != SIZE_MAX && next != i) {
				hops++;
				c->cur = next;
				continue;
			}
			next = SIZE_MAX; /* it names none, or itself: the next master */
		} else if (never_connected(rc)) {
			long oserr = 0;
			curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &oserr);
			all_refused = all_refused && oserr == ECONNREFUSED;
		} else {
			/* it may have been processed: not sent again, but the
			 * next request starts at the next master */
			all_refused = false;
			standby.code = 0; /* this failure is the news, not a standby's */
			c->cur = (i + 1) % c->nurls;
			break;
		}
		for (size_t k = 1; k <= c->nurls && next == SIZE_MAX; k++)
			if (!tried[(i + k) % c->nurls])
				next = (i + k) % c->nurls;
		if (next == SIZE_MAX || next == i)
			break; /* one round: every master tried */
		c->cur = next;
	}
	c->refused = ret && all_refused;
	if (ret && standby.code) {
		/* a standby answered, the rest had no connection: that is why */
		ret = standby.code;
		last = standby;
	}
	if (ret && ntried > 1)
		error_field(eb, ret, last.field, "%s (masters tried: %s)", last.msg, names.buf);
	else if (ret && eb)
		*eb = last;
	strbuf_release(&names);
	return ret;
}

int httpc_request(struct httpc *c, const char *method, const char *path,
		  const void *body, size_t body_len, const char *content_type,
		  struct httpc_response *res, struct errbuf *eb)
{
	for (unsigned tries = 0;; tries++) {
		int ret = request_leader(c, method, path, body, body_len, content_type, res, eb);
		curl_off_t after = 0;
		if (ret || res->status != 429 || tries >= c->retry_429)
			return ret;
		/* a refused request changed nothing on the master: sending it
		 * again once the caller's bucket has refilled is safe */
		curl_easy_getinfo(c->curl, CURLINFO_RETRY_AFTER, &after);
		if (after < 1)
			after = 1;
		if (after > HTTPC_RETRY_AFTER_MAX_S)
			after = HTTPC_RETRY_AFTER_MAX_S;
		struct timespec ts = { (time_t)after, 0 };
		nanosleep(&ts, NULL);
	}
}

int httpc_error_from_reply(const struct httpc_response *res, struct errbuf *eb)
{
	json_error_t jerr;
	json_t *doc = json_loadb(res->body.buf, res->body.len, 0, &jerr);
	json_t *e = doc ? json_object_get(doc, "error") : NULL;
	int code;
	if (!json_is_object(e)) {
		code = res->status == 401 ? YERR(UNAUTHORIZED)
		     : res->status == 403 ? YERR(FORBIDDEN)
		     : res->status == 404 ? YERR(NOT_FOUND)
		     : res->status >= 500 ? YERR(INTERNAL) : YERR(BAD_REQUEST);
		error(eb, code, "server answered HTTP %ld", res->status);
	} else {
		const char *field = json_string_value(json_object_get(e, "field"));
		const char *msg = json_string_value(json_object_get(e, "message"));
		code = yerr_from_code_str(json_string_value(json_object_get(e, "code")));
		error_field(eb, code, field, "%s", msg ? msg : yerr_default_message(code));
	}
	json_decref(doc);
	return code;
}

int httpc_json(struct httpc *c, const char *method, const char *path, json_t *body,
	       json_t **out, long *status, struct errbuf *eb)
{
	struct httpc_response res;
	char *text = NULL;
	int ret;
	json_error_t jerr;

	if (out)
		*out = NULL;
	httpc_response_init(&res);
	if (body)
		text = json_dumps(body, JSON_COMPACT);
	ret = httpc_request(c, method, path, text, text ? strlen(text) : 0,
			    body ? "application/json" : NULL, &res, eb);
	free(text);
	if (ret < 0)
		goto out;
	if (status)
		*status = res.status;
	if (res.status >= 400) {
		ret = httpc_error_from_reply(&res, eb);
		goto out;
	}
	if (out && res.body.len) {
		*out = json_loadb(res.body.buf, res.body.len, 0, &jerr);
		if (!*out)
			ret = error(eb, YERR(INTERNAL), "bad JSON from server: %s", jerr.text);
	}
out:
	httpc_response_release(&res);
	return ret;
}

/* One pin: "sha256//" and the base64 of 32 bytes (43 characters and '='). */
static bool pin_valid(const char *p, size_t n)
{
	static const char prefix[] = "sha256//";
	size_t plen = sizeof(prefix) - 1;

	if (n != plen + 44 || strncmp(p, prefix, plen) || p[n - 1] != '=')
		return false;
	for (size_t i = plen; i < n - 1; i++)
		if (!isalnum((unsigned char)p[i]) && p[i] != '+' && p[i] != '/')
			return false;
	return true;
}

int httpc_tls_check(const struct httpc_tls *tls, const char *opt_ca, const char *opt_pin,
		    struct errbuf *eb)
{
	if (tls->ca_file && access(tls->ca_file, R_OK))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': %s", opt_ca, tls->ca_file,
			     strerror(errno));
	if (tls->pin) {
		const char *p = tls->pin;
		for (;;) {
			size_t n = strcspn(p, ";");
			if (!pin_valid(p, n))
				return error(eb, YERR(BAD_REQUEST),
					     "%s '%s': expected sha256// and the base64 SHA-256 of "
					     "the master's public key (the master prints it)",
					     opt_pin, tls->pin);
			if (!p[n])
				break;
			p += n + 1;
		}
	}
	return 0;
}

char *url_escape(const char *s)
{
	struct strbuf sb = STRBUF_INIT;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~')
			strbuf_addch(&sb, ch);
		else
			strbuf_addf(&sb, "%%%02X", ch);
	}
	return strbuf_detach(&sb, NULL);
}

int httpc_get_archive(struct httpc *c, const char *digest, const char *path, struct errbuf *eb)
{
	const char *hex = !strncmp(digest, "sha256:", 7) ? digest + 7 : "";
	struct httpc_response res;
	char got[SHA256_HEX_LEN + 1];
	int ret;

	if (strlen(hex) != SHA256_HEX_LEN || strspn(hex, "0123456789abcdef") != SHA256_HEX_LEN)
		return error(eb, YERR(BAD_REQUEST), "'%s' is not a digest (sha256:HEX)", digest);
	char *url = xasprintf("/v1/code/%s", digest);
	httpc_response_init(&res);
	ret = httpc_request(c, "GET", url, NULL, 0, NULL, &res, eb);
	if (!ret && res.status != 200)
		ret = httpc_error_from_reply(&res, eb);
	if (!ret) {
		sha256_hex(res.body.buf, res.body.len, got);
		if (strcmp(got, hex))
			ret = error(eb, YERR(IO), "archive '%s' arrived with digest 'sha256:%s'", digest, got);
		else if (write_file_atomic(path, res.body.buf, res.body.len, 0644) < 0)
			ret = error(eb, YERR(IO), "cannot write '%s': %s", path, strerror(errno));
	}
	httpc_response_release(&res);
	free(url);
	return ret;
}

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
	rc = curl_easy_send(s->curl, s->wbuf, s->wlen, &n);
	if (rc == CURLE_AGAIN || (rc == CURLE_OK && !n))
		return HTTPC_STREAM_AGAIN;
	if (rc != CURLE_OK) {
		s->wlen = 0;
		return error(eb, YERR(UNAVAILABLE), "the connection broke: %s", curl_easy_strerror(rc));
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
	rc = curl_easy_recv(s->curl, buf, len, got);
	if (rc == CURLE_AGAIN)
		return HTTPC_STREAM_AGAIN;
	if (rc != CURLE_OK)
		return error(eb, YERR(UNAVAILABLE), "the connection broke: %s", curl_easy_strerror(rc));
	return *got ? 0 : HTTPC_STREAM_EOF;
}

void httpc_stream_close(struct httpc_stream *s)
{
	if (s->curl)
		curl_easy_cleanup(s->curl);
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

	memset(&h, 0, sizeof(h));
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	strbuf_init(&s->pending, 0);
	s->curl = curl_easy_init();
	if (!s->curl)
		die("cannot initialise libcurl");
	strbuf_addf(&url, "%s%s", base, req->path);
	curl_easy_setopt(s->curl, CURLOPT_URL, url.buf);
	httpc_cloexec(s->curl);
	curl_easy_setopt(s->curl, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(s->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(s->curl, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(s->curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(s->curl, CURLOPT_ERRORBUFFER, detail);
	set_tls(c, s->curl);
	rc = curl_easy_perform(s->curl);
	*rc_out = rc;
	if (rc != CURLE_OK) {
		ret = transfer_error(c, base, url.buf, rc, detail, eb);
		goto fail;
	}
	curl_easy_setopt(s->curl, CURLOPT_ERRORBUFFER, NULL);
	if (curl_easy_getinfo(s->curl, CURLINFO_ACTIVESOCKET, &sock) != CURLE_OK || sock == CURL_SOCKET_BAD) {
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
		curl_easy_cleanup(s->curl);
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
		if (standby_answer(&res, c->urls[i], &leader) && hops < HTTPC_LEADER_HOPS) {
			size_t next = leader ? leader_index(c, leader) : SIZE_MAX;
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
