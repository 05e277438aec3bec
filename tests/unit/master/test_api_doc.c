/* docs/api.md must list exactly the routes of the master's route table. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/strbuf.h"
#include "master/api.h"

static const char *doc_path;

static void test_doc_matches_table(void **state)
{
	struct strbuf doc = STRBUF_INIT, want = STRBUF_INIT, got = STRBUF_INIT;
	size_t n;
	const struct route *r = api_routes(&n);
	char *line, *save = NULL;

	assert_int_equal(strbuf_read_file(&doc, doc_path, 0), 0);
	for (size_t i = 0; i < n; i++)
		strbuf_addf(&want, "%s %s %s %s %s\n", r[i].method, r[i].pattern, perm_name(r[i].perm),
			    scope_name(r[i].scope), r[i].flags & ROUTE_AUDIT ? "yes" : "no");
	/* table rows: | METHOD | `PATH` | PERM | SCOPE | AUDITED | summary | */
	for (line = strtok_r(doc.buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char method[16], path[128], col[3][16];
		const char *p = line;
		if (strncmp(p, "| GET ", 6) && strncmp(p, "| POST ", 7) && strncmp(p, "| PUT ", 6) &&
		    strncmp(p, "| PATCH ", 8) && strncmp(p, "| DELETE ", 9))
			continue;
		p += 2;
		size_t k = strcspn(p, " ");
		snprintf(method, sizeof(method), "%.*s", (int)k, p);
		p = strchr(p, '`');
		assert_non_null(p);
		k = strcspn(p + 1, "`");
		snprintf(path, sizeof(path), "%.*s", (int)k, p + 1);
		p += 1 + k;
		for (int c = 0; c < 3; c++) {
			p = strchr(p, '|');
			assert_non_null(p);
			p++;
			while (*p == ' ')
				p++;
			k = strcspn(p, " |");
			snprintf(col[c], sizeof(col[c]), "%.*s", (int)k, p);
		}
		strbuf_addf(&got, "%s %s %s %s %s\n", method, path, col[0], col[1], col[2]);
	}
	assert_string_equal(got.buf, want.buf);
	strbuf_release(&doc);
	strbuf_release(&want);
	strbuf_release(&got);
	(void)state;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_doc_matches_table) };

	if (argc < 2) {
		fprintf(stderr, "usage: test_api_doc docs/api.md\n");
		return 2;
	}
	doc_path = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
