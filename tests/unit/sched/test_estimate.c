/* Start estimates (sched/estimate.h): small worlds of 4-GPU nodes, with the
 * exact estimate of every waiting job worked out by hand. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "sched/estimate.h"

#define MAXN 4
#define MAXJ 8

struct world {
	struct sched_node nodes[MAXN];
	struct sched_gpu gpus[MAXN][4];
	struct sched_label labels[MAXN][1];
	char names[MAXN][16];
	size_t nnodes;
	struct sched_est_running run[MAXJ];
	struct sched_hold holds[MAXJ][1];
	unsigned held_gpus[MAXJ][4];
	size_t nrun;
	struct sched_est_waiting wait[MAXJ];
	struct sched_job sj[MAXJ];
	struct sched_task tasks[MAXJ][1];
	struct sched_label want[MAXJ][1];
	size_t nwait;
	struct sched_estimate est[MAXJ];
	uint64_t next_id;
};

static void node(struct world *w, const char *rack)
{
	size_t i = w->nnodes++;

	snprintf(w->names[i], sizeof(w->names[i]), "gpu-%zu", i + 1);
	for (unsigned g = 0; g < 4; g++)
		w->gpus[i][g] = (struct sched_gpu){ .index = g, .free = true };
	w->nodes[i] = (struct sched_node){ .name = w->names[i], .schedulable = true,
					   .gpus = w->gpus[i], .ngpus = 4, .cpus_milli = 64000,
					   .free_cpus_milli = 64000 };
	if (rack) {
		w->labels[i][0] = (struct sched_label){ "rack", rack };
		w->nodes[i].labels = w->labels[i];
		w->nodes[i].nlabels = 1;
	}
}

/* A running job (the next id) on the first free gpus GPUs of node n, ending
 * at end (0: no timeout). */
static void running(struct world *w, size_t n, unsigned gpus, uint64_t end)
{
	size_t i = w->nrun++;
	unsigned k = 0;

	for (unsigned g = 0; g < 4 && k < gpus; g++)
		if (w->gpus[n][g].free) {
			w->gpus[n][g].free = false;
			w->held_gpus[i][k++] = g;
		}
	w->nodes[n].free_cpus_milli -= 1000;
	w->holds[i][0] = (struct sched_hold){ .node = n, .gpus = w->held_gpus[i], .ngpus = gpus,
					      .cpus_milli = 1000 };
	w->run[i] = (struct sched_est_running){ .id = ++w->next_id, .holds = w->holds[i],
						.nholds = 1, .end = end };
}

/* A waiting job (the next id) of one task of gpus GPUs, in queue order. */
static void waiting(struct world *w, unsigned gpus, uint64_t bound, const char *rack)
{
	size_t i = w->nwait++;

	w->tasks[i][0] = (struct sched_task){ "worker", 0, gpus, 1000, 0 };
	w->sj[i] = (struct sched_job){ .id = ++w->next_id, .tasks = w->tasks[i], .ntasks = 1 };
	if (rack) {
		w->want[i][0] = (struct sched_label){ "rack", rack };
		w->sj[i].labels = w->want[i];
		w->sj[i].nlabels = 1;
	}
	w->wait[i] = (struct sched_est_waiting){ .job = &w->sj[i], .bound = bound };
}

static void estimate(struct world *w, uint64_t now, size_t max_tries)
{
	sched_estimate_starts(w->nodes, w->nnodes, w->run, w->nrun, w->wait, w->nwait, now,
			      max_tries, w->est);
}

static void assert_start(const struct world *w, size_t i, uint64_t start)
{
	char why[256];

	sched_estimate_reason(&w->est[i], why, sizeof(why));
	if (w->est[i].code != SCHED_EST_OK)
		fail_msg("job %" PRIu64 ": no estimate (%s), expected %" PRIu64,
			 w->sj[i].id, why, start);
	assert_int_equal(w->est[i].start, start);
}

static void assert_reason(const struct world *w, size_t i, const char *want)
{
	char why[256];

	sched_estimate_reason(&w->est[i], why, sizeof(why));
	assert_string_equal(why, want);
}

/* Two nodes; job 1 holds gpu-1 until 100, job 2 half of gpu-2 until 50.
 * Job 3 (4 GPUs for 30) needs a whole node: gpu-2 at 50, until 80. Job 4
 * (2 GPUs, no timeout) cannot start before job 3; gpu-2 is full until 80.
 * Job 5 (4 GPUs for 10): gpu-1 at 100. Job 6 (4 GPUs): gpu-1 again once job
 * 5 ends, 110. Job 7 (4 GPUs) then finds job 6 on gpu-1 and job 4 on half
 * of gpu-2 for good; job 4 gone alone would let it on gpu-2, so it alone is
 * named; job 8
 * (1 GPU, room for it on gpu-2) is behind job 7. */
static void test_queue_in_order(void **state)
{
	struct world w = { 0 };

	node(&w, NULL);
	node(&w, NULL);
	running(&w, 0, 4, 100);
	running(&w, 1, 2, 50);
	waiting(&w, 4, 30, NULL);
	waiting(&w, 2, 0, NULL);
	waiting(&w, 4, 10, NULL);
	waiting(&w, 4, 0, NULL);
	waiting(&w, 4, 5, NULL);
	waiting(&w, 1, 5, NULL);
	estimate(&w, 0, 1000000);
	assert_start(&w, 0, 50);
	assert_start(&w, 1, 80);
	assert_start(&w, 2, 100);
	assert_start(&w, 3, 110);
	assert_reason(&w, 4,
		      "no_timeout: job 4, ahead of it, would hold the GPUs it needs and has no timeout");
	assert_int_equal(w.est[4].blocker, 4);
	assert_reason(&w, 5, "behind: job 7, ahead of it, has no start estimate");
	(void)state;
}

