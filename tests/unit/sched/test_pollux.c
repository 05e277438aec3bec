/*
 * Job lengths for Pollux workloads (src/sim/pollux.h) from a tiny profile
 * directory of our own, written by the test with invented numbers, checked
 * against values worked out by hand; the refusals; a small replay.
 */
#include "base/compat.h"

#include <math.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/xalloc.h"
#include "sim/pollux.h"
#include "sim/sim.h"

static char root[] = "/tmp/yard-test-pollux-XXXXXX";
static char *made[64]; /* files and folders to remove, in creation order */
static size_t nmade;

static void put(const char *rel, const char *text)
{
	char *path = xasprintf("%s/%s", root, rel);
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f))
		fail_msg("cannot write '%s'", path);
	assert_true(nmade < ARRAY_SIZE(made));
	made[nmade++] = path;
}

static void folder(const char *rel)
{
	char *path = xasprintf("%s/%s", root, rel);

	if (mkdir(path, 0700) < 0)
		fail_msg("cannot mkdir '%s': %s", path, strerror(errno));
	assert_true(nmade < ARRAY_SIZE(made));
	made[nmade++] = path;
}

/*
 * "toy": validated batch sizes 32 and 128 (3 and 4 epochs: 3 count), so at
 * the last epoch 60 and 18 iterations, and for B between them
 * ((B - 32) x 18 + (128 - B) x 60) / 96. Local batch sizes 16 to 64
 * profiled; placements "1", "2", "12", "22"; 3 nodes x 6 GPUs only in
 * scalability.csv. For the progress model: progress by epoch the least of
 * the curves' (10, 20, 28), so 28 in all; grad_sqr 1 and grad_var 1 at 32
 * and 3 at 128, so at batch B var = ((B - 32) x 3 + (128 - B)) / 96 and
 * the gain (var + 1) / (var x 32 / B + 1): 1 at 32, 16/11 at 64, 1.875 at
 * 96, 16/7 at 128.
 */
static int setup(void **state)
{
	if (!mkdtemp(root))
		fail_msg("mkdtemp: %s", strerror(errno));
	folder("toy");
	put("toy/validation-32.csv", "progress,iteration,metric,grad_sqr,grad_var\n"
				     "10,20,0.5,1,1\n20,40,0.6,1,1\n30,60,0.7,1,1\n");
	put("toy/validation-128.csv", "progress,iteration,metric,grad_sqr,grad_var\n"
				      "12,6,0.5,1,3\n20,12,0.6,1,3\n28,18,0.7,1,3\n40,24,0.8,1,3\n");
	put("toy/placements.csv", "placement,local_bsz,step_time,sync_time\n"
				  "1,16,1.0,0.0\n1,32,2.0,0.0\n1,64,3.0,0.0\n"
				  "2,16,0.6,0.1\n2,32,1.0,0.2\n"
				  "12,16,0.9,0.2\n12,32,1.3,0.3\n"
				  "22,16,0.8,0.3\n22,32,1.2,0.4\n");
	put("toy/scalability.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
				   "3,6,16,1.5,0.5\n3,6,32,2.5,0.5\n");
	(void)state;
	return 0;
}

static int teardown(void **state)
{
	while (nmade) {
		char *p = made[--nmade];
		if (remove(p) < 0)
			fprintf(stderr, "cannot remove '%s': %s\n", p, strerror(errno));
		free(p);
	}
	if (rmdir(root) < 0)
		fprintf(stderr, "cannot remove '%s': %s\n", root, strerror(errno));
	(void)state;
	return 0;
}

static const struct pollux_app *toy(struct pollux_profiles *p)
{
	const struct pollux_app *app;
	struct errbuf eb = ERRBUF_INIT;

	pollux_profiles_init(p, root);
	if (pollux_profiles_app(p, "toy", &app, &eb) < 0)
		fail_msg("%s", eb.msg);
	return app;
}

static void test_profiles_read(void **state)
{
	struct pollux_profiles p;
	const struct pollux_app *app = toy(&p), *again;
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(app->ncurves, 2);
	assert_int_equal(app->init_batch_size, 32);
	assert_int_equal(app->max_batch_size, 128);
	assert_int_equal(app->max_epochs, 3);
	assert_true(app->stats);
	assert_true(app->min_local_bsz == 16 && app->max_local_bsz == 64);
	assert_int_equal(app->nplacements, 9);
	assert_int_equal(app->nsteps, 11);
	assert_int_equal(pollux_profiles_app(&p, "toy", &again, &eb), 0);
	assert_ptr_equal(app, again); /* read once */
	pollux_profiles_release(&p);
	(void)state;
}

