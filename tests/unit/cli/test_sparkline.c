/* Unit tests for cli_sparkline (src/cli/cmd_metrics.c). */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "cli/cmd.h"

#define B1 "\u2581"
#define B4 "\u2584"
#define B8 "\u2588"

static void check(const double *v, size_t n, size_t width, const char *want)
{
	struct strbuf sb = STRBUF_INIT;

	cli_sparkline(&sb, v, n, width);
	if (strcmp(sb.buf, want))
		print_message("got %s, want %s\n", sb.buf, want);
	assert_string_equal(sb.buf, want);
	strbuf_release(&sb);
}

/* One character per value while they fit, scaled from the least to the greatest. */
static void test_short(void **state)
{
	const double up[] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	const double down[] = { 10, 0 };

	check(up, 8, 30, B1 "\u2582\u2583" B4 "\u2585\u2586\u2587" B8);
	check(down, 2, 30, B8 B1);
	check(NULL, 0, 30, "");
}

/* A flat series, and a single point, are a line in the middle. */
static void test_flat(void **state)
{
	const double flat[] = { 2, 2, 2 }, one[] = { -1e308 };

	check(flat, 3, 30, B4 B4 B4);
	check(one, 1, 30, B4);
}

/* More values than characters: each character is the mean of its bucket. */
static void test_buckets(void **state)
{
	double v[300];
	struct strbuf sb = STRBUF_INIT;

	/* 3 buckets of 100: means 0, 1, 2 (spikes inside a bucket average out) */
	for (int i = 0; i < 300; i++)
		v[i] = i / 100;
	check(v, 300, 3, B1 "\u2585" B8);
	for (int i = 0; i < 300; i++)
		v[i] = (i % 2) ? 10 : -10;
	check(v, 300, 3, B4 B4 B4);
	/* the width is kept for any count */
	for (int i = 0; i < 300; i++)
		v[i] = (i * 7919) % 101;
	cli_sparkline(&sb, v, 300, 30);
	assert_int_equal(sb.len, 30 * strlen(B1));
	strbuf_release(&sb);
	/* huge values do not overflow into nonsense */
	v[0] = 1e308;
	v[1] = -1e308;
	v[2] = 1e308;
	check(v, 3, 30, B8 B1 B8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_short),
		cmocka_unit_test(test_flat),
		cmocka_unit_test(test_buckets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
