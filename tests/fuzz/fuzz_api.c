/*
 * libFuzzer target for every JSON request body the master's API takes,
 * through the master's own HTTP layer: one master is opened in-process once
 * (a temp data dir, a real SQLite store, libmicrohttpd with no listening
 * socket), and each input is one HTTP request handed to it over a
 * socketpair with MHD_add_connection, so that routing, the token check, the
 * body caps, body_json and the route's handler all run as they do for a
 * client. Nothing is a copy of the API's code.
 *
 * The first byte of an input picks the route (byte % 8; the seeds use the
 * digits '0'..'7'), the rest is the body:
 *
 *   0  POST /v1/tokens                 admin token
 *   1  POST /v1/blobs/missing          user token
 *   2  POST /v1/datasets               user token
 *   3  POST /v1/jobs                   user token
 *   4  POST /v1/jobs/J/exec            user token (J's owner)
 *   5  POST /v1/agents                 join token
 *   6  POST /v1/agents/n1/status       n1's agent token
 *   7  POST /v1/tasks/T/metrics?stream=stdout&offset=0   n1's agent token
 *
 * The state every input starts from (made once, through the same routes):
 * user alice of team vision, node n1 (2 GPUs, process and docker
 * runtimes), one held chunk, dataset digits@1 made of it, and job J of
 * alice's using digits@1, whose task T runs on n1.
 *
 * After the request the batch is settled as the master's loop does it
 * (a scheduling pass, then the commit that held replies wait for), with two
 * differences: what the batch wrote is first loaded back into a fresh model
 * inside the open transaction (core_load must take whatever a handler
 * stored, or a restarted master would refuse its own store), and then the
 * batch is rolled back and the model reloaded, which is the master's path
 * after a failed commit; so every input starts from the same state.
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

#include <fcntl.h>
#include <microhttpd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "master/core.h"
#include "master/datasets.h"
#include "master/execs.h"
#include "master/http.h"
#include "master/jobs.h"
#include "master/master.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct master *M;
static char dir[4096];
static char *admin_tok, *join_tok, *user_tok, *agent_tok;
static char *exec_path, *metrics_path;
static bool wrote; /* the request opened a batch */
static bool trace; /* FUZZ_API_TRACE set: each reply goes to stderr */

static void fail(const char *what, const char *detail) __attribute__((noreturn));

static void fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_api: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	abort();
}

/* The master loop's work between requests (master.c's on_prepare): a
 * scheduling pass, then the batch. keep: commit it (making the start
 * state); else check that it loads back, then roll it back. Held replies
 * are released either way, as after a good commit. */
static void settle(bool keep)
{
	struct errbuf eb = ERRBUF_INIT;

	if (M->sched_needed || M->nfresh)
		jobs_schedule(M);
	if (M->txn_open) {
		wrote = true;
		if (M->batch_err)
			fail("a write of the batch failed", M->batch_eb.msg);
		if (keep) {
			if (M->sops->commit(M->store, &eb))
				fail("commit", eb.msg);
		} else {
			core_clear(M);
			if (core_load(M, &eb))
				fail("what the request stored does not load back", eb.msg);
			M->sops->rollback(M->store);
		}
		M->txn_open = false;
		datasets_collect_garbage(M, keep);
	}
	if (M->held)
		http_wake(M, 0, &eb);
}

/* Back to the start state: the model as the store holds it, no execs. */
static void reset(void)
{
	struct errbuf eb = ERRBUF_INIT;

	core_clear(M);
	if (core_load(M, &eb))
		fail("reload", eb.msg);
	jobs_restore_leases(M);
	execs_clear(M);
	M->next_exec_id = 0;
	jobs_schedule(M);
	if (M->txn_open)
		fail("the start state is not stable", "a scheduling pass changed it");
}

/* One HTTP request through MHD; returns its status, the reply's body in
 * *reply. keep: as settle's. */
