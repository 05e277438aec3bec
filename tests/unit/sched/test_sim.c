/*
 * The simulator against the peer (Tiresias NSDI'19 simulator, --scheme=count)
 * on the traces bundled in traces/ (traces/README.md): argv[1] is that
 * directory, SOURCE_ROOT/traces without it. The peer's rows are in
 * philly/replay/peer_results_tiresias_sim.csv. A trace that cannot be read
 * fails the test, naming the file: nothing here is skipped.
 */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/xalloc.h"
#include "sim/sim.h"

static const char *traces;

static void run(const char *rel, unsigned nodes, unsigned gpn, enum sched_policy pol,
		struct sim_stats *st)
{
	char path[1024];
	struct errbuf eb = ERRBUF_INIT;
	struct sim_trace t;
	struct sim_opts o;
	struct sim_result *res;

	snprintf(path, sizeof(path), "%s/%s", traces, rel);
	if (access(path, R_OK) < 0)
		fail_msg("cannot read trace '%s': %s (traces/ is part of the repository)", path,
			 strerror(errno));
	if (sim_trace_load(path, SIM_FORMAT_TIRESIAS, &t, &eb) < 0)
		fail_msg("%s", eb.msg);
	memset(&o, 0, sizeof(o));
	sched_policy_conf_init(&o.conf, pol);
	o.nodes = nodes;
	o.gpus_per_node = gpn;
	res = xcalloc(t.njobs + 1, sizeof(*res));
	sim_run(&t, &o, res, st);
	free(res);
	sim_trace_release(&t);
}

static void near(double got, double want, double tol, const char *what)
{
	double dev = (got - want) / want;
	if (dev > tol || dev < -tol)
		fail_msg("%s: %.1f vs the peer's %.1f (%+.1f %%, tolerance %.0f %%)", what, got, want,
			 dev * 100, tol * 100);
}

/* The bundled 60-job sample: fifo, srtf and las match the peer to its rounding
 * (one decimal). */
static void test_sample_matches_peer(void **state)
{
	static const struct {
		unsigned nodes;
		enum sched_policy pol;
		double avg, median, queue;
		uint64_t makespan;
	} rows[] = {
		{ 32, SCHED_POLICY_FIFO, 178.4, 125.0, 0.0, 3271 },
		{ 4, SCHED_POLICY_FIFO, 200.8, 149.5, 22.4, 3335 },
		{ 4, SCHED_POLICY_SRTF, 192.1, 126.5, 13.7, 3271 },
		{ 4, SCHED_POLICY_LAS, 190.7, 130.0, 12.3, 3271 },
		{ 2, SCHED_POLICY_FIFO, 1556.5, 1415.5, 1378.1, 5747 },
		{ 2, SCHED_POLICY_SRTF, 519.9, 142.0, 341.4, 4901 },
		{ 2, SCHED_POLICY_LAS, 715.3, 150.5, 536.9, 4806 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct sim_stats st;
		run("tiresias-sample/60_job.csv", rows[i].nodes, 4, rows[i].pol, &st);
		assert_int_equal(st.jobs, 60);
		assert_true(st.avg_jct > rows[i].avg - 0.06 && st.avg_jct < rows[i].avg + 0.06);
		assert_true(st.median_jct == rows[i].median);
		assert_true(st.avg_queue > rows[i].queue - 0.06 && st.avg_queue < rows[i].queue + 0.06);
		assert_int_equal(st.makespan, rows[i].makespan);
		assert_true(st.utilisation > 0 && st.utilisation <= 1);
	}
	(void)state;
}

/* The Philly VC 11cb48 replay on 4x8 and 8x8: fifo and srtf within 3 %, las
 * within 5 %, and the default (duration-free) policy below the peer's
 * dlas-gpu and within 1.25x of srtf. */
static void test_philly_vc_targets(void **state)
{
	static const char *rel = "philly/replay/vc11cb48_oct-nov_tiresias.csv";
	static const struct {
		unsigned nodes;
		double fifo, shortest, dlas_gpu;
	} rows[] = {
		{ 4, 193341.9, 4253.0, 5651.7 },
		{ 8, 11187.9, 3353.1, 3733.4 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct sim_stats fifo, srtf, las, def;
		run(rel, rows[i].nodes, 8, SCHED_POLICY_FIFO, &fifo);
		run(rel, rows[i].nodes, 8, SCHED_POLICY_SRTF, &srtf);
		run(rel, rows[i].nodes, 8, SCHED_POLICY_LAS, &las);
		run(rel, rows[i].nodes, 8, SCHED_POLICY_DEFAULT, &def);
		assert_int_equal(fifo.jobs, 11897);
		near(fifo.avg_jct, rows[i].fifo, 0.03, "fifo");
		near(srtf.avg_jct, rows[i].shortest, 0.03, "srtf");
		near(las.avg_jct, rows[i].dlas_gpu, 0.05, "las");
		assert_true(def.avg_jct < rows[i].dlas_gpu);
		assert_true(def.avg_jct < 1.25 * srtf.avg_jct);
	}
	(void)state;
}

/* A trace of our own, worked out by hand, so that a replay is checked
 * against numbers that need no peer: on 1 node x 2 GPUs under fifo,
 * job 0 (1 GPU, 0..10), job 1 (2 GPUs, waits for job 0: 10..15), job 2
 * (1 GPU, behind the head job 1 although a GPU is free: 15..18). */
static void test_tiny_fifo_by_hand(void **state)
{
	char *path = xasprintf("%s/tests/unit/sched/data/tiny_tiresias.csv", SOURCE_ROOT);
	struct errbuf eb = ERRBUF_INIT;
	struct sim_trace t;
	struct sim_opts o;
	struct sim_result res[3];
	struct sim_stats st;

	if (sim_trace_load(path, SIM_FORMAT_TIRESIAS, &t, &eb) < 0)
		fail_msg("%s", eb.msg);
	assert_int_equal(t.njobs, 3);
	memset(&o, 0, sizeof(o));
	sched_policy_conf_init(&o.conf, SCHED_POLICY_FIFO);
	o.nodes = 1;
	o.gpus_per_node = 2;
	sim_run(&t, &o, res, &st);
	assert_int_equal(st.jobs, 3);
	assert_true(st.avg_jct > 13.33 && st.avg_jct < 13.34); /* (10 + 14 + 16) / 3 */
	assert_int_equal(st.makespan, 18);
	assert_int_equal(st.preemptions, 0);
	sim_trace_release(&t);
	free(path);
	(void)state;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiny_fifo_by_hand),
		cmocka_unit_test(test_sample_matches_peer),
		cmocka_unit_test(test_philly_vc_targets),
	};
	traces = argc > 1 ? argv[1] : SOURCE_ROOT "/traces";
	return cmocka_run_group_tests(tests, NULL, NULL);
}
