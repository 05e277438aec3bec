/*
 * WebSocket frames (src/common/wsframe.h) and HTTP/1.x response heads
 * (src/common/httphead.h): the RFC 6455 examples byte for byte, the
 * reader across every split of its input, refusals that name the fault,
 * and the master's boundary tracker.
 */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/strbuf.h"
#include "common/httphead.h"
#include "common/wsframe.h"

/* RFC 6455, 1.3: the key and accept of its example handshake. */
static void test_accept_key(void **state)
{
	char accept[29], key[25];

	ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", accept);
	assert_string_equal(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	assert_true(ws_key_valid("dGhlIHNhbXBsZSBub25jZQ=="));
	assert_false(ws_key_valid("dGhlIHNhbXBsZSBub25jZQ="));
	assert_false(ws_key_valid("dGhlIHNhbXBsZSBub25jZ!=="));
	assert_false(ws_key_valid(NULL));
	ws_key_new(key);
	assert_true(ws_key_valid(key));
	assert_true(ws_protocol_offered("chat, yard.exec.v1", "yard.exec.v1"));
	assert_true(ws_protocol_offered("yard.exec.v1", "yard.exec.v1"));
	assert_false(ws_protocol_offered("yard.exec.v10", "yard.exec.v1"));
	assert_false(ws_protocol_offered(NULL, "yard.exec.v1"));
	(void)state;
}

/* RFC 6455, 5.7: "Hello" unmasked and masked, and the 256-byte and
 * 64 KiB lengths. */
static void test_rfc_examples(void **state)
{
	static const unsigned char unmasked[] = { 0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f };
	static const unsigned char masked[] = { 0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58 };
	unsigned char head[WS_HEAD_MAX], mask[4] = { 0x37, 0xfa, 0x21, 0x3d }, payload[5];
	struct ws_head h;
	size_t n;

	n = ws_head_build(head, true, WS_OP_TEXT, 5, NULL);
	assert_int_equal(n, 2);
	assert_memory_equal(head, unmasked, 2);
	n = ws_head_build(head, true, WS_OP_TEXT, 5, mask);
	assert_int_equal(n, 6);
	assert_memory_equal(head, masked, 6);
	memcpy(payload, "Hello", 5);
	ws_mask(payload, 5, mask, 0);
	assert_memory_equal(payload, masked + 6, 5);

	assert_int_equal(ws_head_parse(masked, sizeof(masked), &h, NULL), 6);
	assert_true(h.fin && h.masked);
	assert_int_equal(h.opcode, WS_OP_TEXT);
	assert_int_equal(h.len, 5);
	assert_int_equal(ws_head_parse(masked, 5, &h, NULL), 0); /* the mask is not whole */

	n = ws_head_build(head, true, WS_OP_BINARY, 256, NULL);
	assert_int_equal(n, 4);
	assert_int_equal(head[1], 126);
	assert_int_equal(head[2], 1);
	assert_int_equal(head[3], 0);
	n = ws_head_build(head, true, WS_OP_BINARY, 65536, NULL);
	assert_int_equal(n, 10);
	assert_int_equal(head[1], 127);
	assert_int_equal(head[7], 1);
	assert_int_equal(ws_head_parse(head, n, &h, NULL), 10);
	assert_int_equal(h.len, 65536);
	(void)state;
}

static void test_head_refusals(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct ws_head h;
	const unsigned char rsv[] = { 0xc1, 0x00 }, op[] = { 0x83, 0x00 }, ping_frag[] = { 0x09, 0x00 };
	const unsigned char ping_long[] = { 0x89, 0x7e, 0x00, 0x80 };
	const unsigned char top[] = { 0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 1 };

	assert_int_equal(ws_head_parse(rsv, 2, &h, &eb), YERR(BAD_REQUEST));
	assert_non_null(strstr(eb.msg, "reserved bits"));
	assert_int_equal(ws_head_parse(op, 2, &h, &eb), YERR(BAD_REQUEST));
	assert_non_null(strstr(eb.msg, "unknown opcode 0x3"));
	assert_int_equal(ws_head_parse(ping_frag, 2, &h, &eb), YERR(BAD_REQUEST));
	assert_non_null(strstr(eb.msg, "control frame"));
	assert_int_equal(ws_head_parse(ping_long, 4, &h, &eb), YERR(BAD_REQUEST));
	assert_int_equal(ws_head_parse(top, sizeof(top), &h, &eb), YERR(BAD_REQUEST));
	assert_non_null(strstr(eb.msg, "top bit"));
	(void)state;
}

/* A client's stream of messages (masked), fragmented, with a ping in the
 * middle of a fragmented message, read back whole through every split of
 * the bytes into two feeds. */
static void build_stream(struct strbuf *sb)
{
	unsigned char head[WS_HEAD_MAX], mask[4] = { 1, 2, 3, 4 };
	char part[3] = "abc";
	size_t n;

	ws_channel_append(sb, WS_CH_STDIN, "ls\n", 3, true);
	/* "abc" + "abc" as two fragments around a ping */
	n = ws_head_build(head, false, WS_OP_BINARY, 3, mask);
	strbuf_add(sb, head, n);
	ws_mask(part, 3, mask, 0);
	strbuf_add(sb, part, 3);
	ws_frame_append(sb, WS_OP_PING, "p", 1, true);
	memcpy(part, "abc", 3);
	n = ws_head_build(head, true, WS_OP_CONT, 3, mask);
	strbuf_add(sb, head, n);
	ws_mask(part, 3, mask, 0);
	strbuf_add(sb, part, 3);
	ws_channel_append(sb, WS_CH_STDIN, "", 0, true);
	ws_close_append(sb, WS_CLOSE_NORMAL, "bye", true);
}

static void read_all(struct ws_reader *r, const char *buf, size_t n, struct strbuf *log)
{
	while (n) {
		size_t used = 0;
		int rc = ws_reader_feed(r, buf, n, &used, NULL);
		assert_true(rc >= 0);
		buf += used;
		n -= used;
		if (rc == 1) {
			strbuf_addf(log, "%u:", r->opcode);
			strbuf_add(log, r->msg, r->msg_len);
			strbuf_addch(log, '|');
		}
	}
}

static void test_reader_splits(void **state)
{
	struct strbuf sb = STRBUF_INIT;
	const char *want = "2:\0ls\n|9:p|2:abcabc|2:\0|8:\x03\xe8" "bye|";
	size_t want_len = 32;

	build_stream(&sb);
	for (size_t cut = 0; cut <= sb.len; cut++) {
		struct ws_reader r;
		struct strbuf log = STRBUF_INIT;
		ws_reader_init(&r, 1024, WS_MASK_REQUIRED);
		read_all(&r, sb.buf, cut, &log);
		read_all(&r, sb.buf + cut, sb.len - cut, &log);
		assert_int_equal(log.len, want_len);
		assert_memory_equal(log.buf, want, want_len);
		strbuf_release(&log);
		ws_reader_release(&r);
	}
	/* one byte at a time */
	{
		struct ws_reader r;
		struct strbuf log = STRBUF_INIT;
		ws_reader_init(&r, 1024, WS_MASK_REQUIRED);
		for (size_t i = 0; i < sb.len; i++)
			read_all(&r, sb.buf + i, 1, &log);
		assert_memory_equal(log.buf, want, want_len);
		strbuf_release(&log);
		ws_reader_release(&r);
	}
	strbuf_release(&sb);
	(void)state;
}

static void test_reader_refusals(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct strbuf sb = STRBUF_INIT;
	struct ws_reader r;
	size_t used;
	char big[100];

	/* an unmasked frame to a server */
	ws_reader_init(&r, 1024, WS_MASK_REQUIRED);
	ws_channel_append(&sb, WS_CH_STDIN, "x", 1, false);
	assert_int_equal(ws_reader_feed(&r, sb.buf, sb.len, &used, &eb), YERR(BAD_REQUEST));
	assert_non_null(strstr(eb.msg, "must be masked"));
	ws_reader_release(&r);

	/* a masked frame to a client */
	strbuf_reset(&sb);
	ws_reader_init(&r, 1024, WS_MASK_FORBIDDEN);
	ws_channel_append(&sb, WS_CH_STDOUT, "x", 1, true);
	assert_int_equal(ws_reader_feed(&r, sb.buf, sb.len, &used, &eb), YERR(BAD_REQUEST));
	ws_reader_release(&r);

	/* over the cap: refused from its head, before its payload */
	strbuf_reset(&sb);
	memset(big, 'y', sizeof(big));
	ws_reader_init(&r, 50, WS_MASK_FORBIDDEN);
	ws_frame_append(&sb, WS_OP_BINARY, big, sizeof(big), false);
	assert_int_equal(ws_reader_feed(&r, sb.buf, 4, &used, &eb), YERR(TOO_LARGE));
	assert_non_null(strstr(eb.msg, "50 bytes"));
	ws_reader_release(&r);

	/* a continuation with nothing to continue */
	strbuf_reset(&sb);
	ws_reader_init(&r, 1024, WS_MASK_FORBIDDEN);
	ws_frame_append(&sb, WS_OP_CONT, "x", 1, false);
	assert_int_equal(ws_reader_feed(&r, sb.buf, sb.len, &used, &eb), YERR(BAD_REQUEST));
	assert_non_null(strstr(eb.msg, "continuation"));
	ws_reader_release(&r);
	strbuf_release(&sb);
	(void)state;
}

static void test_close(void **state)
{
	struct strbuf sb = STRBUF_INIT;
	struct ws_reader r;
	unsigned code;
	char reason[124], longr[300];
	size_t used;

	/* a reason longer than a control frame holds is cut, at a UTF-8 boundary */
	for (size_t i = 0; i + 1 < sizeof(longr); i += 2) {
		longr[i] = (char)0xc3;
		longr[i + 1] = (char)0xa9; /* é */
	}
	longr[sizeof(longr) - 1] = 0;
	ws_close_append(&sb, WS_CLOSE_ERROR, longr, false);
	ws_reader_init(&r, 1024, WS_MASK_FORBIDDEN);
	assert_int_equal(ws_reader_feed(&r, sb.buf, sb.len, &used, NULL), 1);
	assert_int_equal(r.opcode, WS_OP_CLOSE);
	assert_true(r.msg_len <= WS_CONTROL_MAX);
	ws_close_parse(r.msg, r.msg_len, &code, reason);
	assert_int_equal(code, WS_CLOSE_ERROR);
	assert_int_equal(strlen(reason) % 2, 0);
	ws_close_parse("", 0, &code, reason);
	assert_int_equal(code, 1005);
	assert_string_equal(reason, "");
	ws_reader_release(&r);
	strbuf_release(&sb);
	(void)state;
}

/* The tracker finds the end of each frame, whatever the feeds' sizes. */
static void test_tracker(void **state)
{
	struct strbuf sb = STRBUF_INIT;
	char big[70000];
	size_t ends[3];

	memset(big, 'z', sizeof(big));
	ws_channel_append(&sb, WS_CH_STDOUT, "hello", 5, false);
	ends[0] = sb.len;
	ws_channel_append(&sb, WS_CH_STDOUT, big, sizeof(big), false);
	ends[1] = sb.len;
	ws_close_append(&sb, WS_CLOSE_NORMAL, "", false);
	ends[2] = sb.len;
	for (size_t step = 1; step < 9000; step = step * 3 + 1) {
		struct ws_tracker t;
		memset(&t, 0, sizeof(t));
		for (size_t at = 0; at < sb.len; at += step) {
			size_t n = sb.len - at < step ? sb.len - at : step;
			ws_tracker_feed(&t, sb.buf + at, n);
			/* the boundary is the last frame end at or before what was fed */
			size_t want = 0;
			for (int k = 0; k < 3; k++)
				if (ends[k] <= at + n)
					want = ends[k];
			assert_int_equal(t.boundary, want);
			assert_int_equal(t.closed, at + n == sb.len);
		}
		assert_false(t.broken);
	}
	{
		struct ws_tracker t;
		memset(&t, 0, sizeof(t));
		ws_tracker_feed(&t, "\xf3\x00", 2);
		assert_true(t.broken);
	}
	strbuf_release(&sb);
	(void)state;
}

static void test_http_head(void **state)
{
	const char *ok = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			 "Connection: keep-alive, Upgrade\r\nSec-WebSocket-Accept:  abc= \r\n\r\nrest";
	struct errbuf eb = ERRBUF_INIT;
	struct http_head h;
	size_t n = http_head_end(ok, strlen(ok));

	assert_int_equal(n, strlen(ok) - 4);
	assert_int_equal(http_response_head_parse(ok, n, &h, &eb), 0);
	assert_int_equal(h.status, 101);
	assert_string_equal(h.reason, "Switching Protocols");
	assert_string_equal(http_head_get(&h, "sec-websocket-accept"), "abc=");
	assert_true(http_head_has_token(&h, "connection", "upgrade"));
	assert_false(http_head_has_token(&h, "connection", "close"));
	assert_null(http_head_get(&h, "Content-Length"));
	http_head_release(&h);

	assert_int_equal(http_head_end("HTTP/1.0 200 OK\n\n", 17), 17);
	assert_int_equal(http_head_end("HTTP/1.0 200 OK\r\n", 17), 0);

	static const struct {
		const char *head, *why;
	} bad[] = {
		{ "SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x" },
		{ "HTTP/1.1 2x0 OK\r\n\r\n", "three digits" },
		{ "HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n", "folded" },
		{ "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "without a name" },
		{ "HTTP/1.1 200 OK\r\nBad Name: 1\r\n\r\n", "field name with byte 0x20" },
		{ "HTTP/1.1 200 OK\r\nX: a\x01z\r\n\r\n", "control character" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		errbuf_reset(&eb);
		assert_int_equal(http_response_head_parse(bad[i].head, strlen(bad[i].head), &h, &eb),
				 YERR(BAD_REQUEST));
		if (!strstr(eb.msg, bad[i].why))
			fail_msg("'%s': expected '%s' in '%s'", bad[i].head, bad[i].why, eb.msg);
		http_head_release(&h);
	}
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accept_key),   cmocka_unit_test(test_rfc_examples),
		cmocka_unit_test(test_head_refusals), cmocka_unit_test(test_reader_splits),
		cmocka_unit_test(test_reader_refusals), cmocka_unit_test(test_close),
		cmocka_unit_test(test_tracker),      cmocka_unit_test(test_http_head),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
