#include "base/compat.h"

#include <archive.h>
#include <dirent.h>
#include <archive_entry.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/codecache.h"
#include "common/codepack.h"

/* A fresh temporary directory per test, removed afterwards. */
static int setup(void **state)
{
	char tmpl[] = "/tmp/yard-codepack-XXXXXX";
	char *dir = mkdtemp(tmpl);
	assert_non_null(dir);
	*state = xstrdup(dir);
	return 0;
}

static int teardown(void **state)
{
	rm_rf(*state);
	free(*state);
	return 0;
}

static void put(const char *root, const char *rel, const char *content, unsigned mode)
{
	char *path = xasprintf("%s/%s", root, rel);
	char *slash = strrchr(path, '/');
	*slash = '\0';
	assert_int_equal(mkdir_p(path, 0755), 0);
	*slash = '/';
	assert_int_equal(write_file_atomic(path, content, strlen(content), mode), 0);
	assert_int_equal(chmod(path, mode), 0);
	free(path);
}

static char *slurp(const char *root, const char *rel)
{
	char *path = xasprintf("%s/%s", root, rel);
	struct strbuf sb = STRBUF_INIT;
	int rc = strbuf_read_file(&sb, path, 0);
	free(path);
	if (rc < 0) {
		strbuf_release(&sb);
		return NULL;
	}
	return strbuf_detach(&sb, NULL);
}

static bool exists(const char *root, const char *rel)
{
	char *path = xasprintf("%s/%s", root, rel);
	struct stat st;
	bool ok = lstat(path, &st) == 0;
	free(path);
	return ok;
}

static unsigned mode_of(const char *root, const char *rel)
{
	char *path = xasprintf("%s/%s", root, rel);
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	free(path);
	return st.st_mode & 07777;
}

static void save(const char *path, const struct strbuf *sb)
{
	assert_int_equal(write_file_atomic(path, sb->buf, sb->len, 0644), 0);
}

static void test_round_trip(void **state)
{
	const char *tmp = *state;
	char *src = xasprintf("%s/src", tmp), *dst = xasprintf("%s/dst", tmp);
	char *tgz = xasprintf("%s/code.tar.gz", tmp);
	struct strbuf out = STRBUF_INIT;
	struct errbuf eb = ERRBUF_INIT;
	char *link;
	char buf[64];
	ssize_t n;

	put(src, "train.py", "print('hi')\n", 0644);
	put(src, "run.sh", "#!/bin/sh\necho run\n", 0755);
	put(src, "lib/deep/util.py", "X = 1\n", 0600);
	link = xasprintf("%s/lib/link.py", src);
	assert_int_equal(symlink("deep/util.py", link), 0);
	free(link);
	link = xasprintf("%s/empty", src);
	assert_int_equal(mkdir(link, 0750), 0);
	free(link);

	assert_int_equal(codepack_create(src, &out, 0, &eb), 0);
	assert_true(out.len > 0);
	save(tgz, &out);
	assert_int_equal(codepack_extract(tgz, dst, &eb), 0);

	char *s = slurp(dst, "train.py");
	assert_string_equal(s, "print('hi')\n");
	free(s);
	s = slurp(dst, "lib/deep/util.py");
	assert_string_equal(s, "X = 1\n");
	free(s);
	s = slurp(dst, "lib/link.py");
	assert_string_equal(s, "X = 1\n");
	free(s);
	assert_int_equal(mode_of(dst, "run.sh"), 0755);
	assert_int_equal(mode_of(dst, "train.py"), 0644);
	assert_int_equal(mode_of(dst, "lib/deep/util.py"), 0600);
	assert_int_equal(mode_of(dst, "empty"), 0750);
	link = xasprintf("%s/lib/link.py", dst);
	n = readlink(link, buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, "deep/util.py");
	free(link);

	strbuf_release(&out);
	free(src);
	free(dst);
	free(tgz);
}

