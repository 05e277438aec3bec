/* Unit tests for src/common/dataset.h: names, digests, manifest validation. */
#include "base/compat.h"
#include "common/dataset.h"

#include <setjmp.h>
#include <cmocka.h>

#define D1 "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define D2 "sha256:1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_names(void **state)
{
	assert_true(dataset_name_valid("digits"));
	assert_true(dataset_name_valid("a.b-c_d9"));
	assert_false(dataset_name_valid(".."));
	assert_false(dataset_name_valid("."));
	assert_false(dataset_name_valid("a/b"));
	assert_false(dataset_name_valid("Digits"));
	assert_false(dataset_name_valid(""));
	assert_false(dataset_name_valid(NULL));
	assert_true(dataset_digest_valid(D1));
	assert_false(dataset_digest_valid("sha256:0123"));
	assert_false(dataset_digest_valid("sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"));
	(void)state;
}

static void test_paths(void **state)
{
	assert_true(dataset_path_valid("a/b.txt"));
	assert_true(dataset_path_valid("..a/b..")); /* only whole components count */
	assert_false(dataset_path_valid("../etc/passwd"));
	assert_false(dataset_path_valid("a/../../b"));
	assert_false(dataset_path_valid("a/.."));
	assert_false(dataset_path_valid("/etc/passwd"));
	assert_false(dataset_path_valid("a//b"));
	assert_false(dataset_path_valid("a/"));
	assert_false(dataset_path_valid("./a"));
	assert_false(dataset_path_valid("a\nb"));
	assert_false(dataset_path_valid(""));
	(void)state;
}

static void ok(const char *text, uint64_t want_size, unsigned want_files)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *m = json_loads(text, 0, NULL);
	uint64_t size = 99;
	unsigned files = 99;
	int ret;

	assert_non_null(m);
	ret = manifest_validate(m, &size, &files, &eb);
	if (ret)
		print_message("refused: %s\n", eb.msg);
	assert_int_equal(ret, 0);
	assert_int_equal(size, want_size);
	assert_int_equal(files, want_files);
	json_decref(m);
}

static void refused(const char *text, const char *field, const char *msg)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *m = json_loads(text, 0, NULL);

	assert_non_null(m);
	assert_int_equal(manifest_validate(m, NULL, NULL, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.field, field);
	assert_string_equal(eb.msg, msg);
	json_decref(m);
}

#define F(path, size, chunks) "{\"path\": \"" path "\", \"size\": " #size ", \"mode\": 420, \"chunks\": [" chunks "]}"

static void test_manifest(void **state)
{
	ok("{\"files\": []}", 0, 0);
	ok("{\"files\": [" F("a", 3, "\"" D1 "\"") ", " F("b/c", 0, "") "]}", 3, 2);
	refused("{\"files\": [" F("../x", 1, "\"" D1 "\"") "]}", "manifest.files[0].path",
		"manifest.files[0].path: expected a relative path without empty, '.' or '..' components, "
		"got \"../x\"");
	refused("{\"files\": [" F("a", 1, "\"" D1 "\"") ", " F("x/../../y", 1, "\"" D1 "\"") "]}",
		"manifest.files[1].path",
		"manifest.files[1].path: expected a relative path without empty, '.' or '..' components, "
		"got \"x/../../y\"");
	refused("{\"files\": [" F("/etc/passwd", 1, "\"" D1 "\"") "]}", "manifest.files[0].path",
		"manifest.files[0].path: expected a relative path without empty, '.' or '..' components, "
		"got \"/etc/passwd\"");
	refused("{\"files\": [" F("b", 1, "\"" D1 "\"") ", " F("a", 1, "\"" D1 "\"") "]}",
		"manifest.files[1].path",
		"manifest.files[1].path: \"a\" is out of order (paths are sorted by byte order)");
	refused("{\"files\": [" F("a", 1, "\"" D1 "\"") ", " F("a", 1, "\"" D1 "\"") "]}",
		"manifest.files[1].path", "manifest.files[1].path: \"a\" is listed twice");
	refused("{\"files\": [" F("a", 1, "\"" D1 "\"") ", " F("a.txt", 1, "\"" D1 "\"") ", "
		F("a/b", 1, "\"" D1 "\"") "]}",
		"manifest.files[2].path", "manifest.files[2].path: \"a/b\" is inside \"a\", which is a file");
	refused("{\"files\": [" F("a", 0, "\"" D1 "\"") "]}", "manifest.files[0].chunks",
		"manifest.files[0].chunks: 1 chunks cannot hold 0 bytes");
	refused("{\"files\": [" F("a", 8388609, "\"" D1 "\"") "]}", "manifest.files[0].chunks",
		"manifest.files[0].chunks: 1 chunks cannot hold 8388609 bytes");
	refused("{\"files\": [" F("a", 2, "\"" D1 "\", \"sha256:00\"") "]}", "manifest.files[0].chunks[1]",
		"manifest.files[0].chunks[1]: expected \"sha256:\" and 64 lowercase hex digits");
	refused("{\"files\": [{\"path\": \"a\", \"size\": 1, \"mode\": 4095, \"chunks\": [\"" D2 "\"]}]}",
		"manifest.files[0].mode", "manifest.files[0].mode: expected permission bits 0..0777 (0..511)");
	refused("{\"files\": [{\"path\": \"a\", \"size\": 1, \"mode\": 1, \"chunk\": []}]}",
		"manifest.files[0]", "manifest.files[0]: missing \"chunks\"");
	refused("{\"files\": [], \"x\": 1}", "manifest",
		"manifest: expected an object with only \"files\", an array");
	(void)state;
}

