/* The proxy's reading and writing of heads (proxyhead.h). */
#include "base/compat.h"
#include "master/proxyhead.h"

#include <ctype.h>

#include "base/parse.h"
#include "base/xalloc.h"

/* The longest role a target names (spec role names are shorter). */
#define ROLE_MAX 64

int proxy_target_parse(const char *path, struct proxy_target *t, struct errbuf *eb)
{
	const char *p = path ? path : "", *slash;
	uint64_t v;
	char num[24];
	size_t n;

	memset(t, 0, sizeof(*t));
	slash = strchr(p, '/');
	n = slash ? (size_t)(slash - p) : strlen(p);
	if (!slash || !n || n > ROLE_MAX)
		return error_field(eb, YERR(BAD_REQUEST), "path", "proxy path '%.100s': expected "
				   "ROLE/INDEX/PORT/ and the path to pass on", p);
	t->role = xstrndup(p, n);
	p = slash + 1;
	n = strcspn(p, "/");
	if (!n || n >= sizeof(num) || !p[n] ||
	    (memcpy(num, p, n), num[n] = 0, parse_u64_str(num, &v)) || v > UINT_MAX)
		return error_field(eb, YERR(BAD_REQUEST), "path", "proxy path '%.100s': expected a task "
				   "index after the role '%s'", path, t->role);
	t->index = (unsigned)v;
	p += n + 1;
	n = strcspn(p, "/");
	if (!n || n >= sizeof(num) || (memcpy(num, p, n), num[n] = 0, parse_u64_str(num, &v)) || !v ||
	    v > 65535)
		return error_field(eb, YERR(BAD_REQUEST), "path", "proxy path '%.100s': expected a port "
				   "of 1 to 65535 after the task %s/%u", path, t->role, t->index);
	t->port = (unsigned)v;
	t->slash = p[n] == '/';
	return 0;
}

void proxy_target_release(struct proxy_target *t)
{
	free(t->role);
	memset(t, 0, sizeof(*t));
}

/* Whether a field of this name is the connection's own (RFC 9110, 7.6.1),
 * or one the master sets itself. */
static bool hop_by_hop(const char *name)
{
	static const char *const names[] = {
		"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
		"Proxy-Authorization", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
		"Content-Length",
	};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

/* Whether name is listed in any Connection field of fields. */
static bool named_by_connection(const struct proxy_field *fields, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcasecmp(fields[i].name, "Connection") && http_list_has_token(fields[i].value, name))
			return true;
	return false;
}

/* Whether the cookie pair starting at p (up to ';') is named name. */
static bool cookie_named(const char *p, size_t len, const char *name)
{
	size_t n = strlen(name);

	while (len && (*p == ' ' || *p == '\t')) {
		p++;
		len--;
	}
	if (len < n || strncmp(p, name, n))
		return false;
	p += n;
	len -= n;
	while (len && (*p == ' ' || *p == '\t')) {
		p++;
		len--;
	}
	return len && *p == '=';
}

char *proxy_cookie_filter(const char *cookie)
{
	struct strbuf out = STRBUF_INIT;

	for (const char *p = cookie; p && *p;) {
		size_t len = strcspn(p, ";");
		const char *q = p;
		size_t qlen = len;
		while (qlen && (*q == ' ' || *q == '\t')) {
			q++;
			qlen--;
		}
		if (qlen && !cookie_named(q, qlen, PROXY_TOKEN_COOKIE)) {
			if (out.len)
				strbuf_addstr(&out, "; ");
			strbuf_add(&out, q, qlen);
		}
		p += len;
		if (*p == ';')
			p++;
	}
	if (!out.len) {
		strbuf_release(&out);
		return NULL;
	}
	return strbuf_detach(&out, NULL);
}

/* Whether the client's field name is one the master never passes on. */
static bool request_field_dropped(const struct proxy_request *req, const char *name)
{
	static const char *const names[] = {
		"Authorization", "Expect", "Forwarded", "X-Forwarded-For", "X-Forwarded-Proto",
		"X-Forwarded-Host", "X-Forwarded-Prefix",
	};

	if (hop_by_hop(name) || named_by_connection(req->fields, req->nfields, name))
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

/* The first control character of s (HTAB allowed when tab_ok), or 0. */
static unsigned char control_char(const char *s, bool tab_ok)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if ((*p < 0x20 && !(tab_ok && *p == '\t')) || *p == 0x7f)
			return *p;
	return 0;
}

/* Whether s is a field name: a token of RFC 9110's tchar. */
static bool field_name_ok(const char *s)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";

	if (!*s)
		return false;
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr(extra, *p))
			return false;
	return true;
}

