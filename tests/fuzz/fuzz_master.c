/* The in-process master of the API fuzz targets (fuzz_master.h). */
#include "base/compat.h"
#include "fuzz_master.h"

#include <fcntl.h>
#include <microhttpd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "base/fsutil.h"
#include "base/xalloc.h"
#include "master/auth.h"
#include "master/core.h"
#include "master/datasets.h"
#include "master/execs.h"
#include "master/gitcode.h"
#include "master/http.h"
#include "master/jobs.h"
#include "master/master.h"

struct fuzz_world fuzz_world;

static struct master *M;
static char dir[4096];
static const char *target_name = "fuzz";

void fuzz_fail(const char *what, const char *detail)
{
	fprintf(stderr, "%s: %s%s%s\n", target_name, what, detail ? ": " : "", detail ? detail : "");
	abort();
}

/* The master loop's work between requests (master.c's on_prepare): a
 * scheduling pass, then the batch. keep: commit it (making the start
 * state); else check that it loads back, then roll it back. Held replies
 * are released either way, as after a good commit. */
static void settle(bool keep, bool *wrote)
{
	struct errbuf eb = ERRBUF_INIT;

	if (M->sched_needed || M->nfresh)
		jobs_schedule(M);
	if (M->txn_open) {
		*wrote = true;
		if (M->batch_err)
			fuzz_fail("a write of the batch failed", M->batch_eb.msg);
		if (keep) {
			if (M->sops->commit(M->store, &eb))
				fuzz_fail("commit", eb.msg);
		} else {
			core_clear(M);
			if (core_load(M, &eb))
				fuzz_fail("what the request stored does not load back", eb.msg);
			M->sops->rollback(M->store);
		}
		M->txn_open = false;
		datasets_collect_garbage(M, keep);
	}
	if (M->held)
		http_wake(M, 0, &eb);
}

void fuzz_master_reset(void)
{
	struct errbuf eb = ERRBUF_INIT;

	core_clear(M);
	if (core_load(M, &eb))
		fuzz_fail("reload", eb.msg);
	jobs_restore_leases(M);
	execs_clear(M);
	M->next_exec_id = 0;
	jobs_schedule(M);
	if (M->txn_open)
		fuzz_fail("the start state is not stable", "a scheduling pass changed it");
}

int fuzz_master_send(const void *bytes, size_t len, bool keep, struct strbuf *head,
		     struct strbuf *body, bool *wrote)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct strbuf in = STRBUF_INIT;
	const char *p = bytes;
	size_t sent = 0;
	int sv[2], status = 0;
	bool eof = false, dummy;

	if (!wrote)
		wrote = &dummy;
	*wrote = false;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		fuzz_fail("socketpair", strerror(errno));
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	if (MHD_add_connection(M->mhd, sv[1], (const struct sockaddr *)&sa, sizeof(sa)) != MHD_YES)
		fuzz_fail("MHD_add_connection", strerror(errno));
	for (unsigned idle = 0; !eof; idle++) {
		char buf[16384];
		ssize_t n;

		if (idle > 100000)
			fuzz_fail("no reply", NULL);
		if (sent < len) {
			n = write(sv[0], p + sent, len - sent);
			if (n > 0) {
				sent += (size_t)n;
				idle = 0;
			} else if (n < 0 && errno == EPIPE) {
				sent = len; /* MHD hung up early (a refused head): read what it said */
			}
		}
		if (sent == len && idle == 50) {
			/* a long poll (logs follow, work, exec wait): its time is up */
			for (struct req *r = M->held; r; r = r->next_held)
				r->deadline_ms = 0;
		} else if (sent == len && idle == 100) {
			/* a head that promised more body than came: the client is gone */
			shutdown(sv[0], SHUT_WR);
		}
		MHD_run(M->mhd);
		settle(keep, wrote);
		while ((n = read(sv[0], buf, sizeof(buf))) > 0) {
			strbuf_add(&in, buf, (size_t)n);
			idle = 0;
		}
		if (n == 0 || (n < 0 && errno != EAGAIN))
			eof = true;
	}
	close(sv[0]);
	if (in.len < 12 || strncmp(in.buf, "HTTP/1.1 ", 9) || sscanf(in.buf + 9, "%3d", &status) != 1)
		status = 0;
	{
		const char *b = strstr(in.buf ? in.buf : "", "\r\n\r\n");
		strbuf_setlen(body, 0);
		if (head)
			strbuf_setlen(head, 0);
		if (b) {
			strbuf_addstr(body, b + 4);
			if (head)
				strbuf_add(head, in.buf, (size_t)(b - in.buf));
		}
	}
	strbuf_release(&in);
	return status;
}

int fuzz_master_request(const char *method, const char *target, const char *token, const void *body,
			size_t len, bool keep, struct strbuf *reply, bool *wrote)
{
	struct strbuf out = STRBUF_INIT;
	int st;

	strbuf_addf(&out, "%s %s HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n", method, target);
	if (token)
		strbuf_addf(&out, "Authorization: Bearer %s\r\n", token);
	strbuf_addf(&out, "Content-Length: %zu\r\n\r\n", len);
	strbuf_add(&out, body, len);
	st = fuzz_master_send(out.buf, out.len, keep, NULL, reply, wrote);
	strbuf_release(&out);
	if (!st)
		fuzz_fail("a reply that is not HTTP", target);
	return st;
}

