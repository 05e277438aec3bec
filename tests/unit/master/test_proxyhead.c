/*
 * The proxy's heads (src/master/proxyhead.h): its path, the request it
 * sends upstream (what goes, what stays with the master) and what it
 * passes on of an upstream's answer, refusals naming the fault.
 */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/strbuf.h"
#include "master/proxyhead.h"

static void test_target(void **state)
{
	struct proxy_target t;
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(proxy_target_parse("notebook/0/8888/tree?x", &t, &eb), 0);
	assert_string_equal(t.role, "notebook");
	assert_int_equal(t.index, 0);
	assert_int_equal(t.port, 8888);
	assert_true(t.slash);
	proxy_target_release(&t);
	assert_int_equal(proxy_target_parse("w/12/65535/", &t, &eb), 0);
	assert_int_equal(t.index, 12);
	assert_int_equal(t.port, 65535);
	assert_true(t.slash);
	proxy_target_release(&t);
	/* no slash after PORT: the handler sends the client to it */
	assert_int_equal(proxy_target_parse("w/0/80", &t, &eb), 0);
	assert_false(t.slash);
	proxy_target_release(&t);

	static const struct {
		const char *path, *words;
	} bad[] = {
		{ "", "expected ROLE/INDEX/PORT/" },
		{ "worker", "expected ROLE/INDEX/PORT/" },
		{ "/0/80/", "expected ROLE/INDEX/PORT/" },
		{ "worker/0", "expected a task index" },
		{ "worker/x/80/", "expected a task index" },
		{ "worker/-1/80/", "expected a task index" },
		{ "worker/4294967296/80/", "expected a task index" },
		{ "worker/0/0/", "expected a port" },
		{ "worker/0/65536/", "expected a port" },
		{ "worker/0//", "expected a port" },
		{ "worker/0/80x/", "expected a port" },
		{ "rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr/0/80/",
		  "expected ROLE/INDEX/PORT/" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		errbuf_reset(&eb);
		assert_int_equal(proxy_target_parse(bad[i].path, &t, &eb), YERR(BAD_REQUEST));
		if (!strstr(eb.msg, bad[i].words))
			fail_msg("'%s': '%s' does not say '%s'", bad[i].path, eb.msg, bad[i].words);
		assert_string_equal(eb.field, "path");
		proxy_target_release(&t);
	}
	(void)state;
}

static void test_cookie_filter(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "a=1; yard_token=s3cret; b=2", "a=1; b=2" },
		{ "yard_token=s3cret", NULL },
		{ " yard_token = s3cret ;theme=dark", "theme=dark" },
		{ "yard_tokenx=1; xyard_token=2; yard_token", "yard_tokenx=1; xyard_token=2; yard_token" },
		{ "a=1;;b=2", "a=1; b=2" },
		{ "", NULL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *got = proxy_cookie_filter(cases[i].in);
		if (!cases[i].out)
			assert_null(got);
		else
			assert_string_equal(got, cases[i].out);
		free(got);
	}
	assert_null(proxy_cookie_filter(NULL));
	(void)state;
}

static void test_request_head(void **state)
{
	const struct proxy_field fields[] = {
		{ "Host", "master:7420" },
		{ "Authorization", "Bearer yard_u_secret" },
		{ "Cookie", "_xsrf=abc; yard_token=yard_u_secret" },
		{ "Connection", "keep-alive, X-Private" },
		{ "X-Private", "hop" },
		{ "Keep-Alive", "timeout=5" },
		{ "Transfer-Encoding", "chunked" },
		{ "Content-Length", "99" },
		{ "Expect", "100-continue" },
		{ "X-Forwarded-For", "6.6.6.6" },
		{ "Forwarded", "for=6.6.6.6" },
		{ "Accept", "text/html" },
		{ "Upgrade", "h2c" },
	};
	struct proxy_request req = {
		.method = "POST", .target = "/v1/jobs/7/proxy/w/0/80/api%20x?token=t", .fields = fields,
		.nfields = ARRAY_SIZE(fields), .client_addr = "10.1.2.3", .https = true,
		.prefix = "/v1/jobs/7/proxy/w/0/80", .has_body = true, .body_len = 5,
	};
	struct strbuf out = STRBUF_INIT;

	proxy_request_head(&req, &out);
	assert_string_equal(out.buf, "POST /v1/jobs/7/proxy/w/0/80/api%20x?token=t HTTP/1.0\r\n"
				     "Host: master:7420\r\n"
				     "Cookie: _xsrf=abc\r\n"
				     "Accept: text/html\r\n"
				     "Connection: close\r\n"
				     "Content-Length: 5\r\n"
				     "X-Forwarded-For: 10.1.2.3\r\n"
				     "X-Forwarded-Proto: https\r\n"
				     "X-Forwarded-Host: master:7420\r\n"
				     "X-Forwarded-Prefix: /v1/jobs/7/proxy/w/0/80\r\n"
				     "\r\n");
	strbuf_reset(&out);

	const struct proxy_field ws[] = {
		{ "Host", "m" },
		{ "Connection", "Upgrade" },
		{ "Upgrade", "websocket" },
		{ "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==" },
		{ "Sec-WebSocket-Version", "13" },
		{ "Sec-WebSocket-Protocol", "chat" },
		{ "Cookie", "yard_token=x" },
		{ "Origin", "http://m" },
	};
	struct proxy_request up = { .method = "GET", .target = "/k/channels?s=1", .ws = true, .fields = ws,
				    .nfields = ARRAY_SIZE(ws) };
	proxy_request_head(&up, &out);
	assert_string_equal(out.buf, "GET /k/channels?s=1 HTTP/1.1\r\n"
				     "Host: m\r\n"
				     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
				     "Sec-WebSocket-Version: 13\r\n"
				     "Sec-WebSocket-Protocol: chat\r\n"
				     "Origin: http://m\r\n"
				     "Connection: Upgrade\r\n"
				     "Upgrade: websocket\r\n"
				     "X-Forwarded-Proto: http\r\n"
				     "X-Forwarded-Host: m\r\n"
				     "\r\n");
	strbuf_release(&out);
	(void)state;
}