static void test_deterministic(void **state)
{
	const char *tmp = *state;
	char *src = xasprintf("%s/src", tmp);
	struct strbuf a = STRBUF_INIT, b = STRBUF_INIT;
	struct errbuf eb = ERRBUF_INIT;
	char ha[SHA256_HEX_LEN + 1], hb[SHA256_HEX_LEN + 1];
	char *path;

	put(src, "b.txt", "bee\n", 0644);
	put(src, "a.txt", "ay\n", 0644);
	put(src, "z/y/x.txt", "deep\n", 0644);
	assert_int_equal(codepack_create(src, &a, 0, &eb), 0);
	/* a newer mtime must not change the archive */
	path = xasprintf("%s/a.txt", src);
	struct timespec ts[2] = { { 12345, 0 }, { 12345, 0 } };
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
	free(path);
	assert_int_equal(codepack_create(src, &b, 0, &eb), 0);
	sha256_hex(a.buf, a.len, ha);
	sha256_hex(b.buf, b.len, hb);
	assert_string_equal(ha, hb);

	/* and different content gives a different digest */
	put(src, "a.txt", "changed\n", 0644);
	strbuf_reset(&b);
	assert_int_equal(codepack_create(src, &b, 0, &eb), 0);
	sha256_hex(b.buf, b.len, hb);
	assert_string_not_equal(ha, hb);

	strbuf_release(&a);
	strbuf_release(&b);
	free(src);
}

static void test_yardignore(void **state)
{
	const char *tmp = *state;
	char *src = xasprintf("%s/src", tmp), *dst = xasprintf("%s/dst", tmp);
	char *tgz = xasprintf("%s/code.tar.gz", tmp);
	struct strbuf out = STRBUF_INIT;
	struct errbuf eb = ERRBUF_INIT;

	put(src, ".yardignore",
	    "# build products\n"
	    "\n"
	    "*.pyc\n"
	    "checkpoints/\n"
	    "/top.log\n"
	    "secret.txt   \n"
	    "docs/tmp\n",
	    0644);
	put(src, "train.py", "x\n", 0644);
	put(src, "a.pyc", "x\n", 0644);
	put(src, "pkg/b.pyc", "x\n", 0644);
	put(src, "pkg/keep.py", "x\n", 0644);
	put(src, "checkpoints/1.pt", "x\n", 0644);
	put(src, "pkg/checkpoints/2.pt", "x\n", 0644);
	put(src, "checkpoints.txt", "x\n", 0644); /* not a directory: kept */
	put(src, "top.log", "x\n", 0644);
	put(src, "pkg/top.log", "x\n", 0644);      /* anchored: only the top one goes */
	put(src, "pkg/secret.txt", "x\n", 0644);
	put(src, "docs/tmp/t.md", "x\n", 0644);
	put(src, "docs/readme.md", "x\n", 0644);
	put(src, ".git/config", "x\n", 0644);
	put(src, "sub/.git/HEAD", "x\n", 0644);

	assert_int_equal(codepack_create(src, &out, 0, &eb), 0);
	save(tgz, &out);
	assert_int_equal(codepack_extract(tgz, dst, &eb), 0);

	assert_true(exists(dst, "train.py"));
	assert_true(exists(dst, ".yardignore"));
	assert_true(exists(dst, "pkg/keep.py"));
	assert_true(exists(dst, "checkpoints.txt"));
	assert_true(exists(dst, "pkg/top.log"));
	assert_true(exists(dst, "docs/readme.md"));
	assert_false(exists(dst, "a.pyc"));
	assert_false(exists(dst, "pkg/b.pyc"));
	assert_false(exists(dst, "checkpoints"));
	assert_false(exists(dst, "pkg/checkpoints"));
	assert_false(exists(dst, "top.log"));
	assert_false(exists(dst, "pkg/secret.txt"));
	assert_false(exists(dst, "docs/tmp"));
	assert_false(exists(dst, ".git"));
	assert_false(exists(dst, "sub/.git"));

	strbuf_release(&out);
	free(src);
	free(dst);
	free(tgz);
}

static void test_too_large(void **state)
{
	const char *tmp = *state;
	char *src = xasprintf("%s/src", tmp);
	struct strbuf out = STRBUF_INIT;
	struct errbuf eb = ERRBUF_INIT;

	put(src, "a.bin", "0123456789", 0644);
	put(src, "b.bin", "0123456789", 0644);
	assert_int_equal(codepack_create(src, &out, 15, &eb), YERR(TOO_LARGE));
	assert_int_equal(out.len, 0);
	assert_int_equal(codepack_create(src, &out, 20, &eb), 0);
	strbuf_release(&out);
	free(src);
}

struct hostile_entry {
	const char *name;
	mode_t type;
	const char *target; /* symlink target or hardlink name */
};

