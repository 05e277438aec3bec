/* Fencing without the agent (agent/heartbeat.h): the rule (two thirds of the
 * lease from the basis, a sixth as the grace, no countdown while no master
 * listens), a shim's countdown fed heartbeats by hand (a dead agent, one
 * back in time, one cut off, out-of-order and lease-less files, keep tasks),
 * the stop it starts or cuts short, the exit record it leaves, and the
 * agent's writer and the file it writes. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "agent/heartbeat.h"
#include "base/clock.h"
#include "base/fsutil.h"
#include "base/xalloc.h"

static void test_rule(void **state)
{
	assert_int_equal(fence_after_ms(3000), 2000);
	assert_int_equal(fence_grace_ms(3000), 500);
	assert_int_equal(fence_after_ms(15000), 10000);
	assert_int_equal(fence_grace_ms(15000), 2500);
	assert_false(fence_due(3000, 10000, 12000));
	assert_true(fence_due(3000, 10000, 12001));
	assert_false(fence_due(0, 10000, 99000));      /* lease unknown */
	assert_false(fence_due(3000, 0, 99000));       /* basis unknown */
	assert_false(fence_due(3000, 10000, 9000));    /* a basis ahead of now */
	assert_int_equal(fence_basis(10000, false, 50000), 10000);
	assert_int_equal(fence_basis(10000, true, 50000), 50000); /* no master listens */
}

static void test_spares(void **state)
{
	json_t *keep = json_pack("{s:s}", "on_disconnect", "keep");
	json_t *stop = json_pack("{s:s}", "on_disconnect", "stop");
	json_t *none = json_object();
	assert_true(fence_spares(keep));
	assert_false(fence_spares(stop));
	assert_false(fence_spares(none));
	assert_false(fence_spares(NULL));
	json_decref(keep);
	json_decref(stop);
	json_decref(none);
}

/* A watch on a heartbeat file that is never read (the tests feed it). */
static void watch(struct fence_watch *w, const char *on_disconnect)
{
	json_t *conf = json_pack("{s:s}", "heartbeat", "/nonexistent/heartbeat.json");
	json_t *task = on_disconnect ? json_pack("{s:s}", "on_disconnect", on_disconnect) : json_object();
	fence_watch_init(w, conf, task);
	json_decref(conf);
	json_decref(task);
}

static void see(struct fence_watch *w, uint64_t basis, uint64_t lease, uint64_t at)
{
	struct heartbeat hb = { .basis_ms = basis, .lease_ms = lease, .at_ms = at, .pid = 1 };
	fence_watch_see(w, &hb);
}

static void test_dead_agent(void **state)
{
	struct fence_watch w;
	watch(&w, NULL);
	/* the agent's last answer at 10 s, its last heartbeat at 10.5 s, then nothing */
	see(&w, 10000, 3000, 10500);
	assert_false(fence_watch_check(&w, 11000));
	assert_false(fence_watch_check(&w, 12000));
	assert_true(fence_watch_check(&w, 12001));
	assert_string_equal(w.why, "stopped: its agent was gone for 1.50 s (fenced by its shim; no answer "
			    "from the master for 2.00 s of the node's 3.00 s lease)");
	assert_false(fence_watch_check(&w, 12500)); /* once */
	assert_false(fence_watch_check(&w, 99000));
	fence_watch_release(&w);
}

static void test_back_in_time(void **state)
{
	struct fence_watch w;
	watch(&w, "stop");
	see(&w, 10000, 3000, 10500);
	/* a restarted agent registers at 11.4 s: the countdown starts again */
	see(&w, 11400, 3000, 11450);
	assert_false(fence_watch_check(&w, 12500));
	assert_false(fence_watch_check(&w, 13400));
	assert_true(fence_watch_check(&w, 13401));
	fence_watch_release(&w);
}