static void test_request_check(void **state)
{
	struct proxy_field fields[] = { { "Host", "m" }, { "X-Tab", "a\tb" } };
	struct proxy_request req = { .method = "GET", .target = "/p/a%0Db?x=%0A", .fields = fields,
				     .nfields = ARRAY_SIZE(fields) };
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(proxy_request_check(&req, &eb), 0);
	/* a bare CR in a value: the upstream could take it for the end of a line */
	fields[1].value = "a\rX-Forwarded-For: 6.6.6.6";
	assert_int_equal(proxy_request_check(&req, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "field 'X-Tab': its value holds the control character \\x0D: it "
				    "cannot go upstream");
	fields[1].value = "ok";
	fields[1].name = "X Bad";
	assert_int_equal(proxy_request_check(&req, &eb), YERR(BAD_REQUEST));
	assert_non_null(strstr(eb.msg, "not a field name"));
	fields[1].name = "X-Ok";
	req.target = "/p/a\rX-Injected: 1";
	assert_int_equal(proxy_request_check(&req, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.field, "path");
	req.target = "/p/\x7f";
	assert_int_equal(proxy_request_check(&req, &eb), YERR(BAD_REQUEST));
	(void)state;
}

/* Parses head (CRLFs added) and plans its relay. */
static int plan(const char *head, bool ws, struct proxy_answer *a, struct http_head *h, struct errbuf *eb)
{
	size_t len = strlen(head);

	memset(h, 0, sizeof(*h));
	assert_int_equal(http_head_end(head, len), len);
	assert_int_equal(http_response_head_parse(head, len, h, eb), 0);
	return proxy_answer_plan(h, ws, a, eb);
}

static void test_answer_plan(void **state)
{
	struct proxy_answer a;
	struct http_head h;
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(plan("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 42\r\n"
			      "Connection: close, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: x\r\n"
			      "Set-Cookie: yard_token=evil; Path=/\r\nSet-Cookie: _xsrf=2|a|b; Path=/nb/\r\n"
			      "X-Content-Type-Options: nosniff\r\nDate: Mon\r\n\r\n", false, &a, &h, &eb), 0);
	assert_int_equal(a.status, 200);
	assert_false(a.interim);
	assert_true(a.has_length);
	assert_int_equal(a.length, 42);
	assert_int_equal(a.nfields, 3);
	assert_string_equal(a.fields[0].name, "Content-Type");
	assert_string_equal(a.fields[1].value, "_xsrf=2|a|b; Path=/nb/");
	assert_string_equal(a.fields[2].name, "Date");
	proxy_answer_release(&a);
	http_head_release(&h);

	/* no length: the body ends with the connection */
	assert_int_equal(plan("HTTP/1.0 200 OK\r\nContent-Length: 7\r\nContent-Length: 7\r\n\r\n", false,
			      &a, &h, &eb), 0);
	assert_true(a.has_length);
	proxy_answer_release(&a);
	http_head_release(&h);
	assert_int_equal(plan("HTTP/1.0 404 Not Found\r\nServer: x\r\n\r\n", false, &a, &h, &eb), 0);
	assert_false(a.has_length);
	assert_int_equal(a.status, 404);
	proxy_answer_release(&a);
	http_head_release(&h);
	/* an interim answer is skipped */
	assert_int_equal(plan("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n", false, &a, &h, &eb), 0);
	assert_true(a.interim);
	proxy_answer_release(&a);
	http_head_release(&h);
	/* a WebSocket's 101: its own fields go on */
	assert_int_equal(plan("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
			      "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: chat\r\n\r\n",
			      true, &a, &h, &eb), 0);
	assert_int_equal(a.status, 101);
	assert_int_equal(a.nfields, 2);
	assert_string_equal(a.fields[0].name, "Sec-WebSocket-Accept");
	proxy_answer_release(&a);
	http_head_release(&h);

	static const struct {
		const char *head;
		bool ws;
		const char *words;
	} bad[] = {
		{ "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", false,
		  "asked for no upgrade" },
		{ "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n", true,
		  "does not switch to a WebSocket (Upgrade 'h2c')" },
		{ "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", true,
		  "does not switch to a WebSocket" },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false,
		  "Transfer-Encoding 'chunked'" },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 8\r\n\r\n", false,
		  "Content-Length '8' is not one number" },
		{ "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false, "Content-Length '-1'" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		errbuf_reset(&eb);
		assert_int_equal(plan(bad[i].head, bad[i].ws, &a, &h, &eb), YERR(BAD_GATEWAY));
		if (!strstr(eb.msg, bad[i].words))
			fail_msg("case %zu: '%s' does not say '%s'", i, eb.msg, bad[i].words);
		proxy_answer_release(&a);
		http_head_release(&h);
	}
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_target),
		cmocka_unit_test(test_cookie_filter),
		cmocka_unit_test(test_request_head),
		cmocka_unit_test(test_request_check),
		cmocka_unit_test(test_answer_plan),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
