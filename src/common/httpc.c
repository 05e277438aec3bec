/*
 * What every transport shares: the masters and which leads, the token and
 * TLS trust, answers and their errors (httpc.h). A transport only carries
 * one request to one master (struct httpc_transport).
 */
#include "base/compat.h"
#include "common/httpc.h"

#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/xalloc.h"
#include "common/httpc_impl.h"

#include <ctype.h>
#include <time.h>

/* the transport of the clients httpc_init makes (httpc_global_init) */
static const struct httpc_transport *transport;

void httpc_global_init(const struct httpc_transport *t)
{
	transport = t;
}

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

/* httpc_init on transport t. */
static void init_on(struct httpc *c, const struct httpc_transport *t, const char *base_url,
		    const struct httpc_tls *tls, const char *token)
{
	c->tp = t;
	c->conn = t->open();
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

void httpc_init(struct httpc *c, const char *base_url, const struct httpc_tls *tls,
		const char *token)
{
	if (!transport)
		die("httpc_init: no transport (httpc_global_init was not called)");
	init_on(c, transport, base_url, tls, token);
}

void httpc_init_bulk(struct httpc *c, const char *base_url, const struct httpc_tls *tls,
		     const char *token)
{
	init_on(c, &httpc_curl, base_url, tls, token);
}

void httpc_init_like(struct httpc *c, const struct httpc *proto)
{
	struct httpc_tls tls = { proto->ca_file, proto->pin };

	init_on(c, proto->tp, proto->urls[proto->cur], &tls, proto->token);
	for (size_t i = 0; i < proto->nurls; i++)
		if (i != proto->cur && c->nurls < HTTPC_URLS_MAX)
			add_url(c, proto->urls[i], strlen(proto->urls[i]));
	c->timeout_ms = proto->timeout_ms;
	c->retry_429 = proto->retry_429;
}

void httpc_release(struct httpc *c)
{
	if (c->conn)
		c->tp->close(c->conn);
	for (size_t i = 0; i < c->nurls; i++)
		free(c->urls[i]);
	free(c->urls);
	free(c->token);
	free(c->ca_file);
	free(c->pin);
	c->conn = NULL;
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
	free(res->retry_after_hdr);
	res->offset_hdr = res->size_hdr = res->eof_hdr = res->content_type = res->leader_hdr = NULL;
	res->retry_after_hdr = NULL;
	res->status = 0;
}

void httpc_response_release(struct httpc_response *res)
{
	response_reset(res);
	strbuf_release(&res->body);
}

/* Whether two URLs have the same scheme. */
static bool same_scheme(const char *a, const char *b)
{
	size_t n = strcspn(a, ":");

	return n == strcspn(b, ":") && !strncasecmp(a, b, n);
}

bool httpc_standby_answer(const struct httpc_response *res, const char *base, char **leader)
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

size_t httpc_leader_index(struct httpc *c, const char *leader)
{
	size_t n = strlen(leader);

	while (n && leader[n - 1] == '/')
		n--;
	for (size_t i = 0; i < c->nurls; i++)
		if (strlen(c->urls[i]) == n && !strncasecmp(c->urls[i], leader, n))
			return i;
	return c->nurls < HTTPC_URLS_MAX ? add_url(c, leader, n) : SIZE_MAX;
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
		enum httpc_reach reach = HTTPC_ANSWERED;
		int oserr = 0;
		if (!tried[i]) {
			strbuf_addf(&names, "%s%s", ntried++ ? ", " : "", c->urls[i]);
			tried[i] = true;
		}
		response_reset(res);
		ret = c->tp->request(c, c->urls[i], method, path, body, body_len, content_type, res,
				     &reach, &oserr, &last);
		if (!ret && !httpc_standby_answer(res, c->urls[i], &leader)) {
			all_refused = false;
			break; /* the leader's answer, or a master's of before standbys */
		}
		if (!ret) {
			all_refused = false;
			ret = httpc_error_from_reply(res, &standby);
			if (leader && hops < HTTPC_LEADER_HOPS)
				next = httpc_leader_index(c, leader);
			free(leader);
			if (next != SIZE_MAX && next != i) {
				hops++;
				c->cur = next;
				continue;
			}
			next = SIZE_MAX; /* it names none, or itself: the next master */
		} else if (reach == HTTPC_NOT_CONNECTED) {
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
		long after = 0;
		if (ret || res->status != 429 || tries >= c->retry_429)
			return ret;
		/* a refused request changed nothing on the master: sending it
		 * again once the caller's bucket has refilled is safe (the
		 * master's Retry-After is seconds; a date counts as one) */
		if (res->retry_after_hdr)
			after = strtol(res->retry_after_hdr, NULL, 10);
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

char *httpc_local_ip(struct httpc *c)
{
	return c->tp->local_ip(c->conn);
}