static void test_out_of_order(void **state)
{
	struct fence_watch w;
	watch(&w, NULL);
	assert_false(fence_watch_check(&w, 99000)); /* nothing seen: no lease, never */
	see(&w, 10000, 3000, 10500);
	/* an older basis (a file of an earlier agent) does not move it back,
	 * and a heartbeat without a lease keeps the one seen */
	see(&w, 5000, 0, 5000);
	assert_int_equal(w.basis_ms, 10000);
	assert_int_equal(w.lease_ms, 3000);
	assert_int_equal(w.at_ms, 10500);
	assert_false(fence_watch_check(&w, 12000));
	/* a new lease (a master restarted with another --lease) counts */
	see(&w, 10000, 6000, 10600);
	assert_false(fence_watch_check(&w, 14000));
	assert_true(fence_watch_check(&w, 14001));
	fence_watch_release(&w);
}

static void test_cut_off_agent(void **state)
{
	struct fence_watch w;
	watch(&w, NULL);
	/* alive (it writes every 500 ms) but without answers since 10 s */
	see(&w, 10000, 3000, 11900);
	assert_true(fence_watch_check(&w, 12100));
	assert_string_equal(w.why, "stopped: its agent had no answer from the master for 2.10 s "
			    "of the node's 3.00 s lease (fenced by its shim)");
	fence_watch_release(&w);
}

static void test_never(void **state)
{
	struct fence_watch w;
	watch(&w, "keep");
	see(&w, 10000, 3000, 10500);
	assert_false(fence_watch_check(&w, 99000));
	fence_watch_release(&w);
	/* a shim.json without a heartbeat (an older agent) */
	fence_watch_init(&w, NULL, NULL);
	see(&w, 10000, 3000, 10500);
	assert_false(fence_watch_check(&w, 99000));
	fence_watch_release(&w);
}

static char *tmp_dir(void)
{
	char tmpl[] = "/tmp/yard-test-heartbeat-XXXXXX";
	assert_non_null(mkdtemp(tmpl));
	return xstrdup(tmpl);
}

static void test_file(void **state)
{
	char *dir = tmp_dir();
	char *path = heartbeat_path(dir);
	struct heartbeat hb = { .basis_ms = 10000, .lease_ms = 3000, .at_ms = 10500, .pid = 42 }, got;
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(heartbeat_read(path, &got, &eb), YERR(NOT_FOUND));
	assert_int_equal(heartbeat_write(path, &hb, &eb), 0);
	assert_int_equal(heartbeat_read(path, &got, &eb), 0);
	assert_int_equal(got.basis_ms, 10000);
	assert_int_equal(got.lease_ms, 3000);
	assert_int_equal(got.at_ms, 10500);
	assert_int_equal(got.pid, 42);
	assert_int_equal(write_file_replace(path, "{\"basis_ms\": -1}", 16, 0644), 0);
	assert_int_equal(heartbeat_read(path, &got, &eb), YERR(IO));
	assert_int_equal(got.basis_ms, 0);
	assert_int_equal(write_file_replace(path, "{", 1, 0644), 0);
	assert_int_equal(heartbeat_read(path, &got, &eb), YERR(IO));
	rm_rf(dir);
	free(path);
	free(dir);
}

/* The shim's loop step on a real file: it starts the stop, or cuts short
 * one under way; the exit record says why. */
