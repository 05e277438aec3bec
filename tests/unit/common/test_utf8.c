/* Unit tests for src/base/utf8.h and the errbuf built on it: every error
 * message is valid UTF-8 without control characters, whatever it quotes. */
#include "base/compat.h"
#include "base/utf8.h"

#include <setjmp.h>
#include <cmocka.h>
#include <jansson.h>

#include "base/error.h"
#include "base/strbuf.h"

static void test_seq_len(void **state)
{
	/* well-formed: ASCII, 2, 3 and 4 bytes, the highest code point */
	assert_int_equal(utf8_seq_len((const unsigned char *)"a", 1), 1);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xc3\xa9", 2), 2);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xe2\x82\xac", 3), 3);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf0\x9f\x98\x80", 4), 4);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf4\x8f\xbf\xbf", 4), 4);
	/* not: a lone continuation byte, 0xff, a cut sequence */
	assert_int_equal(utf8_seq_len((const unsigned char *)"\x80", 1), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xff", 1), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xe2\x82", 2), 0);
	/* overlong forms of '/' and of U+0800, a surrogate, past U+10FFFF */
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xc0\xaf", 2), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xe0\x80\xaf", 3), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf0\x80\x80\xaf", 4), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xed\xa0\x80", 3), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf4\x90\x80\x80", 4), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf5\x80\x80\x80", 4), 0);
	(void)state;
}

/* What utf8_valid accepts is what jansson accepts: both ways, on a set of
 * strings that covers every rule. */
static void test_valid_agrees_with_jansson(void **state)
{
	static const char *const cases[] = {
		"plain", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xff\xfe", "\xc0\xaf",
		"\xe0\x80\xaf", "\xed\xa0\x80", "\xed\x9f\xbf", "\xf4\x90\x80\x80", "\xf4\x8f\xbf\xbf",
		"a\x80", "\xc3", "\xe2\x82", "\xf0\x9f\x98",
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		json_t *js = json_string(cases[i]);
		bool ok = utf8_valid(cases[i], strlen(cases[i]));
		if (ok != (js != NULL))
			fail_msg("case %zu: utf8_valid says %d, jansson %d", i, ok, js != NULL);
		json_decref(js);
	}
	(void)state;
}

static void test_escape(void **state)
{
	static const char in[] = "a\xff\xfe/caf\xc3\xa9\n\x1b[2J\\";
	struct strbuf sb = STRBUF_INIT;

	utf8_escape_append(&sb, in, sizeof(in) - 1);
	assert_string_equal(sb.buf, "a\\xFF\\xFE/caf\xc3\xa9\\x0A\\x1B[2J\\");
	assert_true(utf8_valid(sb.buf, sb.len));
	strbuf_release(&sb);
	(void)state;
}

/* A cut message ends at a whole character or escape, never inside one. */
static void test_escape_into_cuts_whole_units(void **state)
{
	char buf[6];

	utf8_escape_into(buf, sizeof(buf), "ab\xe2\x82\xac");
	assert_string_equal(buf, "ab\xe2\x82\xac");
	utf8_escape_into(buf, sizeof(buf), "abc\xe2\x82\xac");
	assert_string_equal(buf, "abc");
	utf8_escape_into(buf, sizeof(buf), "ab\xff");
	assert_string_equal(buf, "ab");
	utf8_escape_into(buf, sizeof(buf), "a\xff");
	assert_string_equal(buf, "a\\xFF");
	(void)state;
}

static void test_lossy(void **state)
{
	struct strbuf sb = STRBUF_INIT;

	utf8_lossy_append(&sb, "a\xff" "b\xc3\xa9", 5);
	assert_string_equal(sb.buf, "a\xef\xbf\xbd" "b\xc3\xa9");
	strbuf_release(&sb);
	(void)state;
}

/* The class of crash behind `GET /v1/%FF%FE`: a message quoting bytes
 * that are not UTF-8. Whatever is quoted, the message and the field are
 * valid UTF-8 (jansson takes them), and one line. */
static void test_errbuf_is_always_text(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	char big[3000];
	json_t *js;

	error_field(&eb, YERR(NOT_FOUND), "tasks.\xff", "no route '%s'", "/v1/\xff\xfe\n");
	assert_string_equal(eb.msg, "no route '/v1/\\xFF\\xFE\\x0A'");
	assert_string_equal(eb.field, "tasks.\\xFF");
	/* a message cut at the buffer's end is still valid */
	memset(big, 'a', sizeof(big));
	for (size_t i = 1; i + 4 < sizeof(big); i += 3)
		memcpy(big + i, "\xe2\x82\xac", 3);
	big[sizeof(big) - 1] = '\0';
	error(&eb, YERR(BAD_REQUEST), "'%s'", big);
	assert_true(strlen(eb.msg) < sizeof(eb.msg));
	js = json_string(eb.msg);
	assert_non_null(js);
	json_decref(js);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seq_len),
		cmocka_unit_test(test_valid_agrees_with_jansson),
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_escape_into_cuts_whole_units),
		cmocka_unit_test(test_lossy),
		cmocka_unit_test(test_errbuf_is_always_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
