/* Unit tests for the early stopping rules (src/master/earlystop.h), with
 * every cutoff and median worked out by hand in the comments. */
#include "base/compat.h"
#include "master/earlystop.h"

#include <setjmp.h>
#include <cmocka.h>

static struct spec_sweep asha(bool maximize)
{
	return (struct spec_sweep){ .metric = "acc", .maximize = maximize, .stop = SWEEP_STOP_ASHA,
				    .resource = "epoch", .min_resource = 1, .max_resource = 10,
				    .reduction_factor = 3 };
}

/* trials[me] gets (res, value) and is judged */
static bool point(const struct spec_sweep *s, struct es_trial *t, size_t n, size_t me, double res,
		  double value, char *why)
{
	struct es_trial *all[8];

	for (size_t i = 0; i < n; i++)
		all[i] = &t[i];
	es_trial_add(&t[me], res, s->maximize ? value : -value);
	return earlystop_judge(s, all, n, me, why, 400);
}

static void release(struct es_trial *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		es_trial_release(&t[i]);
}

static void test_rungs(void **state)
{
	struct spec_sweep s = asha(true);
	double r[ES_RUNGS_MAX];

	assert_int_equal(earlystop_rungs(&s, r), 3); /* 1, 3, 9 < 10 */
	assert_true(r[0] == 1 && r[1] == 3 && r[2] == 9);
	s.max_resource = 9; /* 9 is not below 9 */
	assert_int_equal(earlystop_rungs(&s, r), 2);
	s.max_resource = 0; /* 1000 x 1: 1, 3, ..., 729 */
	assert_int_equal(earlystop_rungs(&s, r), 7);
}

/* At rung 1: 0.05 (first: goes on), 0.09 (cutoff = the 2/3 quantile of
 * [0.05] = 0.05: on), 0.01 (of [0.05, 0.09]: 0.05 + 2/3 x 0.04 = 0.0767:
 * stopped), 0.08 (of [0.01, 0.05, 0.09]: pos 4/3, 0.05 + 1/3 x 0.04 =
 * 0.0633: on). */
static void test_asha_max(void **state)
{
	struct spec_sweep s = asha(true);
	struct es_trial t[4] = { 0 };
	char why[400] = "";

	assert_false(point(&s, t, 4, 0, 1, 0.05, why));
	assert_false(point(&s, t, 4, 1, 1, 0.09, why));
	assert_true(point(&s, t, 4, 2, 1, 0.01, why));
	assert_string_equal(why, "asha: acc 0.01 at epoch 1 is below the cutoff 0.0766667 of rung 1 "
			    "(2 trials there before it, 1 in 3 goes on)");
	assert_false(point(&s, t, 4, 3, 1, 0.08, why));
	/* a second point before the next rung is not judged again */
	assert_false(point(&s, t, 4, 2, 2, 0.0, why));
	/* a trial that first reports at epoch 5 is recorded at rung 3 only */
	assert_false(point(&s, t, 4, 1, 5, 0.2, why));
	assert_true((t[1].recorded & 2) && t[1].rung_score[1] == 0.2);
	assert_true(point(&s, t, 4, 0, 3, 0.1, why)); /* of [0.2]: cutoff 0.2 */
	release(t, 4);
}

/* mode min: 5 first, 3 on (better than 5), 9 above the cutoff of [5, 3]:
 * 3 + 2/3 x 2 = 4.33 (as scores: -5 + 2/3 x 2 = -3.67). */
static void test_asha_min(void **state)
{
	struct spec_sweep s = asha(false);
	struct es_trial t[3] = { 0 };
	char why[400] = "";

	assert_false(point(&s, t, 3, 0, 1, 5, why));
	assert_false(point(&s, t, 3, 1, 1, 3, why));
	assert_true(point(&s, t, 3, 2, 1, 9, why));
	assert_string_equal(why, "asha: acc 9 at epoch 1 is above the cutoff 3.66667 of rung 1 "
			    "(2 trials there before it, 1 in 3 goes on)");
	release(t, 3);
}

/* Median, min_resource 2, min_trials 2: A (1: 0.5, 2: 0.6, 3: 0.7) and B
 * (1: 0.2, 2: 0.4) average 0.55 and 0.3 up to 2, median 0.425. */
