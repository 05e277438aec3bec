/*
 * The cost of the visibility rule (src/master/visibility.h) per request,
 * beside the two checks every request already pays (auth_allows, and
 * --rate-limit's ratelimit_take), the way bench/ratelimit measures the
 * latter: a model of 1,000 and of 100,000 jobs of 100 users in 10 teams,
 * and visibility_check of a route of each scope for an allowed and a
 * refused caller (a refusal also formats its message). SCOPE_CODE looks
 * the digest up in the code index (master/codeindex.h). Prints ns per
 * check. Asserts nothing.
 *
 * usage: bench/visibility [CHECKS]   (default 2,000,000)
 */
#include "base/compat.h"

#include "base/clock.h"
#include "base/parse.h"
#include "base/xalloc.h"
#include "master/api.h"
#include "master/auth.h"
#include "master/codeindex.h"
#include "master/ratelimit.h"
#include "master/visibility.h"

static const struct route *route_of(const char *method, const char *pattern)
{
	size_t n;
	const struct route *r = api_routes(&n);

	for (size_t i = 0; i < n; i++)
		if (!strcmp(r[i].method, method) && !strcmp(r[i].pattern, pattern))
			return &r[i];
	fprintf(stderr, "visibility: no route %s %s\n", method, pattern);
	exit(1);
}

/* A digest that differs from the others where real ones do: early. */
static char *code_digest(size_t i)
{
	uint64_t h = (uint64_t)i * 0x9e3779b97f4a7c15ull;

	return xasprintf("sha256:%016" PRIx64 "%048zx", h, i);
}

/* A model of njobs jobs, job i of user u(i % 100) in team t(i % 10), each
 * with code of its own. */
static void model(struct master *m, size_t njobs)
{
	memset(m, 0, sizeof(*m));
	m->jobs = xcalloc(njobs, sizeof(*m->jobs));
	for (size_t i = 0; i < njobs; i++) {
		struct job *j = xcalloc(1, sizeof(*j));
		j->id = i + 1;
		j->user = xasprintf("u%zu", i % 100);
		j->team = xasprintf("t%zu", i % 10);
		j->code = code_digest(i);
		m->jobs[i] = j;
		codeindex_add(&m->code_index, j->code, j->id);
	}
	m->njobs = m->ajobs = njobs;
}

static void model_free(struct master *m)
{
	for (size_t i = 0; i < m->njobs; i++) {
		free(m->jobs[i]->user);
		free(m->jobs[i]->team);
		free(m->jobs[i]->code);
		free(m->jobs[i]);
	}
	free(m->jobs);
	codeindex_free(&m->code_index);
}

/* ns per visibility_check of route for c, the path capture cap */
static double time_check(struct master *m, const struct route *rt, const struct caller *c,
			 const char *cap, uint64_t n, int *rc)
{
	char *caps[2] = { (char *)cap, NULL };
	struct errbuf eb = ERRBUF_INIT;
	uint64_t t0 = mono_us();

	for (uint64_t i = 0; i < n; i++)
		*rc = visibility_check(m, rt, c, caps, &eb);
	return (double)(mono_us() - t0) * 1000.0 / (double)n;
}

int main(int argc, char **argv)
{
	uint64_t n = 2000000;
	static const size_t sizes[] = { 1000, 100000 };
	const struct route *logs = route_of("GET", "/v1/jobs/{id}/logs");
	const struct route *nodes = route_of("GET", "/v1/nodes");
	const struct route *code = route_of("GET", "/v1/code/{digest}");
	const struct caller owner = { .role = ROLE_USER, .user = "u7", .team = "t7" };
	const struct caller member = { .role = ROLE_USER, .user = "u17", .team = "t7" };
	const struct caller other = { .role = ROLE_USER, .user = "u8", .team = "t8" };
	const struct token tok = { .role = ROLE_USER };
	struct ratelimit rl;
	uint64_t t0, sink = 0;

	if (argc > 1 && parse_u64_str(argv[1], &n)) {
		fprintf(stderr, "usage: visibility [CHECKS]\n");
		return 2;
	}
	/* the peers: what each request already pays */
	t0 = mono_us();
	for (uint64_t i = 0; i < n; i++)
		sink += auth_allows(PERM_READ, &tok);
	printf("%-44s %10.1f ns\n", "peer: auth_allows (permission)", (double)(mono_us() - t0) * 1000.0 / (double)n);
	ratelimit_init(&rl, RATELIMIT_DEFAULT_RATE, RATELIMIT_DEFAULT_BURST);
	t0 = mono_us();
	for (uint64_t i = 0; i < n; i++)
		sink += ratelimit_take(&rl, ratelimit_key(RATELIMIT_TOKEN, i % 1000), i / 1000) != 0;
	printf("%-44s %10.1f ns\n", "peer: ratelimit_take (1,000 callers)",
	       (double)(mono_us() - t0) * 1000.0 / (double)n);
	ratelimit_release(&rl);

	for (size_t s = 0; s < ARRAY_SIZE(sizes); s++) {
		struct master m;
		char id[24], digest[80];
		double ns;
		int rc = 0;
		uint64_t ncode = n;

		model(&m, sizes[s]);
		snprintf(id, sizeof(id), "%zu", sizes[s] / 2 + 8); /* a job of u7, team t7 */
		{
			char *d = code_digest(sizes[s] - 3); /* a late job's code */
			snprintf(digest, sizeof(digest), "%s", d);
			free(d);
		}
		printf("-- %zu jobs\n", sizes[s]);
		printf("%-44s %10.1f ns\n", "cluster scope (GET /v1/nodes)", time_check(&m, nodes, &other, NULL, n, &rc));
		printf("%-44s %10.1f ns\n", "job scope, owner (GET .../logs)", time_check(&m, logs, &owner, id, n, &rc));
		printf("%-44s %10.1f ns\n", "job scope, team member", time_check(&m, logs, &member, id, n, &rc));
		ns = time_check(&m, logs, &other, id, n, &rc);
		printf("%-44s %10.1f ns (%s)\n", "job scope, other user: refused", ns, rc ? "403" : "allowed?");
		{
			char own[80];
			/* job sizes-3 is u((sizes-3) % 100): user u97, team t7 */
			struct caller c97 = { .role = ROLE_USER, .user = "u97", .team = "t7" };
			snprintf(own, sizeof(own), "%s", digest);
			printf("%-44s %10.1f ns\n", "code scope, owner (GET /v1/code/D)",
			       time_check(&m, code, &c97, own, ncode, &rc));
			ns = time_check(&m, code, &other, own, ncode, &rc);
			printf("%-44s %10.1f ns (%s)\n", "code scope, other user: refused", ns,
			       rc ? "403" : "allowed?");
		}
		model_free(&m);
	}
	return sink == 42 ? 1 : 0;
}
