/*
 * The checkpoint dir watcher (src/agent/ckptwatch.h) on a temp task dir and
 * checkpoint dir: what the agent restored before the start never counts; a
 * file written after it counts with its mtime, once settled; a temp name
 * counts once renamed; nested dirs count within the depth; a walk looks at
 * no more entries than its bound; links are not followed; a restore while
 * the task runs moves the floor; the time survives a new watcher (an agent
 * restart). Times the watcher compares with "now" are given explicitly, so
 * only the kernel's timestamps come from the clock.
 */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "agent/ckptwatch.h"
#include "base/clock.h"
#include "base/fsutil.h"
#include "base/xalloc.h"

struct fixture {
	char *root; /* owned: the temp dir, removed by teardown */
	char *task; /* ROOT/tasks/7 */
	char *ckpt; /* ROOT/checkpoints/3: the task's checkpoint dir */
};

static char *path_in(const char *dir, const char *name)
{
	return xasprintf("%s/%s", dir, name);
}

static void put(const char *dir, const char *name)
{
	char *p = path_in(dir, name);
	assert_int_equal(write_file_replace(p, "x", 1, 0644), 0);
	free(p);
}

static int64_t mtime_us(const char *dir, const char *name)
{
	char *p = path_in(dir, name);
	struct stat st;
	assert_int_equal(lstat(p, &st), 0);
	free(p);
	return (int64_t)st.st_mtim.tv_sec * 1000000 + st.st_mtim.tv_nsec / 1000;
}

/* File timestamps come from a coarse kernel clock: wait past a tick so
 * that what comes next is strictly later. */
static void tick(void)
{
	struct timespec ts = {0, 30 * 1000000L};
	nanosleep(&ts, NULL);
}

/* The shim's part: task.pid once the task runs. */
static void start_task(struct fixture *f)
{
	tick();
	put(f->task, "task.pid");
	tick();
}

static int setup(void **state)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	char tmpl[] = "/tmp/yard-ckptwatch-XXXXXX";
	char *conf;

	assert_non_null(mkdtemp(tmpl));
	f->root = xstrdup(tmpl);
	f->task = xasprintf("%s/tasks/7", f->root);
	f->ckpt = xasprintf("%s/checkpoints/3", f->root);
	assert_int_equal(mkdir_p(f->task, 0755), 0);
	assert_int_equal(mkdir_p(f->ckpt, 0755), 0);
	conf = xasprintf("{\"checkpoint_dir\": \"%s\"}", f->ckpt);
	char *p = path_in(f->task, "shim.json");
	assert_int_equal(write_file_replace(p, conf, strlen(conf), 0644), 0);
	free(p);
	free(conf);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	rm_rf(f->root);
	free(f->root);
	free(f->task);
	free(f->ckpt);
	free(f);
	return 0;
}

static int64_t later(int s)
{
	return (int64_t)wall_us() + (int64_t)s * 1000000;
}

static void test_restored_before_start_does_not_count(void **state)
{
	struct fixture *f = *state;
	struct ckpt_watch *w = ckpt_watch_new(f->task);

	put(f->ckpt, "restored.pt");
	assert_int_equal(mkdir_p(f->ckpt, 0755), 0);
	char *sub = path_in(f->ckpt, "step-100");
	assert_int_equal(mkdir_p(sub, 0755), 0);
	put(sub, "shard-0");
	/* a restored file whose mtime is ahead of the start (an archive from
	 * a node whose clock runs ahead): its ctime still tells */
	char *p = path_in(f->ckpt, "ahead.pt");
	struct timespec ts[2] = {{0, UTIME_OMIT}, {time(NULL) + 3600, 0}};
	put(f->ckpt, "ahead.pt");
	assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
	free(p);
	/* not started yet: nothing counts */
	assert_int_equal(ckpt_watch_poll(w, later(5)), 0);
	start_task(f);
	assert_int_equal(ckpt_watch_poll(w, later(10)), 0);
	assert_int_equal(ckpt_watch_poll(w, later(7200)), 0);
	free(sub);
	ckpt_watch_free(w);
}