static void test_durations_by_hand(void **state)
{
	static const struct {
		unsigned gpus, gpn;
		uint64_t bsz;
		const char *placement;
		unsigned accum;
		uint64_t atomic, batch;
		double step, iters, seconds;
		double work; /* progress / gain; NAN: not worked out */
	} rows[] = {
		/* one GPU above the smallest validated batch: one accumulation step
		 * at least: 2 x 32, (2.0 + 1 x (2.0 - 0)) x 46 */
		{ 1, 2, 64, "1", 1, 32, 64, 4.0, 46, 184, 28 / (16 / 11.0) },
		/* the smallest validated batch on one GPU: no accumulation */
		{ 1, 2, 32, "1", 0, 32, 32, 2.0, 60, 120, 28 },
		/* 128 on one GPU: 2 x 64, (3.0 + 3.0) x 18 */
		{ 1, 2, 128, "1", 1, 64, 128, 6.0, 18, 108, 28 / (16 / 7.0) },
		{ 2, 2, 64, "2", 0, 32, 64, 1.0, 46, 46, 28 / (16 / 11.0) },
		/* 2 + 2 GPUs, local 24: step between 0.8 and 1.2 is 1.0; 32 iterations at 96 */
		{ 4, 2, 96, "22", 0, 24, 96, 1.0, 32, 32, 28 / 1.875 },
		/* 2 + 1 GPUs: looked up as its smallest rotation "12" */
		{ 3, 2, 96, "12", 0, 32, 96, 1.3, 32, 41.6, 28 / 1.875 },
		/* 2 + 2 + 2 is not in placements.csv: 3 nodes x 6 GPUs from
		 * scalability.csv; local ceil(128 / 6) = 22 capped to floor(128 / 6) = 21,
		 * so batch 126: step 1.5 + 5 / 16 = 1.8125, iterations
		 * (94 x 18 + 2 x 60) / 96 = 18.875 */
		{ 6, 2, 128, "", 0, 21, 126, 1.8125, 18.875, 1.8125 * 18.875, NAN },
		/* 256 on 2 GPUs: local 128 in two steps of 64, capped to 32 each (the
		 * largest validated batch is 128): (1.0 + (1.0 - 0.2)) x 18 */
		{ 2, 2, 256, "2", 1, 32, 128, 1.8, 18, 32.4, 28 / (16 / 7.0) },
	};
	struct pollux_profiles p;
	const struct pollux_app *app = toy(&p);

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct errbuf eb = ERRBUF_INIT;
		struct pollux_run r;

		if (pollux_duration(app, rows[i].gpus, rows[i].gpn, rows[i].bsz, &r, &eb) < 0)
			fail_msg("row %zu: %s", i, eb.msg);
		if (rows[i].placement[0])
			assert_string_equal(r.placement, rows[i].placement);
		else
			assert_string_equal(r.placement, "222");
		assert_int_equal(r.accum_steps, rows[i].accum);
		assert_int_equal(r.atomic_bsz, rows[i].atomic);
		assert_int_equal(r.batch_size, rows[i].batch);
		if (fabs(r.step_time - rows[i].step) > 1e-9 || fabs(r.iterations - rows[i].iters) > 1e-9 ||
		    fabs(r.seconds - rows[i].seconds) > 1e-9)
			fail_msg("row %zu: step %g iterations %g seconds %g, expected %g %g %g", i,
				 r.step_time, r.iterations, r.seconds, rows[i].step, rows[i].iters,
				 rows[i].seconds);
		if (!isnan(rows[i].work) &&
		    (fabs(r.progress_iterations - rows[i].work) > 1e-9 ||
		     fabs(r.progress_seconds - rows[i].work * rows[i].step) > 1e-9))
			fail_msg("row %zu: progress work %g seconds %g, expected %g %g", i,
				 r.progress_iterations, r.progress_seconds, rows[i].work,
				 rows[i].work * rows[i].step);
		assert_true(r.progress_seconds > 0);
	}
	pollux_profiles_release(&p);
	(void)state;
}