static void test_median(void **state)
{
	struct spec_sweep s = { .metric = "acc", .maximize = true, .stop = SWEEP_STOP_MEDIAN,
				.min_resource = 2, .min_trials = 2 };
	struct es_trial t[4] = { 0 };
	char why[400] = "";

	assert_false(point(&s, t, 4, 0, 1, 0.5, why));
	assert_false(point(&s, t, 4, 0, 2, 0.6, why));
	assert_false(point(&s, t, 4, 0, 3, 0.7, why));
	assert_false(point(&s, t, 4, 2, 1, 0.1, why)); /* before min_resource */
	assert_false(point(&s, t, 4, 2, 2, 0.3, why)); /* only A got to 2: 1 < min_trials */
	assert_false(point(&s, t, 4, 1, 1, 0.2, why));
	assert_false(point(&s, t, 4, 1, 2, 0.4, why)); /* A 0.55, C 0.2: median 0.375 */
	assert_true(point(&s, t, 4, 2, 2, 0.3, why)); /* best 0.3 < median of 0.55, 0.3 */
	assert_string_equal(why, "median: the best acc 0.3 by step 2 is below the median 0.425 of 2 "
			    "other trials' running averages there");
	assert_false(point(&s, t, 4, 3, 2, 0.5, why)); /* 0.5 >= the median 0.3 of A 0.55, B 0.3, C 0.233 */
	release(t, 4);
}

/* trials[me] gets (res, value); the promotion form's verdict */
static enum es_verdict arrive(const struct spec_sweep *s, struct es_trial *t, size_t n, size_t me, double res,
			      double value, char *why)
{
	struct es_trial *all[8];

	for (size_t i = 0; i < n; i++)
		all[i] = &t[i];
	es_trial_add(&t[me], res, value);
	return earlystop_arrive(s, all, n, me, why, 400);
}

static long promotion(const struct spec_sweep *s, struct es_trial *t, size_t n, const bool *paused, bool force)
{
	struct es_trial *all[8];

	for (size_t i = 0; i < n; i++)
		all[i] = &t[i];
	return earlystop_promotion(s, all, n, paused, force);
}

/* eta 3, rungs 1, 3, 9. At rung 1: 0.5 (1 there, floor(1/3) = 0 go on:
 * paused), 0.7 (paused), 0.6 (3 there, 1 goes on, 0.7 is best: paused);
 * then 0.7's trial is promoted, once; a fourth, 0.9, is the best of 4
 * there (floor(4/3) = 1 goes on: earlier promotions do not count against
 * it): it goes on at once. */
static void test_asha_promotion(void **state)
{
	struct spec_sweep s = asha(true);
	struct es_trial t[5] = { 0 };
	bool paused[5] = { 0 };
	char why[400] = "";

	s.pause = true;
	assert_int_equal(arrive(&s, t, 5, 0, 0.5, 0.1, why), ES_NONE); /* below rung 1 */
	assert_int_equal(arrive(&s, t, 5, 0, 1, 0.5, why), ES_PAUSE);
	assert_string_equal(why, "asha: acc 0.5 at epoch 1 ranks 1 of 1 at rung 1, where 0 go on: paused "
			    "until it is promoted");
	paused[0] = true;
	assert_int_equal(promotion(&s, t, 5, paused, false), -1); /* floor(1/3) = 0 */
	assert_int_equal(arrive(&s, t, 5, 1, 1, 0.7, why), ES_PAUSE);
	paused[1] = true;
	assert_int_equal(arrive(&s, t, 5, 2, 1, 0.6, why), ES_PAUSE); /* 0.7 ranks above it */
	paused[2] = true;
	assert_int_equal(promotion(&s, t, 5, paused, false), 1);
	paused[1] = false;
	assert_int_equal(promotion(&s, t, 5, paused, false), -1); /* the one place is taken */
	assert_int_equal(arrive(&s, t, 5, 3, 2, 0.9, why), ES_GO); /* 2 >= rung 1: best of 4 */
	/* trial 1 reaches rung 3 alone: paused; promoted there by force only */
	assert_int_equal(arrive(&s, t, 5, 1, 3, 0.8, why), ES_PAUSE);
	paused[1] = true;
	assert_int_equal(promotion(&s, t, 5, paused, false), -1);
	/* force: the best paused trial of the highest rung, 1 (rung 3), not 0 or 2 */
	assert_int_equal(promotion(&s, t, 5, paused, true), 1);
	paused[1] = false;
	assert_int_equal(promotion(&s, t, 5, paused, true), 2); /* then the best of rung 1 left: 0.6 */
	release(t, 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rungs),
		cmocka_unit_test(test_asha_max),
		cmocka_unit_test(test_asha_min),
		cmocka_unit_test(test_asha_promotion),
		cmocka_unit_test(test_median),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