static void test_written_after_start_counts_with_its_mtime(void **state)
{
	struct fixture *f = *state;
	struct ckpt_watch *w = ckpt_watch_new(f->task);
	int64_t m;

	put(f->ckpt, "old.pt");
	start_task(f);
	put(f->ckpt, "step-1.pt");
	m = mtime_us(f->ckpt, "step-1.pt");
	/* written half a second ago: maybe still being written */
	assert_int_equal(ckpt_watch_poll(w, m + 500000), 0);
	/* a poll within CKPT_WATCH_EVERY_US of the last does not walk */
	assert_int_equal(ckpt_watch_poll(w, m + 1200000), 0);
	assert_int_equal(ckpt_watch_poll(w, m + 1500000), m);
	/* a newer one moves it on; removing it never moves it back */
	tick();
	put(f->ckpt, "step-2.pt");
	int64_t m2 = mtime_us(f->ckpt, "step-2.pt");
	assert_true(m2 > m);
	assert_int_equal(ckpt_watch_poll(w, m2 + 3000000), m2);
	char *p = path_in(f->ckpt, "step-2.pt");
	assert_int_equal(unlink(p), 0);
	free(p);
	assert_int_equal(ckpt_watch_poll(w, m2 + 5000000), m2);
	ckpt_watch_free(w);
}

static void test_temp_name_counts_once_renamed(void **state)
{
	struct fixture *f = *state;
	struct ckpt_watch *w = ckpt_watch_new(f->task);
	char *tmp = path_in(f->ckpt, "model.pt.tmp"), *part = path_in(f->ckpt, "opt.part");
	char *done = path_in(f->ckpt, "model.pt");

	start_task(f);
	put(f->ckpt, "model.pt.tmp");
	put(f->ckpt, "opt.part");
	int64_t m = mtime_us(f->ckpt, "model.pt.tmp");
	/* however long it has been quiet, a temp name is not a checkpoint */
	assert_int_equal(ckpt_watch_poll(w, m + 2000000), 0);
	assert_int_equal(ckpt_watch_poll(w, m + 60000000), 0);
	assert_int_equal(rename(tmp, done), 0);
	/* renamed: it counts, with the time its bytes were written */
	assert_int_equal(ckpt_watch_poll(w, m + 62000000), m);
	free(tmp);
	free(part);
	free(done);
	ckpt_watch_free(w);
}

static void test_nested_and_bounded(void **state)
{
	struct fixture *f = *state;
	struct ckpt_walk walk = {.depth = CKPT_WATCH_DEPTH, .entries = CKPT_WATCH_ENTRIES};
	char *d1 = path_in(f->ckpt, "a"), *d2 = path_in(f->ckpt, "a/b"),
	     *d3 = path_in(f->ckpt, "a/b/c");
	int64_t floor_us = (int64_t)wall_us() - 1;

	tick();
	assert_int_equal(mkdir_p(d3, 0755), 0);
	put(d2, "at-2");
	int64_t m2 = mtime_us(d2, "at-2");
	tick();
	put(d3, "at-3");
	int64_t m3 = mtime_us(d3, "at-3");
	assert_true(m3 > m2);
	/* nested: the deepest file is the newest */
	assert_int_equal(ckpt_watch_scan(f->ckpt, floor_us, m3 + 2000000, &walk), m3);
	assert_int_equal(walk.seen, 5);
	/* no further down than the depth: a/b/c is at depth 3 */
	walk.depth = 2;
	assert_int_equal(ckpt_watch_scan(f->ckpt, floor_us, m3 + 2000000, &walk), m2);
	/* no more entries than the bound */
	for (int i = 0; i < 30; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%d", i);
		put(f->ckpt, name);
	}
	walk.depth = CKPT_WATCH_DEPTH;
	walk.entries = 10;
	assert_true(ckpt_watch_scan(f->ckpt, floor_us, m3 + 2000000, &walk) > floor_us);
	assert_int_equal(walk.seen, 10);
	walk.entries = CKPT_WATCH_ENTRIES;
	ckpt_watch_scan(f->ckpt, floor_us, m3 + 2000000, &walk);
	assert_int_equal(walk.seen, 35);
	/* a missing dir holds no checkpoint */
	assert_int_equal(ckpt_watch_scan("/nonexistent/yard-ckpt", 0, m3, &walk), 0);
	assert_int_equal(walk.seen, 0);
	free(d1);
	free(d2);
	free(d3);
}

