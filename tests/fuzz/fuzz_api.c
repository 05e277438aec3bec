/*
 * libFuzzer target for every JSON request body the master's API takes,
 * through the master's own HTTP layer (the in-process master of
 * fuzz_master.h, whose start state the routes below refer to).
 *
 * The first byte of an input picks the route ((byte % 16) % 11; the seeds
 * use '0'..'9' and ':' for 10), the rest is the body:
 *
 *   0  POST /v1/tokens                 admin token
 *   1  POST /v1/blobs/missing          user token
 *   2  POST /v1/datasets               user token
 *   3  POST /v1/jobs                   user token
 *   4  POST /v1/jobs/J/exec            user token (J's owner)
 *   5  POST /v1/agents                 join token
 *   6  POST /v1/agents/n1/status       n1's agent token
 *   7  POST /v1/tasks/T/metrics?stream=stdout&offset=0   n1's agent token
 *   8  POST /v1/experiments            user token
 *   9  POST /v1/tasks/T/outputs        n1's agent token (a manifest of held chunks)
 *  10  POST /v1/templates              user token (dataset digits is alice's)
 *
 * A finding is a sanitizer report, a reply that is not HTTP, a 5xx, an
 * error reply without {"error": {"code", "message"}}, a request that gets
 * no reply, or a batch whose writes do not load back. FUZZ_API_TRACE=1 in
 * the environment prints each reply (to see what a seed reaches).
 *
 *   tests/fuzz/run.sh api        (FUZZ_SECONDS, default 60)
 * or by hand, with the libraries instrumented too (-fsanitize=fuzzer-no-link:
 * without it libFuzzer sees only this file's branches):
 *   CC=clang meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false \
 *     -Dc_args=-fsanitize=fuzzer-no-link
 *   ninja -C build-fuzz tests/fuzz/fuzz_api
 *   build-fuzz/tests/fuzz/fuzz_api tests/fuzz/corpus/api -max_total_time=60
 */
#include "base/compat.h"

#include "base/xalloc.h"
#include "fuzz_master.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *exec_path, *metrics_path, *outputs_path;
static bool trace; /* FUZZ_API_TRACE set: each reply goes to stderr */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	trace = getenv("FUZZ_API_TRACE") != NULL;
	fuzz_master_init("fuzz_api");
	exec_path = xasprintf("/v1/jobs/%" PRIu64 "/exec", fuzz_world.job_id);
	metrics_path = xasprintf("/v1/tasks/%" PRIu64 "/metrics?stream=stdout&offset=0",
				 fuzz_world.task_id);
	outputs_path = xasprintf("/v1/tasks/%" PRIu64 "/outputs", fuzz_world.task_id);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct fuzz_world *w = &fuzz_world;
	const char *const targets[] = { "/v1/tokens", "/v1/blobs/missing", "/v1/datasets", "/v1/jobs",
					exec_path, "/v1/agents", "/v1/agents/n1/status", metrics_path,
					"/v1/experiments", outputs_path, "/v1/templates" };
	const char *const tokens[] = { w->admin, w->alice, w->alice, w->alice,
				       w->alice, w->join, w->agent, w->agent, w->alice, w->agent, w->alice };
	struct strbuf reply = STRBUF_INIT;
	unsigned route;
	bool wrote;
	int st;

	if (!size)
		return 0;
	static_assert(ARRAY_SIZE(targets) == ARRAY_SIZE(tokens), "a token per route");
	route = (data[0] % 16) % ARRAY_SIZE(targets);
	st = fuzz_master_request("POST", targets[route], tokens[route], data + 1, size - 1, false,
				 &reply, &wrote);
	if (trace)
		fprintf(stderr, "fuzz_api: %s: %d %.300s\n", targets[route], st, reply.buf);
	if (st >= 500) {
		fprintf(stderr, "fuzz_api: %s: %d %s\n", targets[route], st, reply.buf);
		abort();
	}
	if (st >= 400)
		fuzz_master_check_error(st, targets[route], reply.buf);
	strbuf_release(&reply);
	/* a refusal that wrote nothing leaves the start state as it was (a
	 * reload costs most of an input's time) */
	if (wrote || st < 400)
		fuzz_master_reset();
	return 0;
}