/* A job that fits now starts now; one that waits only for a running job's
 * timeout starts at it; a running job past its timeout ends "now". */
static void test_now_and_overdue(void **state)
{
	struct world w = { 0 };

	node(&w, NULL);
	node(&w, NULL);
	running(&w, 0, 4, 500); /* overdue at 1000: being stopped */
	running(&w, 1, 2, 1060);
	waiting(&w, 2, 60, NULL);  /* the free half of gpu-2 */
	waiting(&w, 4, 60, NULL);  /* gpu-1, at once */
	waiting(&w, 2, 60, NULL);  /* gpu-2 once job 2 and job 3 are done: 1060 */
	estimate(&w, 1000, 1000000);
	assert_start(&w, 0, 1000);
	assert_start(&w, 1, 1000);
	assert_start(&w, 2, 1060);
	assert_reason(&w, 0, "");
	(void)state;
}

/* A running job with no timeout holding what the head needs: no estimate,
 * for the head and everyone behind it. */
static void test_no_timeout_running(void **state)
{
	struct world w = { 0 };

	node(&w, NULL);
	running(&w, 0, 4, 0);
	waiting(&w, 1, 60, NULL);
	waiting(&w, 1, 60, NULL);
	estimate(&w, 0, 1000000);
	assert_int_equal(w.est[0].code, SCHED_EST_NO_TIMEOUT);
	assert_reason(&w, 0, "no_timeout: job 1 holds the GPUs it needs and has no timeout");
	assert_int_equal(w.est[1].code, SCHED_EST_BEHIND);
	assert_reason(&w, 1, "behind: job 2, ahead of it, has no start estimate");
	(void)state;
}

/* The jobs named are the ones it needs: job 1 (no timeout) is on a rack the
 * job does not use, so only job 2 is named; with both halves of one node
 * held by jobs with no timeout, both count. */
static void test_blockers_named(void **state)
{
	struct world w = { 0 }, w2 = { 0 };

	node(&w, "a");
	node(&w, "b");
	running(&w, 0, 4, 0);
	running(&w, 1, 4, 0);
	waiting(&w, 4, 60, "b");
	estimate(&w, 0, 1000000);
	assert_reason(&w, 0, "no_timeout: job 2 holds the GPUs it needs and has no timeout");

	node(&w2, NULL);
	running(&w2, 0, 2, 0);
	running(&w2, 0, 2, 0);
	waiting(&w2, 4, 60, NULL);
	estimate(&w2, 0, 1000000);
	assert_reason(&w2, 0,
		      "no_timeout: job 1 and 1 more hold the GPUs it needs and have no timeout");
	assert_int_equal(w2.est[0].nblockers, 2);
	(void)state;
}

/* A job that fits nowhere even on an empty cluster holds nobody up (the
 * sweep it made past job 1's end is undone); a draining node is not
 * counted. */
static void test_never_fits(void **state)
{
	struct world w = { 0 };

	node(&w, NULL);
	node(&w, NULL);
	w.nodes[1].schedulable = false;
	running(&w, 0, 2, 100);
	waiting(&w, 8, 60, NULL);
	waiting(&w, 2, 60, NULL);
	waiting(&w, 4, 60, NULL);
	estimate(&w, 7, 1000000);
	assert_reason(&w, 0,
		      "never_fits: it does not fit on the ready nodes even with no job running");
	assert_start(&w, 1, 7);
	assert_start(&w, 2, 100);
	(void)state;
}

/* The work bound, in nodes visited: job 1 costs placement's state of the
 * one node (1) and a placement (SCHED_EST_PLACE_WORK); job 2 one more
 * placement on the same state, as nothing was given back in between. */
static void test_work_bound(void **state)
{
	struct world w = { 0 }, w2;

	node(&w, NULL);
	waiting(&w, 1, 60, NULL);
	waiting(&w, 1, 60, NULL);
	waiting(&w, 1, 60, NULL);
	w2 = w;
	estimate(&w, 0, 1 + SCHED_EST_PLACE_WORK);
	assert_start(&w, 0, 0);
	assert_int_equal(w.est[1].code, SCHED_EST_NOT_ESTIMATED);
	assert_int_equal(w.est[2].code, SCHED_EST_NOT_ESTIMATED);
	assert_reason(&w, 2, "not_estimated: past the work bound of one scheduling pass's estimates");
	estimate(&w2, 0, 2 + SCHED_EST_PLACE_WORK);
	assert_start(&w2, 0, 0);
	assert_start(&w2, 1, 0);
	assert_int_equal(w2.est[2].code, SCHED_EST_NOT_ESTIMATED);
	(void)state;
}

/* Resources that no listed job holds (tasks being stopped) and that never
 * come back. */
static void test_stopping(void **state)
{
	struct world w = { 0 };

	node(&w, NULL);
	for (unsigned g = 0; g < 4; g++)
		w.gpus[0][g].free = false;
	waiting(&w, 1, 60, NULL);
	estimate(&w, 0, 1000000);
	assert_reason(&w, 0, "stopping: tasks that are being stopped hold the GPUs it needs");
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_queue_in_order),   cmocka_unit_test(test_now_and_overdue),
		cmocka_unit_test(test_no_timeout_running), cmocka_unit_test(test_blockers_named),
		cmocka_unit_test(test_never_fits),       cmocka_unit_test(test_work_bound),
		cmocka_unit_test(test_stopping),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