static void test_links_are_not_followed(void **state)
{
	struct fixture *f = *state;
	struct ckpt_walk walk = {.depth = CKPT_WATCH_DEPTH, .entries = CKPT_WATCH_ENTRIES};
	char *outside = path_in(f->root, "outside");
	char *link_dir = path_in(f->ckpt, "dir-link"), *link_file = path_in(f->ckpt, "file-link");
	char *target = path_in(outside, "fresh");
	int64_t floor_us = (int64_t)wall_us() - 1;

	tick();
	assert_int_equal(mkdir_p(outside, 0755), 0);
	put(outside, "fresh");
	assert_int_equal(symlink(outside, link_dir), 0);
	assert_int_equal(symlink(target, link_file), 0);
	assert_int_equal(ckpt_watch_scan(f->ckpt, floor_us, (int64_t)wall_us() + 5000000, &walk),
	                 0);
	/* the checkpoint dir itself as a link is not followed either */
	assert_int_equal(ckpt_watch_scan(link_dir, floor_us, (int64_t)wall_us() + 5000000, &walk),
	                 0);
	free(outside);
	free(link_dir);
	free(link_file);
	free(target);
}

static void test_restore_while_running_moves_the_floor(void **state)
{
	struct fixture *f = *state;
	struct ckpt_watch *w = ckpt_watch_new(f->task), *fresh;
	char *digest = xasprintf("%s.digest", f->ckpt);

	start_task(f);
	put(f->ckpt, "mine.pt");
	int64_t m = mtime_us(f->ckpt, "mine.pt");
	assert_int_equal(ckpt_watch_poll(w, m + 2000000), m);
	/* another task of the job restores a checkpoint into the dir */
	tick();
	put(f->ckpt, "theirs.pt");
	assert_int_equal(write_file_replace(digest, "sha256:x", 8, 0644), 0);
	fresh = ckpt_watch_new(f->task);
	/* the time found is kept (ckptdir.json); the restored file is not new */
	assert_int_equal(ckpt_watch_poll(w, m + 10000000), m);
	assert_int_equal(ckpt_watch_poll(fresh, m + 10000000), m);
	/* written after the restore: counts */
	tick();
	put(f->ckpt, "next.pt");
	int64_t m2 = mtime_us(f->ckpt, "next.pt");
	assert_int_equal(ckpt_watch_poll(fresh, m2 + 20000000), m2);
	ckpt_watch_free(fresh);
	ckpt_watch_free(w);
	free(digest);
}

static void test_survives_a_restart(void **state)
{
	struct fixture *f = *state;
	struct ckpt_watch *w = ckpt_watch_new(f->task);

	start_task(f);
	put(f->ckpt, "a.pt");
	int64_t m = mtime_us(f->ckpt, "a.pt");
	assert_int_equal(ckpt_watch_poll(w, m + 2000000), m);
	ckpt_watch_free(w);
	/* the task removed its checkpoint while the agent was away */
	char *p = path_in(f->ckpt, "a.pt");
	assert_int_equal(unlink(p), 0);
	free(p);
	w = ckpt_watch_new(f->task);
	assert_int_equal(ckpt_watch_poll(w, m + 4000000), m);
	ckpt_watch_free(w);
	assert_int_equal(ckpt_watch_poll(NULL, m), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_restored_before_start_does_not_count, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_written_after_start_counts_with_its_mtime,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_temp_name_counts_once_renamed, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_nested_and_bounded, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_links_are_not_followed, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_restore_while_running_moves_the_floor, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_survives_a_restart, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
