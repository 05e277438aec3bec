/* --run-as (agent/runas.h): what the flag accepts and refuses (root in any
 * form, bad ranges, unknown users, each with a message naming the flag and
 * the value), and how a range hands out uids: one per job, shared by the
 * job's tasks, never two jobs on one uid, given back with the last task and
 * reused, exhausted with a clear error; held again after a restart. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <pwd.h>

#include "agent/runas.h"
#include "base/fsutil.h"
#include "base/xalloc.h"

static void expect_refused(const char *text, const char *why)
{
	struct runas ra;
	struct errbuf eb = ERRBUF_INIT;
	char want[300];

	assert_int_equal(runas_parse("--run-as", text, &ra, &eb), YERR(BAD_REQUEST));
	snprintf(want, sizeof(want), "--run-as '%s': %s", text, why);
	assert_string_equal(eb.msg, want);
	assert_false(ra.on);
}

static void test_parse_refusals(void **state)
{
	expect_refused("root", "the user is root (uid 0): tasks must not run as root");
	expect_refused("0", "uid 0 is root: tasks must not run as root");
	expect_refused("0-10", "the range holds uid 0 (root): tasks must not run as root");
	expect_refused("200-100", "the range ends before it starts");
	expect_refused("100-", "expected FIRST-LAST, two uids");
	expect_refused("100-2x", "expected FIRST-LAST, two uids");
	expect_refused("1000-70000", "the range holds more than 65536 uids");
	expect_refused("4294967290-4294967295", "the range goes past the largest uid");
	expect_refused("", "expected USER, UID or FIRST-LAST");
	expect_refused("no-such-user-yard-test", "no such user");
}

static void test_parse_users(void **state)
{
	struct runas ra;
	struct errbuf eb = ERRBUF_INIT;
	struct passwd *pw = getpwnam("nobody");
	uid_t uid;
	gid_t gid;

	/* a uid without a passwd entry: gid = uid */
	assert_int_equal(runas_parse("--run-as", "61777", &ra, &eb), 0);
	assert_true(ra.on);
	assert_false(ra.range);
	assert_int_equal(runas_acquire(&ra, 1, &uid, &gid, &eb), 0);
	assert_int_equal(uid, 61777);
	assert_int_equal(gid, getpwuid(61777) ? getpwuid(61777)->pw_gid : 61777);
	/* every job gets the same user */
	assert_int_equal(runas_acquire(&ra, 2, &uid, &gid, &eb), 0);
	assert_int_equal(uid, 61777);
	runas_release(&ra);
	if (pw) {
		assert_int_equal(runas_parse("--run-as", "nobody", &ra, &eb), 0);
		assert_int_equal(runas_acquire(&ra, 1, &uid, &gid, &eb), 0);
		assert_int_equal(uid, pw->pw_uid);
		assert_int_equal(gid, pw->pw_gid);
		runas_release(&ra);
	}
}