/* write_hostile builds a tar.gz with libarchive from the given entries. */
static void write_hostile(const char *path, const struct hostile_entry *ents, size_t n)
{
	struct archive *a = archive_write_new();
	assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
	assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, ents[i].name);
		archive_entry_set_perm(e, 0644);
		if (ents[i].type == AE_IFLNK) {
			archive_entry_set_filetype(e, AE_IFLNK);
			archive_entry_set_symlink(e, ents[i].target);
		} else if (ents[i].target) {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_hardlink(e, ents[i].target);
		} else {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_size(e, 4);
		}
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
		if (ents[i].type == AE_IFREG && !ents[i].target)
			assert_int_equal(archive_write_data(a, "evil", 4), 4);
		archive_entry_free(e);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
}

static void expect_refused(const char *tmp, const struct hostile_entry *ents, size_t n,
			   const char *bad_name)
{
	char *tgz = xasprintf("%s/hostile.tar.gz", tmp);
	char *dst = xasprintf("%s/box/dst", tmp);
	struct errbuf eb = ERRBUF_INIT;

	write_hostile(tgz, ents, n);
	assert_int_equal(codepack_extract(tgz, dst, &eb), YERR(BAD_REQUEST));
	if (!strstr(eb.msg, bad_name))
		fail_msg("message '%s' does not name '%s'", eb.msg, bad_name);
	/* nothing landed next to dest */
	assert_false(exists(tmp, "box/evil"));
	assert_false(exists(tmp, "evil"));
	assert_false(exists(tmp, "box/dst/ok.txt"));
	rm_rf(dst);
	free(tgz);
	free(dst);
}

static void test_traversal_refused(void **state)
{
	const char *tmp = *state;
	const struct hostile_entry dotdot[] = {
		{ "ok.txt", AE_IFREG, NULL }, { "../evil", AE_IFREG, NULL } };
	const struct hostile_entry deep_dotdot[] = {
		{ "ok.txt", AE_IFREG, NULL }, { "a/../../evil", AE_IFREG, NULL } };
	const struct hostile_entry absolute[] = {
		{ "ok.txt", AE_IFREG, NULL }, { "/tmp/yard-evil-abs", AE_IFREG, NULL } };
	const struct hostile_entry link_out[] = {
		{ "ok.txt", AE_IFREG, NULL }, { "out", AE_IFLNK, "../.." } };
	const struct hostile_entry link_abs[] = {
		{ "ok.txt", AE_IFREG, NULL }, { "etc", AE_IFLNK, "/etc" } };
	/* each link looks harmless alone; together "b/.." is dest's parent */
	const struct hostile_entry link_chain[] = {
		{ "ok.txt", AE_IFREG, NULL }, { "a", AE_IFLNK, "b/.." }, { "b", AE_IFLNK, "." } };
	const struct hostile_entry hardlink_out[] = {
		{ "ok.txt", AE_IFREG, NULL }, { "h", AE_IFREG, "../../etc/passwd" } };

	expect_refused(tmp, dotdot, ARRAY_SIZE(dotdot), "../evil");
	expect_refused(tmp, deep_dotdot, ARRAY_SIZE(deep_dotdot), "a/../../evil");
	expect_refused(tmp, absolute, ARRAY_SIZE(absolute), "/tmp/yard-evil-abs");
	assert_int_equal(access("/tmp/yard-evil-abs", F_OK), -1);
	expect_refused(tmp, link_out, ARRAY_SIZE(link_out), "out");
	expect_refused(tmp, link_abs, ARRAY_SIZE(link_abs), "etc");
	expect_refused(tmp, link_chain, ARRAY_SIZE(link_chain), "'a'");
	expect_refused(tmp, hardlink_out, ARRAY_SIZE(hardlink_out), "'h'");
}

static void test_inside_links_allowed(void **state)
{
	const char *tmp = *state;
	char *tgz = xasprintf("%s/ok.tar.gz", tmp);
	char *dst = xasprintf("%s/dst", tmp);
	struct errbuf eb = ERRBUF_INIT;
	const struct hostile_entry ents[] = {
		{ "data/x.txt", AE_IFREG, NULL },
		{ "src/up", AE_IFLNK, "../data/x.txt" },
		{ "here", AE_IFLNK, "." },
		{ "hard", AE_IFREG, "data/x.txt" } };

	write_hostile(tgz, ents, ARRAY_SIZE(ents));
	if (codepack_extract(tgz, dst, &eb))
		fail_msg("extract: %s", eb.msg);
	char *s = slurp(dst, "src/up");
	assert_string_equal(s, "evil");
	free(s);
	s = slurp(dst, "hard");
	assert_string_equal(s, "evil");
	free(s);
	free(tgz);
	free(dst);
}