int proxy_request_check(const struct proxy_request *req, struct errbuf *eb)
{
	unsigned char c = control_char(req->target, false);

	if (c || strchr(req->target, ' '))
		return error_field(eb, YERR(BAD_REQUEST), "path", "the request's target holds %s: it "
				   "cannot go upstream as it is", c ? "a control character" : "a space");
	for (size_t i = 0; i < req->nfields; i++) {
		const struct proxy_field *f = &req->fields[i];
		if (!field_name_ok(f->name))
			return error(eb, YERR(BAD_REQUEST), "field '%.64s': not a field name (RFC 9110 "
				     "token): it cannot go upstream", f->name);
		if ((c = control_char(f->value, true)))
			return error(eb, YERR(BAD_REQUEST), "field '%.64s': its value holds the control "
				     "character \\x%02X: it cannot go upstream", f->name, c);
	}
	return 0;
}

void proxy_request_head(const struct proxy_request *req, struct strbuf *out)
{
	const char *host = NULL;

	strbuf_addf(out, "%s %s HTTP/1.%d\r\n", req->method, req->target, req->ws ? 1 : 0);
	for (size_t i = 0; i < req->nfields; i++) {
		const struct proxy_field *f = &req->fields[i];
		if (request_field_dropped(req, f->name))
			continue;
		if (!strcasecmp(f->name, "Host") && !host)
			host = f->value;
		if (!strcasecmp(f->name, "Cookie")) {
			char *kept = proxy_cookie_filter(f->value);
			if (kept)
				strbuf_addf(out, "Cookie: %s\r\n", kept);
			free(kept);
			continue;
		}
		strbuf_addf(out, "%s: %s\r\n", f->name, f->value);
	}
	if (req->ws)
		strbuf_addstr(out, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
	else
		strbuf_addstr(out, "Connection: close\r\n");
	if (req->has_body)
		strbuf_addf(out, "Content-Length: %" PRIu64 "\r\n", req->body_len);
	if (req->client_addr)
		strbuf_addf(out, "X-Forwarded-For: %s\r\n", req->client_addr);
	strbuf_addf(out, "X-Forwarded-Proto: %s\r\n", req->https ? "https" : "http");
	if (host)
		strbuf_addf(out, "X-Forwarded-Host: %s\r\n", host);
	if (req->prefix)
		strbuf_addf(out, "X-Forwarded-Prefix: %s\r\n", req->prefix);
	strbuf_addstr(out, "\r\n");
}

/* Whether a Set-Cookie value sets the master's token cookie. */
static bool sets_token_cookie(const char *v)
{
	size_t len = strcspn(v, ";");

	return cookie_named(v, len, PROXY_TOKEN_COOKIE);
}

int proxy_answer_plan(const struct http_head *h, bool ws, struct proxy_answer *a, struct errbuf *eb)
{
	const char *te = http_head_get(h, "Transfer-Encoding");
	struct proxy_field *view = xcalloc(h->nfields + 1, sizeof(*view));

	memset(a, 0, sizeof(*a));
	a->status = h->status;
	for (size_t i = 0; i < h->nfields; i++)
		view[i] = (struct proxy_field){ h->fields[i].name, h->fields[i].value };
	if (h->status >= 100 && h->status < 200 && h->status != 101) {
		a->interim = true;
		free(view);
		return 0;
	}
	if (h->status == 101 && !ws) {
		free(view);
		return error(eb, YERR(BAD_GATEWAY), "the upstream answered 101 (Switching Protocols) "
			     "to a request that asked for no upgrade");
	}
	if (h->status == 101 && (!http_head_has_token(h, "Upgrade", "websocket") ||
				 !http_head_has_token(h, "Connection", "upgrade"))) {
		free(view);
		return error(eb, YERR(BAD_GATEWAY), "the upstream's 101 does not switch to a WebSocket "
			     "(Upgrade '%.100s')", http_head_get(h, "Upgrade") ? http_head_get(h, "Upgrade")
									   : "");
	}
	if (te && strcasecmp(te, "identity")) {
		free(view);
		return error(eb, YERR(BAD_GATEWAY), "the upstream answered an HTTP/1.0 request with "
			     "Transfer-Encoding '%.100s'", te);
	}
	a->fields = xcalloc(h->nfields + 1, sizeof(*a->fields));
	for (size_t i = 0; i < h->nfields; i++) {
		const char *name = h->fields[i].name, *value = h->fields[i].value;
		if (!strcasecmp(name, "Content-Length")) {
			uint64_t v;
			if (parse_u64_str(value, &v) || (a->has_length && v != a->length)) {
				free(view);
				proxy_answer_release(a);
				return error(eb, YERR(BAD_GATEWAY), "the upstream's Content-Length '%.40s' "
					     "is not one number", value);
			}
			a->has_length = true;
			a->length = v;
			continue;
		}
		if (hop_by_hop(name) || named_by_connection(view, h->nfields, name) ||
		    !strcasecmp(name, "X-Content-Type-Options") ||
		    (!strcasecmp(name, "Set-Cookie") && sets_token_cookie(value)))
			continue;
		a->fields[a->nfields++] = (struct proxy_field){ name, value };
	}
	free(view);
	return 0;
}

void proxy_answer_release(struct proxy_answer *a)
{
	free(a->fields);
	memset(a, 0, sizeof(*a));
}

