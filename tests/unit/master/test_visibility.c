/* Unit tests for the visibility rule (src/master/visibility.h) and the
 * code index it looks digests up in (src/master/codeindex.h). */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/xalloc.h"
#include "master/api.h"
#include "master/codeindex.h"
#include "master/visibility.h"

static const struct caller alice = { .role = ROLE_USER, .user = "alice", .team = "vision" };
static const struct caller carol = { .role = ROLE_USER, .user = "carol", .team = "vision" };
static const struct caller bob = { .role = ROLE_USER, .user = "bob", .team = "nlp" };
static const struct caller dan = { .role = ROLE_USER, .user = "dan" }; /* no team */
static const struct caller admin = { .role = ROLE_ADMIN, .user = "admin" };
static const struct caller agent = { .role = ROLE_AGENT, .user = "n1" };

static void test_jobs(void **state)
{
	struct master m = { 0 };
	struct job j = { .id = 7, .user = "alice", .team = "vision" };
	struct job solo = { .id = 8, .user = "dan" };
	struct caller jt7 = { .role = ROLE_JOB, .user = "alice", .job = 7 };
	struct caller jt8 = { .role = ROLE_JOB, .user = "dan", .job = 8 };

	assert_true(visibility_job(&m, &alice, &j));
	assert_true(visibility_job(&m, &carol, &j));
	assert_true(visibility_job(&m, &admin, &j));
	assert_true(visibility_job(&m, &jt7, &j));
	assert_false(visibility_job(&m, &bob, &j));
	assert_false(visibility_job(&m, &agent, &j));
	assert_false(visibility_job(&m, &jt8, &j));
	/* a job without a team is its owner's: not every teamless user's */
	assert_true(visibility_job(&m, &dan, &solo));
	assert_false(visibility_job(&m, &(struct caller){ .role = ROLE_USER, .user = "eve" }, &solo));
	/* open: every user, but still not agents or other jobs' tokens */
	m.visibility_open = true;
	assert_true(visibility_job(&m, &bob, &j));
	assert_false(visibility_job(&m, &agent, &j));
	assert_false(visibility_job(&m, &jt8, &j));
	(void)state;
}

static void test_datasets_and_teams(void **state)
{
	struct master m = { 0 };
	struct dataset team_ds = { .name = "digits", .team = "vision", .owner = "alice" };
	struct dataset own = { .name = "mine", .owner = "dan" };
	struct dataset old = { .name = "old" }; /* made before makers were kept */

	assert_true(visibility_dataset(&m, &carol, &team_ds));
	assert_false(visibility_dataset(&m, &bob, &team_ds));
	assert_false(visibility_dataset(&m, &agent, &team_ds));
	assert_true(visibility_dataset(&m, &dan, &own));
	assert_false(visibility_dataset(&m, &alice, &own));
	assert_true(visibility_dataset(&m, &bob, &old));
	assert_true(visibility_team(&alice, "vision"));
	assert_false(visibility_team(&alice, "nlp"));
	assert_false(visibility_team(&dan, "nlp"));
	assert_true(visibility_team(&admin, "nlp"));
	assert_true(visibility_team(&bob, NULL));
	(void)state;
}

static void test_redact(void **state)
{
	json_t *d = json_pack("{s:s, s:s, s:s, s:{s:s, s:[s], s:{s:i}, s:{s:{s:i}}, s:{s:s}}}", "name",
			      "j", "code", "sha256:aa", "checkpoint", "sha256:bb", "spec", "name", "j",
			      "command", "/bin/echo", "params", "secret", 1, "tasks", "worker", "gpus",
			      1, "env", "TOKEN", "x");
	json_t *spec;

	visibility_redact_job(d);
	spec = json_object_get(d, "spec");
	assert_null(json_object_get(d, "code"));
	assert_null(json_object_get(d, "checkpoint"));
	assert_null(json_object_get(spec, "command"));
	assert_null(json_object_get(spec, "params"));
	assert_null(json_object_get(spec, "env"));
	assert_non_null(json_object_get(spec, "tasks"));
	assert_string_equal(json_string_value(json_object_get(d, "name")), "j");
	assert_true(json_is_true(json_object_get(d, "redacted")));
	json_decref(d);
	(void)state;
}

/* The code scope finds the jobs of a digest through the index, checks
 * each again (a checkpoint that moved on), and grows past its first table. */
static void test_code_scope(void **state)
{
	struct master m = { 0 };
	const struct route *rt = NULL;
	struct errbuf eb = ERRBUF_INIT;
	size_t nr, n;
	char *caps[2] = { NULL, NULL };
	char digest[80];

	for (const struct route *r = api_routes(&nr); nr--; r++)
		if (!strcmp(r->pattern, "/v1/code/{digest}"))
			rt = r;
	assert_non_null(rt);
	m.jobs = xcalloc(1000, sizeof(*m.jobs));
	for (size_t i = 0; i < 1000; i++) {
		struct job *j = xcalloc(1, sizeof(*j));
		j->id = i + 1;
		j->user = i == 500 ? "alice" : "bob";
		j->team = i == 500 ? "vision" : "nlp";
		j->code = xasprintf("sha256:%064zx", i);
		m.jobs[m.njobs++] = j;
		codeindex_add(&m.code_index, j->code, j->id);
		codeindex_add(&m.code_index, j->code, j->id); /* again: listed once */
	}
	assert_non_null(codeindex_find(m.code_index, m.jobs[999]->code, &n));
	assert_int_equal(n, 1);
	assert_null(codeindex_find(m.code_index, "sha256:none", &n));
	assert_int_equal(n, 0);
	snprintf(digest, sizeof(digest), "%s", m.jobs[500]->code);
	caps[0] = digest;
	assert_int_equal(visibility_check(&m, rt, &carol, caps, &eb), 0);
	assert_int_equal(visibility_check(&m, rt, &bob, caps, &eb), YERR(FORBIDDEN));
	assert_non_null(strstr(eb.msg, "'bob' may not read"));
	/* job 501's checkpoint was this digest and has moved on: no longer alice's */
	snprintf(digest, sizeof(digest), "sha256:%064x", 0xc0ffee);
	m.jobs[500]->checkpoint = digest;
	codeindex_add(&m.code_index, digest, 501);
	assert_int_equal(visibility_check(&m, rt, &alice, caps, &eb), 0);
	m.jobs[500]->checkpoint = "sha256:later";
	assert_int_equal(visibility_check(&m, rt, &alice, caps, &eb), YERR(FORBIDDEN));
	for (size_t i = 0; i < m.njobs; i++) {
		free(m.jobs[i]->code);
		free(m.jobs[i]);
	}
	free(m.jobs);
	codeindex_free(&m.code_index);
	assert_null(m.code_index);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jobs),
		cmocka_unit_test(test_datasets_and_teams),
		cmocka_unit_test(test_redact),
		cmocka_unit_test(test_code_scope),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