static void test_range(void **state)
{
	struct runas ra;
	struct errbuf eb = ERRBUF_INIT;
	uid_t u1, u1b, u2, u3, u4;
	gid_t g;

	assert_int_equal(runas_parse("--run-as", "61000-61002", &ra, &eb), 0);
	assert_true(ra.range);
	/* job 1's two tasks share a uid; job 2 and 3 get others */
	assert_int_equal(runas_acquire(&ra, 1, &u1, &g, &eb), 0);
	assert_int_equal(g, u1);
	assert_int_equal(runas_acquire(&ra, 1, &u1b, &g, &eb), 0);
	assert_int_equal(u1b, u1);
	assert_int_equal(runas_acquire(&ra, 2, &u2, &g, &eb), 0);
	assert_int_equal(runas_acquire(&ra, 3, &u3, &g, &eb), 0);
	assert_int_not_equal(u1, u2);
	assert_int_not_equal(u1, u3);
	assert_int_not_equal(u2, u3);
	assert_in_range(u1, 61000, 61002);
	assert_in_range(u2, 61000, 61002);
	assert_in_range(u3, 61000, 61002);
	/* full: a fourth job is refused, naming the range */
	assert_int_equal(runas_acquire(&ra, 4, &u4, &g, &eb), YERR(UNAVAILABLE));
	assert_string_equal(eb.msg, "every uid of --run-as 61000-61002 is held by a running job");
	/* job 1's first task ends: its uid stays job 1's */
	assert_false(runas_put(&ra, u1));
	assert_int_equal(runas_acquire(&ra, 4, &u4, &g, &eb), YERR(UNAVAILABLE));
	/* the last one ends: the uid is free and goes to job 4 */
	assert_true(runas_put(&ra, u1));
	assert_false(runas_put(&ra, u1)); /* not held: no underflow */
	assert_int_equal(runas_acquire(&ra, 4, &u4, &g, &eb), 0);
	assert_int_equal(u4, u1);
	/* after a restart, a task found running holds its uid again; a uid
	 * another job holds, or one outside the range, is not given */
	assert_true(runas_put(&ra, u2));
	assert_true(runas_hold(&ra, 2, u2));
	assert_false(runas_hold(&ra, 5, u2));
	assert_false(runas_hold(&ra, 5, 60999));
	assert_false(runas_hold(&ra, 5, 61003));
	assert_int_equal(runas_acquire(&ra, 2, &u1b, &g, &eb), 0);
	assert_int_equal(u1b, u2);
	runas_release(&ra);
}

static void expect_owner(const char *path, uid_t uid, const char *what)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	if (st.st_uid != uid) {
		fprintf(stderr, "%s ('%s'): owner %u, expected %u\n", what, path, (unsigned)st.st_uid,
			(unsigned)uid);
		fail();
	}
}

/* chown_tree (base/fsutil.h), what --run-as gives a task its dirs with:
 * the whole tree, a link itself and never what it points to, and never a
 * file with a second hard link (it could be someone else's). */
static void test_chown_tree(void **state)
{
	char root[] = "/tmp/yard-chown-XXXXXX";
	char *tree, *outside, *linked, *p;

	assert_non_null(mkdtemp(root));
	tree = xasprintf("%s/tree", root);
	outside = xasprintf("%s/outside", root);
	linked = xasprintf("%s/linked", root);
	assert_int_equal(mkdir_p(tree, 0755), 0);
	p = xasprintf("%s/sub/deeper", tree);
	assert_int_equal(mkdir_p(p, 0755), 0);
	free(p);
	assert_int_equal(write_file_replace(outside, "x", 1, 0600), 0);
	assert_int_equal(write_file_replace(linked, "y", 1, 0600), 0);
	p = xasprintf("%s/sub/deeper/f", tree);
	assert_int_equal(write_file_replace(p, "f", 1, 0644), 0);
	free(p);
	p = xasprintf("%s/sub/link", tree);
	assert_int_equal(symlink(outside, p), 0);
	free(p);
	p = xasprintf("%s/hard", tree);
	assert_int_equal(link(linked, p), 0);
	free(p);

	if (geteuid() != 0) {
		assert_int_equal(chown_tree(tree, 61234, 61234), -1);
		assert_int_equal(errno, EPERM);
		goto out;
	}
	assert_int_equal(chown_tree(tree, 61234, 61235), 0);
	expect_owner(tree, 61234, "the top");
	p = xasprintf("%s/sub/deeper/f", tree);
	expect_owner(p, 61234, "a file two dirs down");
	free(p);
	p = xasprintf("%s/sub/link", tree);
	expect_owner(p, 61234, "a symbolic link itself");
	free(p);
	expect_owner(outside, 0, "what the link points to");
	expect_owner(linked, 0, "a file hard-linked into the tree");
	/* a link as the top is refused, not followed */
	p = xasprintf("%s/sub/link", tree);
	assert_int_equal(chown_tree(p, 61234, 61234), -1);
	free(p);
	expect_owner(outside, 0, "what a top that is a link points to");
out:
	rm_rf(root);
	free(tree);
	free(outside);
	free(linked);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_refusals),
		cmocka_unit_test(test_parse_users),
		cmocka_unit_test(test_range),
		cmocka_unit_test(test_chown_tree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
