/*
 * cgroup device control, v1 and v2 (BPF), on this machine's hierarchies: a
 * forked child joins a task group that allows /dev/null and the dummy GPU
 * node nvidia0 only, and reports the errno of each open.
 */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "agent/cgroup.h"
#include "base/fsutil.h"
#include "base/xalloc.h"

struct fixture {
	struct cgroup cg;
	char tmp[64];
	int have_cg;
};

static const char *const probe_paths[] = { "/dev/null", "/dev/zero", "nvidia0", "nvidia1" };

/* Runs a child in the group; OUT errs[i]: 0 when probe i opened, else errno. */
static void probe(struct fixture *f, int errs[4])
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int out[4];
		for (size_t i = 0; f->cg.procs[i]; i++) {
			int fd = open(f->cg.procs[i], O_WRONLY);
			if (fd < 0 || write(fd, "0", 1) != 1)
				_exit(3);
			close(fd);
		}
		for (int i = 0; i < 4; i++) {
			char path[128];
			if (probe_paths[i][0] == '/')
				snprintf(path, sizeof(path), "%s", probe_paths[i]);
			else
				snprintf(path, sizeof(path), "%s/%s", f->tmp, probe_paths[i]);
			int fd = open(path, O_RDONLY);
			out[i] = fd >= 0 ? 0 : errno;
			if (fd >= 0)
				close(fd);
		}
		if (write(fds[1], out, sizeof(out)) != sizeof(out))
			_exit(4);
		_exit(0);
	}
	close(fds[1]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(read(fds[0], errs, 4 * sizeof(int)), (ssize_t)(4 * sizeof(int)));
	close(fds[0]);
}

static int setup_common(void **state, const struct cgroup_ops *ops, const char *root)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	snprintf(f->tmp, sizeof(f->tmp), "/tmp/yard-cgtest-XXXXXX");
	if (!mkdtemp(f->tmp))
		return -1;
	char *p0 = xasprintf("%s/nvidia0", f->tmp), *p1 = xasprintf("%s/nvidia1", f->tmp);
	int ret = mknod(p0, S_IFCHR | 0666, makedev(195, 0)) | mknod(p1, S_IFCHR | 0666, makedev(195, 1));
	free(p0);
	free(p1);
	char *rel = xasprintf("yard-test/%d/task-1", (int)getpid());
	cgroup_init(&f->cg, ops, root, rel);
	free(rel);
	*state = f;
	return ret;
}

static int setup_v1(void **state)
{
	return setup_common(state, &cgroup_v1_ops, "/sys/fs/cgroup");
}

static int setup_v2(void **state)
{
	return setup_common(state, &cgroup_v2_ops, "/sys/fs/cgroup/unified");
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	cgroup_kill_all(&f->cg, 2000, NULL);
	cgroup_destroy(&f->cg, NULL);
	/* the test's parents: yard-test/PID and yard-test (if now empty) */
	for (size_t i = 0; f->cg.dirs[i]; i++) {
		char *d = xstrdup(f->cg.dirs[i]);
		for (int up = 0; up < 2; up++) {
			char *slash = strrchr(d, '/');
			*slash = '\0';
			rmdir(d);
		}
		free(d);
	}
	cgroup_release(&f->cg);
	rm_rf(f->tmp);
	free(f);
	return 0;
}

static void test_devices(void **state)
{
	struct fixture *f = *state;
	struct cgroup_dev devs[] = { { 1, 3 }, { 195, 0 } };
	struct cgroup_limits lim = { .devices = 1, .devs = devs, .ndevs = ARRAY_SIZE(devs) };
	struct errbuf eb = ERRBUF_INIT;
	int errs[4];

	int ret = cgroup_create(&f->cg, &lim, &eb);
	if (ret)
		print_error("%s\n", eb.msg);
	assert_int_equal(ret, 0);
	probe(f, errs);
	assert_int_equal(errs[0], 0);      /* /dev/null allowed */
	assert_int_equal(errs[1], EPERM);  /* /dev/zero denied */
	assert_int_equal(errs[2], ENXIO);  /* own GPU: allowed, no driver behind the dummy */
	assert_int_equal(errs[3], EPERM);  /* another task's GPU */
	assert_int_equal(cgroup_signal_all(&f->cg, 0), 0);
	assert_int_equal(cgroup_destroy(&f->cg, &eb), 0);
	assert_false(path_exists(f->cg.dirs[0]));
}

static void test_no_device_limit(void **state)
{
	struct fixture *f = *state;
	struct cgroup_limits lim = { 0 };
	struct errbuf eb = ERRBUF_INIT;
	int errs[4];

	assert_int_equal(cgroup_create(&f->cg, &lim, &eb), 0);
	probe(f, errs);
	assert_int_equal(errs[0], 0);
	assert_int_equal(errs[1], 0);
	assert_int_equal(errs[2], ENXIO);
	assert_int_equal(errs[3], ENXIO);
}

static void test_kill_all(void **state)
{
	struct fixture *f = *state;
	struct cgroup_limits lim = { 0 };
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(cgroup_create(&f->cg, &lim, &eb), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (size_t i = 0; f->cg.procs[i]; i++) {
			int fd = open(f->cg.procs[i], O_WRONLY);
			if (fd < 0 || write(fd, "0", 1) != 1)
				_exit(3);
			close(fd);
		}
		/* escape the process group, as a daemonising task would */
		setsid();
		for (;;)
			pause();
	}
	/* wait until it is in the group */
	for (int i = 0; i < 1000 && cgroup_signal_all(&f->cg, 0) == 0; i++)
		usleep(1000);
	assert_true(cgroup_signal_all(&f->cg, 0) > 0);
	assert_int_equal(cgroup_kill_all(&f->cg, 2000, NULL), 0);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
	assert_int_equal(cgroup_destroy(&f->cg, &eb), 0);
}

static void test_detect(void **state)
{
	(void)state;
	assert_ptr_equal(cgroup_detect("/sys/fs/cgroup/unified"), &cgroup_v2_ops);
	assert_ptr_equal(cgroup_detect("/sys/fs/cgroup"), &cgroup_v1_ops);
	assert_null(cgroup_detect("/nonexistent"));
}

static void test_default_devs(void **state)
{
	(void)state;
	struct cgroup_dev d[16];
	size_t n = cgroup_default_devs(d, ARRAY_SIZE(d));
	assert_int_equal(n, 8);
	assert_int_equal(d[0].major, 1);
	assert_int_equal(d[0].minor, 3);
	assert_int_equal(d[7].minor, CGROUP_ANY);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_detect),
		cmocka_unit_test(test_default_devs),
		cmocka_unit_test_setup_teardown(test_devices, setup_v1, teardown),
		cmocka_unit_test_setup_teardown(test_devices, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_no_device_limit, setup_v1, teardown),
		cmocka_unit_test_setup_teardown(test_no_device_limit, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_kill_all, setup_v1, teardown),
		cmocka_unit_test_setup_teardown(test_kill_all, setup_v2, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
