/* Unit tests for src/base/parse.h and src/base/strbuf.h, the pieces every
 * parser of outside input in src/common stands on. */
#include "base/compat.h"
#include "base/parse.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/strbuf.h"

/* ---- integers --------------------------------------------------------- */

static void test_u64_cursor(void **state)
{
	const char *s = "123abc";
	const char *p = s;
	uint64_t v = 7;
	assert_int_equal(parse_u64(&p, &v), 0);
	assert_int_equal(v, 123);
	assert_ptr_equal(p, s + 3);

	/* On failure the cursor and the output stay as they were. */
	p = "abc";
	v = 7;
	assert_int_equal(parse_u64(&p, &v), -1);
	assert_string_equal(p, "abc");
	assert_int_equal(v, 7);
	p = "-1";
	assert_int_equal(parse_u64(&p, &v), -1);
	assert_string_equal(p, "-1");
	p = "";
	assert_int_equal(parse_u64(&p, &v), -1);
	p = " 1";
	assert_int_equal(parse_u64(&p, &v), -1);
}

static void test_u64_overflow(void **state)
{
	uint64_t v = 0;
	const char *p = "18446744073709551616";
	assert_int_equal(parse_u64_str("18446744073709551615", &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(parse_u64(&p, &v), -1);
	assert_string_equal(p, "18446744073709551616");
	assert_int_equal(parse_u64_str("99999999999999999999999", &v), -1);
	assert_int_equal(parse_u64_str("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_u64_str("007", &v), 0);
	assert_int_equal(v, 7);
}

static void test_u64_str_whole(void **state)
{
	uint64_t v = 5;
	assert_int_equal(parse_u64_str("12x", &v), -1);
	assert_int_equal(parse_u64_str("12 ", &v), -1);
	assert_int_equal(parse_u64_str("", &v), -1);
	assert_int_equal(parse_u64_str("+1", &v), -1);
	assert_int_equal(v, 5);
}

static void test_i64(void **state)
{
	int64_t v = 0;
	const char *p = "-42,";
	assert_int_equal(parse_i64(&p, &v), 0);
	assert_int_equal(v, -42);
	assert_string_equal(p, ",");
	assert_int_equal(parse_i64_str("9223372036854775807", &v), 0);
	assert_true(v == INT64_MAX);
	assert_int_equal(parse_i64_str("-9223372036854775808", &v), 0);
	assert_true(v == INT64_MIN);
	v = 3;
	assert_int_equal(parse_i64_str("9223372036854775808", &v), -1);
	assert_int_equal(parse_i64_str("-9223372036854775809", &v), -1);
	assert_int_equal(parse_i64_str("-", &v), -1);
	assert_int_equal(parse_i64_str("--1", &v), -1);
	assert_int_equal(parse_i64_str("1-", &v), -1);
	assert_int_equal(v, 3);
	p = "-x";
	assert_int_equal(parse_i64(&p, &v), -1);
	assert_string_equal(p, "-x");
}

/* ---- sizes and durations ---------------------------------------------- */

static void test_sizes(void **state)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} ok[] = {
		{ "0", 0 }, { "512", 512 }, { "512B", 512 }, { "4k", 4096 }, { "4K", 4096 },
		{ "2KiB", 2048 }, { "2Ki", 2048 }, { "100M", 100ULL << 20 }, { "100MiB", 100ULL << 20 },
		{ "2GiB", 2ULL << 30 }, { "2g", 2ULL << 30 }, { "1.5G", 3ULL << 29 },
		{ "3T", 3ULL << 40 }, { "1KB", 1000 }, { "2MB", 2000000 }, { "1GB", 1000000000 },
		{ "1TB", 1000000000000ULL }, { "0.5KiB", 512 }, { "16777215T", 16777215ULL << 40 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		uint64_t b = 1;
		int ret = parse_size_str(ok[i].text, &b);
		if (ret || b != ok[i].bytes)
			print_message("size '%s'\n", ok[i].text);
		assert_int_equal(ret, 0);
		assert_int_equal(b, ok[i].bytes);
	}
}

static void test_sizes_bad(void **state)
{
	static const char *const bad[] = {
		"", "lots", "-1", "1.", ".5G", "1.5.5", "2 GiB", " 2GiB", "2GiB ", "2gib", "2Gb",
		"2GiBs", "1.1234567G", "16777216T", "99999999999999999999", "1e3", "G",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		uint64_t b = 77;
		int ret = parse_size_str(bad[i], &b);
		if (ret != -1)
			print_message("size '%s' was accepted\n", bad[i]);
		assert_int_equal(ret, -1);
		assert_int_equal(b, 77);
	}
}

static void test_durations(void **state)
{
	static const struct {
		const char *text;
		uint64_t ms;
	} ok[] = {
		{ "90", 90000 }, { "90s", 90000 }, { "15m", 900000 }, { "2h", 7200000 },
		{ "1d", 86400000 }, { "1h30m", 5400000 }, { "500ms", 500 }, { "1.5h", 5400000 },
		{ "1.5", 1500 }, { "0", 0 }, { "1m1ms", 60001 }, { "2d3h4m5s6ms", 183845006 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		uint64_t ms = 1;
		int ret = parse_duration_str(ok[i].text, &ms);
		if (ret || ms != ok[i].ms)
			print_message("duration '%s'\n", ok[i].text);
		assert_int_equal(ret, 0);
		assert_int_equal(ms, ok[i].ms);
	}
}

static void test_durations_bad(void **state)
{
	static const char *const bad[] = {
		"", "h", "soon", "5x", "-1s", "5 s", "1h30", "5mm", "1hh", "s5", "1.h",
		"99999999999999999999", "18446744073709551615s", "18446744073709551615d",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		uint64_t ms = 77;
		int ret = parse_duration_str(bad[i], &ms);
		if (ret != -1)
			print_message("duration '%s' was accepted\n", bad[i]);
		assert_int_equal(ret, -1);
		assert_int_equal(ms, 77);
	}
}

static void test_format_size(void **state)
{
	char buf[32];
	char tiny[4];
	format_size(0, buf, sizeof(buf));
	assert_string_equal(buf, "0B");
	format_size(1023, buf, sizeof(buf));
	assert_string_equal(buf, "1023B");
	format_size(1024, buf, sizeof(buf));
	assert_string_equal(buf, "1.0KiB");
	format_size(2ULL << 30, buf, sizeof(buf));
	assert_string_equal(buf, "2.0GiB");
	format_size(3ULL << 29, buf, sizeof(buf));
	assert_string_equal(buf, "1.5GiB");
	format_size(2ULL << 30, tiny, sizeof(tiny));
	assert_string_equal(tiny, "2.0");
}

/* ---- strbuf ----------------------------------------------------------- */

static void test_strbuf_basics(void **state)
{
	struct strbuf sb = STRBUF_INIT;
	char *s;
	size_t len;
	assert_non_null(sb.buf);
	assert_string_equal(sb.buf, "");
	assert_int_equal(sb.len, 0);
	strbuf_addstr(&sb, "hello");
	strbuf_addch(&sb, ' ');
	strbuf_addf(&sb, "%d-%s", 42, "x");
	assert_string_equal(sb.buf, "hello 42-x");
	assert_int_equal(sb.len, 10);
	/* addf past the first growth step. */
	strbuf_addf(&sb, "%0200d", 7);
	assert_int_equal(sb.len, 210);
	assert_int_equal(sb.buf[209], '7');
	assert_int_equal(sb.buf[210], '\0');
	strbuf_reset(&sb);
	assert_string_equal(sb.buf, "");
	strbuf_addstr(&sb, "  trim me \n");
	strbuf_trim(&sb);
	assert_string_equal(sb.buf, "trim me");
	s = strbuf_detach(&sb, &len);
	assert_string_equal(s, "trim me");
	assert_int_equal(len, 7);
	assert_int_equal(sb.len, 0);
	assert_string_equal(sb.buf, "");
	free(s);
	strbuf_release(&sb);
}

static void test_strbuf_capped(void **state)
{
	struct strbuf sb = STRBUF_INIT;
	assert_int_equal(strbuf_add_capped(&sb, "abcdef", 6, 10), 0);
	/* Over the cap: refused and the buffer is unchanged. */
	assert_int_equal(strbuf_add_capped(&sb, "ghijk", 5, 10), -1);
	assert_int_equal(sb.len, 6);
	assert_string_equal(sb.buf, "abcdef");
	/* Exactly up to the cap is fine. */
	assert_int_equal(strbuf_add_capped(&sb, "ghij", 4, 10), 0);
	assert_string_equal(sb.buf, "abcdefghij");
	assert_int_equal(strbuf_add_capped(&sb, "k", 1, 10), -1);
	assert_int_equal(strbuf_add_capped(&sb, "", 0, 10), 0);
	/* A length that would overflow size_t is refused, not wrapped. */
	assert_int_equal(strbuf_add_capped(&sb, "x", SIZE_MAX, SIZE_MAX - 1), -1);
	assert_int_equal(strbuf_add_capped(&sb, "x", SIZE_MAX - 5, SIZE_MAX), -1);
	assert_int_equal(sb.len, 10);
	strbuf_release(&sb);
}

static void test_strbuf_binary(void **state)
{
	struct strbuf sb = STRBUF_INIT;
	static const char data[] = { 'a', '\0', 'b', '\xff', '\0' };
	strbuf_add(&sb, data, sizeof(data));
	strbuf_add(&sb, data, 0);
	assert_int_equal(sb.len, sizeof(data));
	assert_memory_equal(sb.buf, data, sizeof(data));
	assert_int_equal(sb.buf[sb.len], '\0');
	assert_int_equal(strbuf_add_capped(&sb, data, 3, 8), 0);
	assert_int_equal(sb.len, 8);
	assert_memory_equal(sb.buf + 5, data, 3);
	strbuf_release(&sb);
	assert_int_equal(sb.len, 0);
}

static void test_strbuf_read_file(void **state)
{
	char path[] = "/tmp/yard-test-strbuf-XXXXXX";
	struct strbuf sb = STRBUF_INIT;
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789", 10), 10);
	close(fd);
	assert_int_equal(strbuf_read_file(&sb, path, 0), 0);
	assert_string_equal(sb.buf, "0123456789");
	strbuf_reset(&sb);
	assert_int_equal(strbuf_read_file(&sb, path, 10), 0);
	assert_int_equal(sb.len, 10);
	strbuf_reset(&sb);
	errno = 0;
	assert_int_equal(strbuf_read_file(&sb, path, 9), -1);
	assert_int_equal(errno, EFBIG);
	assert_int_equal(sb.len, 0);
	unlink(path);
	errno = 0;
	assert_int_equal(strbuf_read_file(&sb, path, 0), -1);
	assert_int_equal(errno, ENOENT);
	strbuf_release(&sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_u64_cursor),
		cmocka_unit_test(test_u64_overflow),
		cmocka_unit_test(test_u64_str_whole),
		cmocka_unit_test(test_i64),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_sizes_bad),
		cmocka_unit_test(test_durations),
		cmocka_unit_test(test_durations_bad),
		cmocka_unit_test(test_format_size),
		cmocka_unit_test(test_strbuf_basics),
		cmocka_unit_test(test_strbuf_capped),
		cmocka_unit_test(test_strbuf_binary),
		cmocka_unit_test(test_strbuf_read_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