static void expect_refusal(const struct pollux_app *app, unsigned gpus, unsigned gpn,
			   uint64_t bsz, const char *want)
{
	struct errbuf eb = ERRBUF_INIT;
	struct pollux_run r;

	assert_true(pollux_duration(app, gpus, gpn, bsz, &r, &eb) < 0);
	if (!strstr(eb.msg, want))
		fail_msg("'%s' lacks '%s'", eb.msg, want);
}

static void test_durations_refused(void **state)
{
	struct pollux_profiles p;
	const struct pollux_app *app = toy(&p);

	/* one node of 4: neither placement "4" nor 1 node x 4 GPUs profiled */
	expect_refusal(app, 4, 4, 96, "no step time profiled for placement '4' nor for 1 nodes with 4 GPUs");
	/* local batch 8 on "22": below the 16 profiled */
	expect_refusal(app, 4, 2, 32, "local batch size 8 is outside the ones profiled for placement '22' (16 to 32)");
	/* 16 on one GPU: below the smallest validated batch size */
	expect_refusal(app, 1, 2, 16, "batch size 16 is outside the validated ones (32 to 128)");
	/* 200 GPUs cannot share 128 examples */
	expect_refusal(app, 200, 2, 256, "200 GPUs leave under one example each");
	pollux_profiles_release(&p);
	(void)state;
}

static void expect_bad_app(const char *name, const char *want)
{
	struct pollux_profiles p;
	const struct pollux_app *app;
	struct errbuf eb = ERRBUF_INIT;

	pollux_profiles_init(&p, root);
	assert_true(pollux_profiles_app(&p, name, &app, &eb) < 0);
	if (!strstr(eb.msg, want))
		fail_msg("'%s' lacks '%s'", eb.msg, want);
	pollux_profiles_release(&p);
}

static void test_bad_profiles(void **state)
{
	char *want;

	folder("badnum");
	put("badnum/placements.csv", "placement,local_bsz,step_time,sync_time\n1,16,1.0,0.0\n1,32,fast,0.0\n");
	put("badnum/scalability.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n");
	put("badnum/validation-32.csv", "iteration\n10\n");
	want = xasprintf("'%s/badnum/placements.csv' line 3: field 'step_time': 'fast' is not a number", root);
	expect_bad_app("badnum", want);
	free(want);

	folder("nocol");
	put("nocol/placements.csv", "placement,local_bsz,step_time,sync_time\n1,16,1.0,0.0\n");
	put("nocol/scalability.csv", "num_nodes,num_replicas,local_bsz,step_time\n");
	expect_bad_app("nocol", "scalability.csv': the header lacks the column 'sync_time'");

	folder("novalid");
	put("novalid/placements.csv", "placement,local_bsz,step_time,sync_time\n1,16,1.0,0.0\n");
	put("novalid/scalability.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n");
	expect_bad_app("novalid", "no validation-BATCHSIZE.csv files");

	folder("badrows");
	put("badrows/placements.csv", "placement,local_bsz,step_time,sync_time\n1,16,1.0,0.0\n10,16,1.0,0.0\n");
	put("badrows/scalability.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n");
	put("badrows/validation-32.csv", "iteration\n10\n");
	expect_bad_app("badrows", "line 3: field 'placement': '10' is not 1 to 23 digits from 1 to 9");

	folder("badcurve");
	put("badcurve/placements.csv", "placement,local_bsz,step_time,sync_time\n1,16,1.0,0.5\n");
	put("badcurve/scalability.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n2,1,16,1.0,0.5\n");
	expect_bad_app("badcurve", "line 2: field 'num_replicas': 1 is fewer than the 2 nodes");

	expect_bad_app("missing", "missing/placements.csv': No such file or directory");
	expect_bad_app("../toy", "application '../toy' is not a folder name");
	(void)state;
}

