/*
 * libFuzzer target for what a session's legs read from the other end of a
 * socket (docs/protocol.md, "Sessions"): WebSocket frames through the
 * message reader (src/common/wsframe.h) as a server reads a client's and
 * as a client reads a server's, the master's frame-boundary tracker, and
 * an HTTP/1.x response head (src/common/httphead.h: the 101 of an upgrade,
 * a container engine's answer, an upstream's through the HTTP proxy, with
 * what the proxy passes on of it, and the proxy's reading of its path and
 * of a Cookie field). The first input byte says where to cut
 * the rest into two feeds; what comes out must hold together whatever the
 * bytes claim: no message over the cap, a boundary never past what was
 * fed, a parsed head's status three digits.
 *
 *   CC=clang meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false
 *   ninja -C build-fuzz tests/fuzz/fuzz_wsframe
 *   build-fuzz/tests/fuzz/fuzz_wsframe -max_total_time=60
 */
#include "base/compat.h"
#include "common/httphead.h"
#include "common/wsframe.h"
#include "master/proxyhead.h"

#define MAX_MSG 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Feeds n bytes to r until they are taken or it refuses them. */
static int feed(struct ws_reader *r, const char *p, size_t n)
{
	while (n) {
		size_t used = 0;
		int rc = ws_reader_feed(r, p, n, &used, NULL);
		if (rc < 0)
			return rc;
		if (used > n)
			abort();
		if (rc == 1) {
			if (r->opcode < WS_OP_CLOSE && r->msg_len > MAX_MSG)
				abort(); /* a data message over the cap */
			if (r->opcode >= WS_OP_CLOSE && r->msg_len > WS_CONTROL_MAX)
				abort(); /* a control frame over its limit */
			if (r->opcode == WS_OP_CLOSE) {
				unsigned code;
				char reason[124];
				ws_close_parse(r->msg, r->msg_len, &code, reason);
			}
		} else if (used != n) {
			abort(); /* a 0 takes everything */
		}
		p += used;
		n -= used;
	}
	return 0;
}

/* The proxy's plan of an upstream's answer (master/proxyhead.h): what it
 * passes on is a subset of the head, with no hop-by-hop field and no
 * Set-Cookie of the master's token. */
static void proxy_answer(const struct http_head *h)
{
	for (int ws = 0; ws < 2; ws++) {
		struct proxy_answer a;
		if (proxy_answer_plan(h, ws, &a, NULL) == 0) {
			if (a.nfields > h->nfields)
				abort();
			for (size_t i = 0; i < a.nfields; i++) {
				const char *n = a.fields[i].name;
				if (!strcasecmp(n, "Connection") || !strcasecmp(n, "Transfer-Encoding") ||
				    !strcasecmp(n, "Content-Length") ||
				    (!strcasecmp(n, "Set-Cookie") &&
				     !strncmp(a.fields[i].value, PROXY_TOKEN_COOKIE "=", strlen(PROXY_TOKEN_COOKIE) + 1)))
					abort();
			}
		}
		proxy_answer_release(&a);
	}
}

/* The bytes as a proxy path and as a Cookie field: the master's token
 * never comes out of the filter. */
static void proxy_strings(const char *s, size_t n)
{
	char *str = strndup(s, n), *kept;
	struct proxy_target t;

	if (!proxy_target_parse(str, &t, NULL) && (!t.port || t.port > 65535 || !*t.role || strchr(t.role, '/')))
		abort();
	proxy_target_release(&t);
	kept = proxy_cookie_filter(str);
	for (const char *p = kept; p; p = strchr(p, ';')) {
		p += *p == ';';
		while (*p == ' ' || *p == '\t')
			p++;
		if (!strncmp(p, PROXY_TOKEN_COOKIE, strlen(PROXY_TOKEN_COOKIE)) &&
		    p[strspn(p + strlen(PROXY_TOKEN_COOKIE), " \t") + strlen(PROXY_TOKEN_COOKIE)] == '=')
			abort();
	}
	free(kept);
	free(str);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum ws_mask_rule rules[] = { WS_MASK_REQUIRED, WS_MASK_FORBIDDEN };
	struct ws_tracker t;
	struct http_head h;
	size_t cut, end;
	const char *s;

	if (!size)
		return 0;
	cut = data[0] % size;
	s = (const char *)data + 1;
	size--;
	if (cut > size)
		cut = size;
	for (size_t i = 0; i < ARRAY_SIZE(rules); i++) {
		struct ws_reader r;
		ws_reader_init(&r, MAX_MSG, rules[i]);
		if (!feed(&r, s, cut))
			feed(&r, s + cut, size - cut);
		ws_reader_release(&r);
	}
	memset(&t, 0, sizeof(t));
	ws_tracker_feed(&t, s, cut);
	ws_tracker_feed(&t, s + cut, size - cut);
	if (t.fed != size || t.boundary > t.fed)
		abort();
	end = http_head_end(s, size);
	if (end > size)
		abort();
	if (!http_response_head_parse(s, end ? end : size, &h, NULL)) {
		if (h.status < 100 || h.status > 999 || h.nfields > HTTP_HEAD_FIELDS_MAX)
			abort();
		http_head_has_token(&h, "Connection", "upgrade");
		http_head_get(&h, "Sec-WebSocket-Accept");
		proxy_answer(&h);
	}
	http_head_release(&h);
	proxy_strings(s, size);
	return 0;
}