static void print_of(const char *dir, char out[SHA256_HEX_LEN + 1], bool *settled)
{
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(codepack_fingerprint(dir, out, settled, &eb), 0);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* The fingerprint follows what would be packed, without reading it: the
 * same for the same tree, another for any change to a file that is packed
 * (even one of the same size), not for one .yardignore leaves out; fresh
 * changes leave it unsettled. */
static void test_fingerprint(void **state)
{
	const char *dir = *state;
	char a[SHA256_HEX_LEN + 1], b[SHA256_HEX_LEN + 1];
	bool settled;
	struct errbuf eb = ERRBUF_INIT;

	put(dir, "train.py", "print(1)\n", 0644);
	put(dir, "lib/util.py", "x = 1\n", 0644);
	put(dir, ".yardignore", "out/\n", 0644);
	put(dir, "out/model.bin", "weights", 0644);
	print_of(dir, a, &settled);
	assert_false(settled); /* just written */
	print_of(dir, b, &settled);
	assert_string_equal(a, b);

	sleep_ms(20); /* past the kernel's timestamp tick */
	put(dir, "out/model.bin", "WEIGHTS and more", 0644);
	print_of(dir, b, &settled);
	assert_string_equal(a, b); /* ignored: not code */

	put(dir, "lib/util.py", "x = 2\n", 0644); /* the same size */
	print_of(dir, b, &settled);
	assert_string_not_equal(a, b);
	memcpy(a, b, sizeof(a));
	put(dir, "lib/new.py", "", 0644);
	print_of(dir, b, &settled);
	assert_string_not_equal(a, b);

	sleep_ms(1100); /* nothing changed for longer than CODEPACK_SETTLE_NS */
	print_of(dir, a, &settled);
	assert_true(settled);
	assert_string_equal(a, b);

	char *missing = xasprintf("%s/nope", dir);
	assert_int_equal(codepack_fingerprint(missing, a, &settled, &eb), YERR(IO));
	assert_non_null(strstr(eb.msg, "nope"));
	free(missing);
}

/* The code cache: a digest comes back for the same master, directory and
 * fingerprint only; forgotten, or unreadable, it is a miss. */
static void test_code_cache(void **state)
{
	const char *dir = *state;
	const char *digest = "sha256:4be9a6f59910d9223ccdda5e92693b39bf7ba2f037ed7bd43a94caf43a539a88";
	char *cache = xasprintf("%s/cache", dir), *got;

	setenv("XDG_CACHE_HOME", cache, 1);
	assert_null(codecache_lookup("http://m:1", "/src/a", "f1"));
	codecache_store("http://m:1", "/src/a", "f1", digest);
	got = codecache_lookup("http://m:1", "/src/a", "f1");
	assert_non_null(got);
	assert_string_equal(got, digest);
	free(got);
	assert_null(codecache_lookup("http://m:1", "/src/a", "f2"));
	assert_null(codecache_lookup("http://m:2", "/src/a", "f1"));
	assert_null(codecache_lookup("http://m:1", "/src/b", "f1"));
	codecache_forget("http://m:1", "/src/a");
	assert_null(codecache_lookup("http://m:1", "/src/a", "f1"));

	/* a damaged entry is a miss, and storing again mends it */
	codecache_store("http://m:1", "/src/a", "f1", digest);
	char *code_dir = xasprintf("%s/yard/code", cache);
	DIR *d = opendir(code_dir);
	struct dirent *de;
	char *entry = NULL;
	assert_non_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			entry = xasprintf("%s/yard/code/%s", cache, de->d_name);
	closedir(d);
	free(code_dir);
	assert_non_null(entry);
	assert_int_equal(write_file_atomic(entry, "f1 sha256:123\n", 14, 0600), 0);
	assert_null(codecache_lookup("http://m:1", "/src/a", "f1"));
	codecache_store("http://m:1", "/src/a", "f1", digest);
	got = codecache_lookup("http://m:1", "/src/a", "f1");
	assert_non_null(got);
	free(got);
	free(entry);
	unsetenv("XDG_CACHE_HOME");
	free(cache);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deterministic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_yardignore, setup, teardown),
		cmocka_unit_test_setup_teardown(test_too_large, setup, teardown),
		cmocka_unit_test_setup_teardown(test_traversal_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inside_links_allowed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fingerprint, setup, teardown),
		cmocka_unit_test_setup_teardown(test_code_cache, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
