/* The token buckets of --rate-limit (master/ratelimit.h) on a clock the test
 * moves: a burst drains, refused requests take nothing, the bucket refills
 * at the rate, callers do not share buckets, a crowded set forgets full
 * buckets first, and the flag's parser refuses what it cannot read. The
 * 429 reply itself is tested end to end (test_ratelimit.py). */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "master/ratelimit.h"

/* Takes n requests at now; returns how many were allowed. */
static unsigned take_n(struct ratelimit *rl, uint64_t key, unsigned n, uint64_t now)
{
	unsigned ok = 0;
	for (unsigned i = 0; i < n; i++)
		ok += ratelimit_take(rl, key, now) == 0;
	return ok;
}

static void test_burst_then_refill(void **state)
{
	struct ratelimit rl;
	uint64_t a = ratelimit_key(RATELIMIT_TOKEN, 1), t = 1000;

	ratelimit_init(&rl, 10, 20);
	assert_int_equal(take_n(&rl, a, 25, t), 20);
	/* one request back in 100 ms at 10/s: the wait says so */
	assert_int_equal(ratelimit_take(&rl, a, t), 100);
	assert_int_equal(ratelimit_take(&rl, a, t + 40), 60);
	/* refused requests took nothing: at +100 ms exactly one is allowed */
	assert_int_equal(take_n(&rl, a, 5, t + 100), 1);
	/* a second later, ten */
	assert_int_equal(take_n(&rl, a, 15, t + 1100), 10);
	/* an idle minute fills the bucket to the burst, not beyond */
	assert_int_equal(take_n(&rl, a, 50, t + 61100), 20);
	ratelimit_release(&rl);
}

static void test_keys_apart(void **state)
{
	struct ratelimit rl;
	uint64_t a = ratelimit_key(RATELIMIT_TOKEN, 7), b = ratelimit_key(RATELIMIT_TOKEN, 8);
	uint64_t job7 = ratelimit_key(RATELIMIT_JOB, 7), addr = ratelimit_key(RATELIMIT_ADDRESS, 7);

	assert_int_not_equal(a, b);
	assert_int_not_equal(a, job7);
	assert_int_not_equal(job7, addr);
	assert_int_not_equal(ratelimit_key(RATELIMIT_ADDRESS, 0), 0);
	ratelimit_init(&rl, 5, 5);
	assert_int_equal(take_n(&rl, a, 10, 0), 5);
	assert_int_equal(take_n(&rl, b, 10, 0), 5);
	assert_int_equal(take_n(&rl, job7, 10, 0), 5);
	assert_int_equal(take_n(&rl, addr, 10, 0), 5);
	assert_int_not_equal(ratelimit_take(&rl, a, 0), 0);
	ratelimit_release(&rl);
}

static void test_off(void **state)
{
	struct ratelimit rl;

	ratelimit_init(&rl, 0, 0);
	assert_null(rl.slots);
	assert_int_equal(take_n(&rl, 42, 100000, 0), 100000);
	ratelimit_release(&rl);
}

/* Keys that fall into one set (the low bits of the key pick it). */
static uint64_t same_set_key(unsigned i)
{
	return ((uint64_t)(i + 1) << 32) | 5;
}

static void test_crowded_set(void **state)
{
	struct ratelimit rl;
	unsigned i;

	ratelimit_init(&rl, 1, 2);
	/* RATELIMIT_WAYS callers drain their buckets: each keeps its own */
	for (i = 0; i < RATELIMIT_WAYS; i++)
		assert_int_equal(take_n(&rl, same_set_key(i), 3, 100 + i), 2);
	/* one more caller in the set takes the slot idle the longest (key 0) */
	assert_int_equal(take_n(&rl, same_set_key(RATELIMIT_WAYS), 3, 200), 2);
	/* the others are still empty */
	for (i = 1; i < RATELIMIT_WAYS; i++)
		assert_int_not_equal(ratelimit_take(&rl, same_set_key(i), 200), 0);
	/* at 1500 every caller but key 1 takes one more: their buckets are not
	 * full at 2200, key 1's (idle since 200) is */
	for (i = 2; i <= RATELIMIT_WAYS; i++)
		assert_int_equal(take_n(&rl, same_set_key(i), 1, 1500), 1);
	/* a newcomer at 2200 takes key 1's full bucket (forgetting it costs
	 * nothing), not a busy one: each busy caller has one request left, where
	 * a forgotten one would start again with two */
	assert_int_equal(take_n(&rl, same_set_key(RATELIMIT_WAYS + 1), 3, 2200), 2);
	for (i = 2; i <= RATELIMIT_WAYS; i++)
		assert_int_equal(take_n(&rl, same_set_key(i), 2, 2200), 1);
	ratelimit_release(&rl);
}

static void expect_parse(const char *text, uint64_t rate, uint64_t burst)
{
	uint64_t r = 99, b = 99;
	struct errbuf eb = ERRBUF_INIT;

	if (ratelimit_parse("--rate-limit", text, &r, &b, &eb)) {
		fprintf(stderr, "'%s' refused: %s\n", text, eb.msg);
		fail();
	}
	assert_int_equal(r, rate);
	assert_int_equal(b, burst);
}

static void expect_refused(const char *text)
{
	uint64_t r, b;
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(ratelimit_parse("--rate-limit", text, &r, &b, &eb), YERR(BAD_REQUEST));
	if (!strstr(eb.msg, "--rate-limit") || !strstr(eb.msg, text)) {
		fprintf(stderr, "message for '%s' names neither flag nor value: %s\n", text, eb.msg);
		fail();
	}
}

static void test_parse(void **state)
{
	expect_parse("100", 100, 1000);
	expect_parse("100:5", 100, 5);
	expect_parse("0", 0, 0);
	expect_parse("1:1", 1, 1);
	expect_refused("");
	expect_refused("-1");
	expect_refused("fast");
	expect_refused("10:");
	expect_refused("10:0");
	expect_refused("10:5:3");
	expect_refused("10x");
	expect_refused("2000000");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_refill),
		cmocka_unit_test(test_keys_apart),
		cmocka_unit_test(test_off),
		cmocka_unit_test(test_crowded_set),
		cmocka_unit_test(test_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