static int request(const char *method, const char *target, const char *token, const void *body,
		   size_t len, bool keep, struct strbuf *reply)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct strbuf out = STRBUF_INIT, in = STRBUF_INIT;
	size_t sent = 0;
	int sv[2], status = 0;
	bool eof = false;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		fail("socketpair", strerror(errno));
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	if (MHD_add_connection(M->mhd, sv[1], (const struct sockaddr *)&sa, sizeof(sa)) != MHD_YES)
		fail("MHD_add_connection", strerror(errno));
	strbuf_addf(&out, "%s %s HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n", method, target);
	if (token)
		strbuf_addf(&out, "Authorization: Bearer %s\r\n", token);
	strbuf_addf(&out, "Content-Length: %zu\r\n\r\n", len);
	strbuf_add(&out, body, len);
	for (int spins = 0; !eof; spins++) {
		char buf[16384];
		ssize_t n;

		if (spins > 100000)
			fail("no reply", target);
		if (sent < out.len) {
			n = write(sv[0], out.buf + sent, out.len - sent);
			if (n > 0)
				sent += (size_t)n;
		}
		MHD_run(M->mhd);
		settle(keep);
		while ((n = read(sv[0], buf, sizeof(buf))) > 0)
			strbuf_add(&in, buf, (size_t)n);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			eof = true;
	}
	close(sv[0]);
	strbuf_release(&out);
	if (in.len < 12 || strncmp(in.buf, "HTTP/1.1 ", 9) || sscanf(in.buf + 9, "%3d", &status) != 1)
		fail("a reply that is not HTTP", in.len ? in.buf : "(empty)");
	{
		const char *b = strstr(in.buf, "\r\n\r\n");
		strbuf_setlen(reply, 0);
		if (b)
			strbuf_addstr(reply, b + 4);
	}
	strbuf_release(&in);
	return status;
}

/* A request of the start state, which must succeed; its reply as JSON. */
static json_t *setup_request(const char *method, const char *target, const char *token,
			     const char *body)
{
	struct strbuf reply = STRBUF_INIT;
	int st = request(method, target, token, body, strlen(body), true, &reply);
	json_t *doc = json_loads(reply.buf, 0, NULL);

	if (st < 200 || st > 299 || !doc) {
		fprintf(stderr, "fuzz_api: %s %s: %d %s\n", method, target, st, reply.buf);
		abort();
	}
	strbuf_release(&reply);
	return doc;
}

static char *token_from(json_t *doc)
{
	const char *t = json_string_value(json_object_get(doc, "token"));
	char *s;

	if (!t)
		fail("a reply without a token", NULL);
	s = xstrdup(t);
	json_decref(doc);
	return s;
}

static char *read_token(const char *name)
{
	char *path = xasprintf("%s/%s", dir, name);
	struct strbuf sb = STRBUF_INIT;

	if (strbuf_read_file(&sb, path, 4096))
		fail("cannot read", path);
	strbuf_trim(&sb);
	free(path);
	return strbuf_detach(&sb, NULL);
}