static void test_step_and_exit(void **state)
{
	char *dir = tmp_dir();
	char *path = heartbeat_path(dir);
	json_t *conf = json_pack("{s:s}", "heartbeat", path);
	uint64_t now = boot_ms();
	struct heartbeat hb = { .basis_ms = now - 2500, .lease_ms = 3000, .at_ms = now - 2000 };
	struct fence_watch w;
	struct task_exit e = { .has_code = true, .exit_code = 0, .reason = "exited with status 0" };
	bool stopping = false;
	uint64_t deadline = 0;

	fence_watch_init(&w, conf, NULL);
	assert_false(fence_watch_step(&w, &stopping, &deadline)); /* no file yet */
	assert_false(stopping);
	assert_int_equal(heartbeat_write(path, &hb, NULL), 0);
	assert_true(fence_watch_step(&w, &stopping, &deadline));
	assert_true(stopping);
	assert_true(deadline >= mono_ms() + 400 && deadline <= mono_ms() + 500);
	assert_false(fence_watch_step(&w, &stopping, &deadline)); /* once */
	fence_watch_mark_exit(&w, &e);
	assert_false(e.has_code);
	assert_int_equal(e.signal, 0);
	assert_true(!strncmp(e.reason, "stopped: its agent was gone for ", 32));
	assert_non_null(strstr(e.reason, "(fenced by its shim; no answer from the master for "));
	assert_non_null(strstr(e.reason, " lease): exited with status 0"));
	fence_watch_release(&w);

	/* a stop under way (a preemption's long grace) is cut to the fence's,
	 * and its exit record is the stop's own */
	fence_watch_init(&w, conf, NULL);
	stopping = true;
	deadline = mono_ms() + 60000;
	assert_false(fence_watch_step(&w, &stopping, &deadline));
	assert_true(deadline <= mono_ms() + 500);
	memset(&e, 0, sizeof(e));
	e.signal = 15;
	snprintf(e.reason, sizeof(e.reason), "killed by signal 15 (Terminated)");
	fence_watch_mark_exit(&w, &e);
	assert_int_equal(e.signal, 15);
	assert_string_equal(e.reason, "killed by signal 15 (Terminated)");
	fence_watch_release(&w);
	json_decref(conf);
	rm_rf(dir);
	free(path);
	free(dir);
}

struct view {
	uint64_t basis, lease;
	int calls;
};

static void view(void *arg, struct heartbeat *out)
{
	struct view *v = arg;
	__atomic_add_fetch(&v->calls, 1, __ATOMIC_SEQ_CST);
	out->basis_ms = v->basis;
	out->lease_ms = v->lease;
}

static void test_writer(void **state)
{
	char *dir = tmp_dir();
	char *path = heartbeat_path(dir);
	struct heartbeat_writer w;
	struct heartbeat got;
	struct view v = { .basis = 0, .lease = 0 };

	/* no basis yet (never heard from a master): no file */
	heartbeat_writer_start(&w, dir, view, &v);
	heartbeat_writer_beat(&w);
	assert_false(path_exists(path));
	heartbeat_writer_stop(&w);
	/* written when the agent says (once registered), and by the thread
	 * again and again (every 50 ms for a 300 ms lease) */
	v.basis = boot_ms();
	v.lease = 300;
	v.calls = 0;
	heartbeat_writer_start(&w, dir, view, &v);
	heartbeat_writer_beat(&w);
	assert_int_equal(heartbeat_read(path, &got, NULL), 0);
	assert_int_equal(got.basis_ms, v.basis);
	assert_int_equal(got.lease_ms, 300);
	assert_int_equal(got.pid, (int64_t)getpid());
	uint64_t t0 = mono_ms();
	while (__atomic_load_n(&v.calls, __ATOMIC_SEQ_CST) < 4 && mono_ms() - t0 < 5000)
		usleep(10000);
	assert_true(__atomic_load_n(&v.calls, __ATOMIC_SEQ_CST) >= 4);
	heartbeat_writer_stop(&w);
	assert_true(path_exists(path)); /* the shims count from what it says */
	heartbeat_writer_stop(&w);      /* twice: a no-op */
	heartbeat_writer_beat(&w);      /* stopped: a no-op */
	rm_rf(dir);
	free(path);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rule),
		cmocka_unit_test(test_spares),
		cmocka_unit_test(test_dead_agent),
		cmocka_unit_test(test_back_in_time),
		cmocka_unit_test(test_out_of_order),
		cmocka_unit_test(test_cut_off_agent),
		cmocka_unit_test(test_never),
		cmocka_unit_test(test_file),
		cmocka_unit_test(test_step_and_exit),
		cmocka_unit_test(test_writer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