/* A request of the start state, which must succeed; its reply as JSON. */
static json_t *setup_request(const char *method, const char *target, const char *token,
			     const char *body)
{
	struct strbuf reply = STRBUF_INIT;
	int st = fuzz_master_request(method, target, token, body, strlen(body), true, &reply, NULL);
	json_t *doc = json_loads(reply.buf, 0, NULL);

	if (st < 200 || st > 299 || !doc) {
		fprintf(stderr, "%s: %s %s: %d %s\n", target_name, method, target, st, reply.buf);
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
		fuzz_fail("a reply without a token", NULL);
	s = xstrdup(t);
	json_decref(doc);
	return s;
}

static char *read_token(const char *name)
{
	char *path = xasprintf("%s/%s", dir, name);
	struct strbuf sb = STRBUF_INIT;

	if (strbuf_read_file(&sb, path, 4096))
		fuzz_fail("cannot read", path);
	strbuf_trim(&sb);
	free(path);
	return strbuf_detach(&sb, NULL);
}

static void cleanup(void)
{
	rm_rf(dir);
}

void fuzz_master_init(const char *name)
{
	/* no rate limit: every input is one more request of the same tokens */
	struct master_config cfg = { .listen = NULL, .data_dir = NULL, .rate_limit = "0" };
	struct errbuf eb = ERRBUF_INIT;
	const char *tmp = getenv("TMPDIR");
	static const char chunk[] = "hello\n";
	/* sha256 of "hello\n" */
	static const char chunk_digest[] =
		"sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
	struct fuzz_world *w = &fuzz_world;
	struct task *t = NULL;
	json_t *doc;
	char *s;

	target_name = name;
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "%s/yard-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(dir))
		fuzz_fail("mkdtemp", strerror(errno));
	atexit(cleanup);
	cfg.data_dir = dir;
	if (master_open(&cfg, &M, &eb))
		fuzz_fail("master_open", eb.msg);
	/* no code from git: this master's loop does not run (its work would
	 * never be answered) and inputs must not reach the network */
	gitcode_free(M);
	uv_timer_init(&M->loop, &M->mhd_timer);
	w->admin = read_token("admin-token");
	w->join = read_token("join-token");
	w->chunk_digest = chunk_digest;

	w->alice = token_from(setup_request("POST", "/v1/tokens", w->admin,
					    "{\"user\": \"alice\", \"team\": \"vision\"}"));
	w->bob = token_from(setup_request("POST", "/v1/tokens", w->admin, "{\"user\": \"bob\"}"));
	w->agent = token_from(setup_request(
		"POST", "/v1/agents", w->join,
		"{\"name\": \"n1\", \"addr\": \"127.0.0.1\", \"ports\": [30000, 32000], \"cpus\": 4, "
		"\"memory\": 8589934592, \"gpus\": [{\"index\": 0, \"model\": \"SIM-A100\", "
		"\"memory\": 85899345920, \"uuid\": \"GPU-0\", \"island\": 0}, {\"index\": 1, "
		"\"model\": \"SIM-A100\", \"memory\": 85899345920, \"uuid\": \"GPU-1\", \"island\": 0}], "
		"\"runtimes\": [\"process\", \"docker\"], \"engine\": \"Docker 20.10.24\"}"));
	{
		struct strbuf reply = STRBUF_INIT;
		char *target = xasprintf("/v1/blobs/%s", chunk_digest);
		int st = fuzz_master_request("PUT", target, w->alice, chunk, strlen(chunk), true, &reply,
					     NULL);
		if (st != 201)
			fuzz_fail("PUT of the chunk", reply.buf);
		free(target);
		strbuf_release(&reply);
	}
	s = xasprintf("{\"name\": \"digits\", \"manifest\": {\"files\": [{\"path\": \"a.txt\", "
		      "\"size\": 6, \"mode\": 420, \"chunks\": [\"%s\"]}]}}", chunk_digest);
	json_decref(setup_request("POST", "/v1/datasets", w->alice, s));
	free(s);
	doc = setup_request("POST", "/v1/jobs", w->alice,
			    "{\"spec\": {\"name\": \"j\", \"command\": [\"/bin/true\"], \"tasks\": "
			    "{\"worker\": {\"replicas\": 1, \"gpus\": 1}}, \"data\": [{\"source\": "
			    "\"yard://digits@1\", \"mount\": \"d\"}]}}");
	{
		struct job *j;
		w->job_id = (uint64_t)json_integer_value(json_object_get(doc, "id"));
		json_decref(doc);
		j = core_job(M, w->job_id);
		if (!j || j->ntasks != 1 || !(t = j->tasks[0])->node)
			fuzz_fail("the job's task was not placed", NULL);
		w->task_id = t->id;
		w->job_token = auth_job_token(M, j);
	}
	s = xasprintf("{\"tasks\": [{\"id\": %" PRIu64 ", \"state\": \"running\", \"pid\": 1234}]}",
		      t->id);
	json_decref(setup_request("POST", "/v1/agents/n1/status", w->agent, s));
	free(s);
	if (t->state != TASK_RUNNING)
		fuzz_fail("the job's task is not running", NULL);
	fuzz_master_reset();
}

void fuzz_master_check_error(int status, const char *what, const char *body)
{
	json_t *doc = json_loads(body, 0, NULL), *e = json_object_get(doc, "error");

	if (!json_is_string(json_object_get(e, "code")) ||
	    !json_string_length(json_object_get(e, "message"))) {
		fprintf(stderr, "%s: %s: %d without an error document: %s\n", target_name, what, status,
			body);
		abort();
	}
	json_decref(doc);
}