static void cleanup(void)
{
	rm_rf(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* no rate limit: every input is one more request of the same tokens */
	struct master_config cfg = { .listen = NULL, .data_dir = NULL, .rate_limit = "0" };
	struct errbuf eb = ERRBUF_INIT;
	const char *tmp = getenv("TMPDIR");
	static const char chunk[] = "hello\n";
	/* sha256 of "hello\n" */
	static const char chunk_digest[] =
		"sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
	struct task *t = NULL;
	json_t *doc;
	char *s;

	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	trace = getenv("FUZZ_API_TRACE") != NULL;
	snprintf(dir, sizeof(dir), "%s/yard-fuzz-api-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		fail("mkdtemp", strerror(errno));
	atexit(cleanup);
	cfg.data_dir = dir;
	if (master_open(&cfg, &M, &eb))
		fail("master_open", eb.msg);
	uv_timer_init(&M->loop, &M->mhd_timer);
	admin_tok = read_token("admin-token");
	join_tok = read_token("join-token");

	user_tok = token_from(setup_request("POST", "/v1/tokens", admin_tok,
					    "{\"user\": \"alice\", \"team\": \"vision\"}"));
	agent_tok = token_from(setup_request(
		"POST", "/v1/agents", join_tok,
		"{\"name\": \"n1\", \"addr\": \"127.0.0.1\", \"ports\": [30000, 32000], \"cpus\": 4, "
		"\"memory\": 8589934592, \"gpus\": [{\"index\": 0, \"model\": \"SIM-A100\", "
		"\"memory\": 85899345920, \"uuid\": \"GPU-0\", \"island\": 0}, {\"index\": 1, "
		"\"model\": \"SIM-A100\", \"memory\": 85899345920, \"uuid\": \"GPU-1\", \"island\": 0}], "
		"\"runtimes\": [\"process\", \"docker\"], \"engine\": \"Docker 20.10.24\"}"));
	{
		struct strbuf reply = STRBUF_INIT;
		char *target = xasprintf("/v1/blobs/%s", chunk_digest);
		int st = request("PUT", target, user_tok, chunk, strlen(chunk), true, &reply);
		if (st != 201)
			fail("PUT of the chunk", reply.buf);
		free(target);
		strbuf_release(&reply);
	}
	s = xasprintf("{\"name\": \"digits\", \"manifest\": {\"files\": [{\"path\": \"a.txt\", "
		      "\"size\": 6, \"mode\": 420, \"chunks\": [\"%s\"]}]}}", chunk_digest);
	json_decref(setup_request("POST", "/v1/datasets", user_tok, s));
	free(s);
	doc = setup_request("POST", "/v1/jobs", user_tok,
			    "{\"spec\": {\"name\": \"j\", \"command\": [\"/bin/true\"], \"tasks\": "
			    "{\"worker\": {\"replicas\": 1, \"gpus\": 1}}, \"data\": [{\"source\": "
			    "\"yard://digits@1\", \"mount\": \"d\"}]}}");
	{
		uint64_t id = (uint64_t)json_integer_value(json_object_get(doc, "id"));
		struct job *j = core_job(M, id);
		json_decref(doc);
		if (!j || j->ntasks != 1 || !(t = j->tasks[0])->node)
			fail("the job's task was not placed", NULL);
		exec_path = xasprintf("/v1/jobs/%" PRIu64 "/exec", id);
	}
	metrics_path = xasprintf("/v1/tasks/%" PRIu64 "/metrics?stream=stdout&offset=0", t->id);
	s = xasprintf("{\"tasks\": [{\"id\": %" PRIu64 ", \"state\": \"running\", \"pid\": 1234}]}",
		      t->id);
	json_decref(setup_request("POST", "/v1/agents/n1/status", agent_tok, s));
	free(s);
	if (t->state != TASK_RUNNING)
		fail("the job's task is not running", NULL);
	reset();
	return 0;
}

/* An error reply says what: {"error": {"code": "...", "message": "..."}}. */
static void check_error_reply(int status, const char *target, const char *body)
{
	json_t *doc = json_loads(body, 0, NULL), *e = json_object_get(doc, "error");

	if (!json_is_string(json_object_get(e, "code")) ||
	    !json_string_length(json_object_get(e, "message"))) {
		fprintf(stderr, "fuzz_api: %s: %d without an error document: %s\n", target, status, body);
		abort();
	}
	json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *const targets[8] = { "/v1/tokens", "/v1/blobs/missing", "/v1/datasets", "/v1/jobs",
					 exec_path, "/v1/agents", "/v1/agents/n1/status", metrics_path };
	const char *const tokens[8] = { admin_tok, user_tok, user_tok, user_tok,
					user_tok, join_tok, agent_tok, agent_tok };
	struct strbuf reply = STRBUF_INIT;
	unsigned route;
	int st;

	if (!size)
		return 0;
	route = data[0] % 8;
	wrote = false;
	st = request("POST", targets[route], tokens[route], data + 1, size - 1, false, &reply);
	if (trace)
		fprintf(stderr, "fuzz_api: %s: %d %.300s\n", targets[route], st, reply.buf);
	if (st >= 500) {
		fprintf(stderr, "fuzz_api: %s: %d %s\n", targets[route], st, reply.buf);
		abort();
	}
	if (st >= 400)
		check_error_reply(st, targets[route], reply.buf);
	strbuf_release(&reply);
	/* a refusal that wrote nothing leaves the start state as it was (a
	 * reload costs most of an input's time) */
	if (wrote || st < 400)
		reset();
	return 0;
}