static void test_digest(void **state)
{
	json_t *a = json_loads("{\"files\": [" F("a", 3, "\"" D1 "\"") "]}", 0, NULL);
	json_t *b = json_loads("{\"files\": [{\"size\": 3, \"chunks\": [\"" D1 "\"], \"path\": \"a\", \"mode\": 420}]}", 0, NULL);
	char da[72], db[72];

	manifest_digest(a, da);
	manifest_digest(b, db);
	assert_true(dataset_digest_valid(da));
	assert_string_equal(da, db); /* key order does not matter */
	json_decref(a);
	json_decref(b);
	(void)state;
}

/* manifest_merge: each part under its dir, one sorted list ("worker-1/"
 * sorts before "worker-10/": '/' is below '0'); "" keeps the paths. */
static void test_merge(void **state)
{
	json_t *a = json_pack("{s:[{s:s, s:i, s:i, s:[s]}, {s:s, s:i, s:i, s:[]}]}", "files", "path", "z.bin",
			      "size", 3, "mode", 420, "chunks", D1, "path", "a/e", "size", 0, "mode", 384, "chunks");
	json_t *b = json_pack("{s:[{s:s, s:i, s:i, s:[s]}]}", "files", "path", "m.pt", "size", 5, "mode", 420,
			      "chunks", D2);
	json_t *parts[3] = { b, a, b };
	const char *dirs[3] = { "worker-10", "worker-1", "" };
	json_t *m = manifest_merge(dirs, parts, 3), *files = json_object_get(m, "files");
	const char *want[] = { "m.pt", "worker-1/a/e", "worker-1/z.bin", "worker-10/m.pt" };
	struct errbuf eb = ERRBUF_INIT;
	uint64_t size;
	unsigned n;

	assert_int_equal(json_array_size(files), 4);
	for (size_t i = 0; i < 4; i++)
		assert_string_equal(json_string_value(json_object_get(json_array_get(files, i), "path")), want[i]);
	/* the rest of each entry is kept as it was */
	assert_string_equal(json_string_value(json_array_get(json_object_get(json_array_get(files, 2), "chunks"), 0)),
			    D1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(files, 1), "mode")), 384);
	assert_int_equal(manifest_validate(m, &size, &n, &eb), 0);
	assert_int_equal(size, 13);
	assert_int_equal(n, 4);
	/* the parts are not changed */
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(a, "files"), 0), "path")),
			    "z.bin");
	json_decref(m);
	/* no parts: an empty manifest */
	m = manifest_merge(dirs, parts, 0);
	assert_int_equal(json_array_size(json_object_get(m, "files")), 0);
	json_decref(m);
	json_decref(a);
	json_decref(b);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_manifest),
		cmocka_unit_test(test_digest),
		cmocka_unit_test(test_merge),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