static void test_trace_refusals(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct sim_trace t;
	char *trace = xasprintf("%s/bad.csv", root);

	put("bad.csv", "name,time,application,num_replicas,batch_size\n"
		       "toy-0,0,toy,2,64\ntoy-1,5,toy,1,16\n");
	assert_true(sim_trace_load(trace, SIM_FORMAT_POLLUX, &t, &eb) < 0);
	if (!strstr(eb.msg, "give --profiles DIR"))
		fail_msg("'%s'", eb.msg);
	assert_true(sim_trace_load_pollux(trace, root, 2, POLLUX_MODEL_ITERATIONS, &t, &eb) < 0);
	if (!strstr(eb.msg, "bad.csv' line 3: application 'toy': batch size 16 is outside"))
		fail_msg("'%s'", eb.msg);
	free(trace);

	/* the progress model needs gradient statistics "plain" lacks */
	folder("plain");
	put("plain/placements.csv", "placement,local_bsz,step_time,sync_time\n1,16,1.0,0.0\n");
	put("plain/scalability.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n");
	put("plain/validation-16.csv", "iteration\n10\n");
	trace = xasprintf("%s/plain.csv", root);
	put("plain.csv", "name,time,application,num_replicas,batch_size\nplain-0,0,plain,1,16\n");
	if (sim_trace_load_pollux(trace, root, 2, POLLUX_MODEL_ITERATIONS, &t, &eb) < 0)
		fail_msg("%s", eb.msg);
	assert_int_equal(t.jobs[0].duration, 10);
	sim_trace_release(&t);
	assert_true(sim_trace_load_pollux(trace, root, 2, POLLUX_MODEL_PROGRESS, &t, &eb) < 0);
	if (!strstr(eb.msg, "plain.csv' line 2: application 'plain': the progress model needs the "
			    "columns progress, grad_sqr and grad_var"))
		fail_msg("'%s'", eb.msg);
	free(trace);

	trace = xasprintf("%s/bad2.csv", root);
	put("bad2.csv", "name,time,application,num_replicas,batch_size\ntoy-0,0,toy,two,64\n");
	assert_true(sim_trace_load_pollux(trace, root, 2, POLLUX_MODEL_ITERATIONS, &t, &eb) < 0);
	if (!strstr(eb.msg, "bad2.csv' line 2: field 'num_replicas': 'two' is not a GPU count"))
		fail_msg("'%s'", eb.msg);
	free(trace);
	(void)state;
}

/* On 1 node x 2 GPUs under fifo: toy-0 (2 GPUs, 46 s) runs 0..46; toy-1
 * (1 GPU, 120 s, at 10) and toy-2 (1 GPU, 184 s, at 20) wait for it and
 * run 46..166 and 46..230: JCTs 46, 156, 210. */
static void test_pollux_replay(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	struct sim_trace t;
	struct sim_opts o;
	struct sim_result res[3];
	struct sim_stats st;
	char *trace = xasprintf("%s/w.csv", root);

	put("w.csv", "name,time,application,num_replicas,batch_size\n"
		     "toy-0,0,toy,2,64\ntoy-1,10,toy,1,32\ntoy-2,20,toy,1,64\n");
	if (sim_trace_load_pollux(trace, root, 2, POLLUX_MODEL_ITERATIONS, &t, &eb) < 0)
		fail_msg("%s", eb.msg);
	assert_int_equal(t.njobs, 3);
	assert_int_equal(t.jobs[0].duration, 46);
	assert_int_equal(t.jobs[1].duration, 120);
	assert_int_equal(t.jobs[2].duration, 184);
	assert_int_equal(t.jobs[2].gpus, 1);
	memset(&o, 0, sizeof(o));
	sched_policy_conf_init(&o.conf, SCHED_POLICY_FIFO);
	o.nodes = 1;
	o.gpus_per_node = 2;
	sim_run(&t, &o, res, &st);
	assert_int_equal(res[0].end, 46);
	assert_int_equal(res[1].start, 46);
	assert_int_equal(res[1].end, 166);
	assert_int_equal(res[2].end, 230);
	assert_true(fabs(st.avg_jct - (46 + 156 + 210) / 3.0) < 1e-9);
	assert_int_equal(st.makespan, 230);
	sim_trace_release(&t);

	/* the progress model: 19.25 x 1.0, 28 x 2.0, 19.25 x 4.0 (rounded) */
	if (sim_trace_load_pollux(trace, root, 2, POLLUX_MODEL_PROGRESS, &t, &eb) < 0)
		fail_msg("%s", eb.msg);
	assert_int_equal(t.jobs[0].duration, 19);
	assert_int_equal(t.jobs[1].duration, 56);
	assert_int_equal(t.jobs[2].duration, 77);
	sim_trace_release(&t);
	free(trace);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_profiles_read),
		cmocka_unit_test(test_durations_by_hand),
		cmocka_unit_test(test_durations_refused),
		cmocka_unit_test(test_bad_profiles),
		cmocka_unit_test(test_trace_refusals),
		cmocka_unit_test(test_pollux_replay),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
