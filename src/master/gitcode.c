#include "base/compat.h"
#include "master/gitcode.h"

#include <sys/wait.h>

#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/spawn.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "common/spec_code.h"
#include "master/api.h"
#include "master/audit.h"
#include "master/codeindex.h"
#include "master/core.h"
#include "master/gitcred.h"
#include "master/gitworker.h"
#include "master/http.h"
#include "master/jobdocs.h"
#include "master/jobs.h"
#include "master/visibility.h"

struct gitcode {
	char *dir;              /* owned DATA/git */
	char *exe;              /* owned: this yard binary, to start git-worker */
	uint64_t timeout_ms;    /* git-timeout: a git-worker is killed after it */
	struct gitcreds creds;
	volatile int stopping;  /* git-workers in flight are killed */
	/* the one submission jobs_submit admits with code in git: the work
	 * gitcode_submit passes it while it calls it, else NULL */
	const struct gitwork *admitting;
};

/* One submission's git work: made on the loop, run by a git-worker
 * process that a worker thread waits for, its answer made on the loop
 * again. */
struct gitwork {
	uv_work_t w;
	struct master *m;
	/* who waits: a request (NULL once the client has gone), or the master
	 * itself (gitcode_run: done, called once, and the caller it submits as) */
	struct req *r;
	gitcode_done_fn done;
	void *arg;
	char *user, *team;      /* owned: done's caller */
	enum role role;
	json_t *body;           /* owned copy of the request's body */
	/* inputs, owned copies (the worker thread reads them) */
	char *exe, *dir, *url, *ref, *path, *sha_in;
	char *tmp;              /* owned DATA/git/tmp/work-XXXXXX, this work's own; removed with it */
	struct gitcred cred;    /* a copy of the URL's credential; prefix NULL: none */
	bool nocache;           /* pack again: the cached archive's blob is gone */
	uint64_t timeout_ms;
	const volatile int *stopping;
	/* what the git-worker found */
	int rc;                 /* 0 or a YERR code, eb saying why */
	struct errbuf eb;
	char sha[SPEC_CODE_SHA_LEN + 1];
	char hex[SHA256_HEX_LEN + 1]; /* the archive's digest */
	char *archive;          /* owned TMP/code.tar.gz, unless cached; NULL once taken */
	bool cached;            /* the archive came from DATA/git/packed */
	bool fetched;           /* the mirror was fetched */
};

/* "2m", "90s", "1500ms": a duration as the options take it. */
static void format_ms(char *buf, size_t n, uint64_t ms)
{
	if (ms && ms % 60000 == 0)
		snprintf(buf, n, "%llum", (unsigned long long)(ms / 60000));
	else if (ms && ms % 1000 == 0)
		snprintf(buf, n, "%llus", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, n, "%llums", (unsigned long long)ms);
}

/* ---- the worker thread: a git-worker process ---- */

/* The request of w's git-worker (gitworker.h): the credential's file, never
 * its secret. */
static char *worker_request(const struct gitwork *w)
{
	json_t *req = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s?, s:b}", "dir", w->dir, "tmp", w->tmp,
				"url", w->url, "ref", w->ref, "path", w->path, "sha", w->sha_in,
				"nocache", w->nocache);
	char *text;

	if (w->cred.prefix)
		json_object_set_new(req, "cred", json_pack("{s:s, s:s, s:s}", "prefix", w->cred.prefix,
							   "kind", w->cred.kind == GITCRED_TOKEN_FILE ?
							   "token-file" : "ssh-key", "path", w->cred.path));
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	return text;
}

/* Reads the worker's answer (gitworker.h) into w. */
static int worker_answer(struct gitwork *w, const char *out, size_t len)
{
	json_t *a = json_loadb(out, len, 0, NULL);
	const char *sha = json_string_value(json_object_get(a, "sha"));
	const char *hex = json_string_value(json_object_get(a, "hex"));
	const char *field = json_string_value(json_object_get(a, "field"));
	const char *msg = json_string_value(json_object_get(a, "message"));
	json_int_t rc = json_integer_value(json_object_get(a, "rc"));

	if (!a || !sha || !hex || !field || !msg || !json_is_integer(json_object_get(a, "rc"))) {
		json_decref(a);
		return error(&w->eb, YERR(INTERNAL), "the git worker gave no answer");
	}
	if (rc) {
		w->rc = *field ? error_field(&w->eb, (int)rc, field, "%s", msg)
			       : error(&w->eb, (int)rc, "%s", msg);
	} else if (!spec_code_is_sha(sha) || strlen(hex) != SHA256_HEX_LEN ||
		   strspn(hex, "0123456789abcdef") != SHA256_HEX_LEN) {
		w->rc = error(&w->eb, YERR(INTERNAL), "the git worker gave no commit or digest");
	} else {
		snprintf(w->sha, sizeof(w->sha), "%s", sha);
		memcpy(w->hex, hex, sizeof(w->hex));
		w->cached = json_is_true(json_object_get(a, "cached"));
		w->fetched = json_is_true(json_object_get(a, "fetched"));
	}
	json_decref(a);
	return w->rc;
}

/* The git work of w in a git-worker process (gitworker.h), killed at the
 * git-timeout or once the master stops. */
static void work(uv_work_t *req)
{
	struct gitwork *w = req->data;
	char *const argv[] = { w->exe, (char *)GITWORKER_CMD, NULL };
	struct spawn_opts o;
	struct spawn_result res = { 0 };
	char *input = worker_request(w);
	char tms[32];

	w->rc = 0;
	w->eb = (struct errbuf)ERRBUF_INIT;
	w->cached = w->fetched = false;
	spawn_opts_init(&o);
	o.argv = argv;
	if (!input) {
		w->rc = error(&w->eb, YERR(INTERNAL), "cannot make the git worker's request");
		return;
	}
	if (spawn_run(&o, input, strlen(input), w->timeout_ms, w->stopping, 64 * 1024, &res, NULL,
		      &w->eb)) {
		w->rc = w->eb.code;
		goto out;
	}
	if (res.err_len)
		fprintf(stderr, "%s%s", res.err, res.err[res.err_len - 1] == '\n' ? "" : "\n");
	if (res.cancelled) {
		w->rc = error(&w->eb, YERR(UNAVAILABLE), "the master is stopping");
	} else if (res.timed_out) {
		format_ms(tms, sizeof(tms), w->timeout_ms);
		w->rc = error_field(&w->eb, YERR(GATEWAY_TIMEOUT), "code.git", "code.git: '%s' did not "
				    "answer within %s (the master's git-timeout): the git work was "
				    "stopped", w->url, tms);
	} else if (!WIFEXITED(res.status) || WEXITSTATUS(res.status)) {
		w->rc = error(&w->eb, YERR(INTERNAL), "the git worker failed (%s %d)",
			      WIFEXITED(res.status) ? "exit" : "signal",
			      WIFEXITED(res.status) ? WEXITSTATUS(res.status) : WTERMSIG(res.status));
	} else {
		worker_answer(w, res.out, res.out_len);
	}
out:
	spawn_result_release(&res);
	free(input);
}

/* ---- the loop: the request ---- */

static void work_free(struct gitwork *w)
{
	free(w->archive);
	if (w->tmp)
		rm_rf(w->tmp);
	free(w->tmp);
	json_decref(w->body);
	free(w->exe);
	free(w->dir);
	free(w->url);
	free(w->ref);
	free(w->path);
	free(w->sha_in);
	free(w->user);
	free(w->team);
	gitcred_release(&w->cred);
	free(w);
}

static bool held_ready(struct req *r)
{
	(void)r;
	return false; /* work_done answers it */
}

static void held_gone(struct req *r)
{
	struct gitwork *w = r->handler_data;

	if (w)
		w->r = NULL;
}

/* The job an answer reports, held until the commit that makes it durable. */
struct made {
	uint64_t id;
	uint64_t submitted_at;  /* with id: this job, not one made again under its id */
};

/* WAIT_HANDLER, once answered: the request is asked at the first wake, which
 * comes after the commit of the loop turn that answered it (master.c's
 * on_prepare commits, then wakes). A failed commit reloads the model from
 * the store: the job is not there, and the answer says so instead. */
static bool made_ready(struct req *r)
{
	struct made *mk = r->handler_data;
	struct job *j = core_job(r->m, mk->id);

	if (!j || j->submitted_at != mk->submitted_at) {
		struct errbuf eb = ERRBUF_INIT;
		error(&eb, YERR(UNAVAILABLE), "the job could not be stored (the store failed): submit "
		      "it again");
		req_error(r, &eb);
	}
	return true;
}

static void made_gone(struct req *r)
{
	free(r->handler_data);
	r->handler_data = NULL;
}

/* Answers w's request (eb: an error, else the job j) with its audit entry;
 * the request stays held until the next wake, after the commit of the
 * change it reports (made_ready). */
static void answer(struct gitwork *w, const struct errbuf *eb, const struct job *j, bool again)
{
	struct req *r = w->r;

	if (w->done) {
		w->done(w->m, w->arg, eb, j);
		w->done = NULL;
		return;
	}
	r->handler_data = NULL;
	r->ready = NULL; /* ready at the next wake */
	r->gone = NULL;
	w->r = NULL;
	if (eb)
		req_error(r, eb);
	else
		req_json(r, again ? 200 : 201, jobs_job_json(r->m, j, true));
	audit_record(r);
	if (!eb) {
		struct made *mk = xcalloc(1, sizeof(*mk));
		mk->id = j->id;
		mk->submitted_at = j->submitted_at;
		r->handler_data = mk;
		r->ready = made_ready;
		r->gone = made_gone;
	}
}

static void work_done(uv_work_t *req, int status)
{
	struct gitwork *w = req->data;
	struct master *m = w->m;
	struct errbuf eb = ERRBUF_INIT;
	char name[CODE_NAME_MAX], digest[8 + SHA256_HEX_LEN];
	struct caller c;
	struct job *j = NULL;
	bool again = false;
	uint64_t size;
	int rc;

	if (w->done && m->gitcode->stopping) {
		error(&eb, YERR(UNAVAILABLE), "the master stopped before the code was fetched");
		answer(w, &eb, NULL, false);
		goto out;
	}
	if (w->r && (w->r->resp || m->gitcode->stopping)) {
		/* answered already (the master stops, or lost its lead): let go */
		w->r->handler_data = NULL;
		w->r->ready = NULL;
		w->r->gone = NULL;
		w->r = NULL;
	}
	if (!w->r && !w->done) {
		work_free(w);
		return;
	}
	if (status) {
		error(&eb, YERR(UNAVAILABLE), "the git work was cancelled");
		answer(w, &eb, NULL, false);
		goto out;
	}
	if (w->rc) {
		fprintf(stderr, "yard master: git: %s\n", w->eb.msg);
		answer(w, &w->eb, NULL, false);
		goto out;
	}
	code_blob_name(name, w->hex);
	if (w->cached && m->sops->blob_size(m->store, name, &size, &eb)) {
		/* the archive of the cache is gone from the store: pack again */
		w->nocache = true;
		if (!uv_queue_work(&m->loop, &w->w, work, work_done))
			return;
		error(&eb, YERR(INTERNAL), "cannot queue the git work");
		answer(w, &eb, NULL, false);
		goto out;
	}
	if (!w->cached) {
		w->archive = xasprintf("%s/" GITWORKER_ARCHIVE, w->tmp);
		if ((rc = core_batch_open(m))) {
			answer(w, &m->batch_eb, NULL, false);
			goto out;
		}
		rc = m->sops->blob_put_file(m->store, name, w->archive, &eb);
		free(w->archive); /* taken, even on error */
		w->archive = NULL;
		if (rc) {
			answer(w, &eb, NULL, false);
			goto out;
		}
	}
	fprintf(stderr, "yard master: git: %s %s at %s%s%s: code sha256:%s (%s)\n", w->url, w->ref,
		w->sha, w->path ? " path " : "", w->path ? w->path : "", w->hex,
		w->cached ? "cached" : w->fetched ? "fetched, packed" : "packed");
	/* the submission as the client would have made it with the code
	 * uploaded: the commit in the spec, the archive as its code */
	snprintf(digest, sizeof(digest), "sha256:%s", w->hex);
	json_object_set_new(json_object_get(json_object_get(w->body, "spec"), "code"), "sha",
			    json_string(w->sha));
	json_object_set_new(w->body, "code", json_string(digest));
	if (w->done)
		c = (struct caller){ .role = w->role, .user = w->user, .team = w->team };
	else
		req_caller(w->r, &c);
	m->gitcode->admitting = w;
	rc = jobs_submit(m, &c, w->body, &j, &again, &eb);
	m->gitcode->admitting = NULL;
	answer(w, rc ? &eb : NULL, j, again);
out:
	work_free(w);
}

bool gitcode_wanted(const json_t *body)
{
	const json_t *code = json_object_get(json_object_get(body, "spec"), "code");

	return code && !json_is_null(code);
}

/* The work of body's submission (POST /v1/jobs's body, its spec's code in
 * git), checked as far as it can be without a fetch; NULL after an error. */
static struct gitwork *work_new(struct master *m, const json_t *body, struct errbuf *eb)
{
	struct gitcode *gc = m->gitcode;
	struct job_spec spec;
	struct gitwork *w;
	const struct gitcred *cred;
	const json_t *jcode = json_object_get(body, "code");

	if (!gc) {
		error_field(eb, YERR(BAD_REQUEST), "code.git", "code.git: this master takes no code "
			    "from git");
		return NULL;
	}
	/* the spec's own errors first, without a fetch */
	if (spec_from_json(json_object_get(body, "spec"), &spec, eb)) {
		spec_release(&spec);
		return NULL;
	}
	if (jcode && !json_is_null(jcode)) {
		error_field(eb, YERR(BAD_REQUEST), "code", "code: a job whose spec has code.git takes "
			    "its code from git, not an upload");
		spec_release(&spec);
		return NULL;
	}
	w = xcalloc(1, sizeof(*w));
	w->w.data = w;
	w->m = m;
	w->body = json_deep_copy(body);
	w->exe = xstrdup(gc->exe);
	w->dir = xstrdup(gc->dir);
	w->url = xstrdup(spec.code->git);
	w->ref = xstrdup(spec.code->ref);
	w->path = spec.code->path ? xstrdup(spec.code->path) : NULL;
	w->sha_in = spec.code->sha ? xstrdup(spec.code->sha) : NULL;
	spec_release(&spec);
	if ((cred = gitcreds_find(&gc->creds, w->url))) {
		w->cred.prefix = xstrdup(cred->prefix);
		w->cred.kind = cred->kind;
		w->cred.path = xstrdup(cred->path);
	}
	w->stopping = &gc->stopping;
	w->timeout_ms = gc->timeout_ms;
	w->eb = (struct errbuf)ERRBUF_INIT;
	w->tmp = xasprintf("%s/tmp/work-XXXXXX", gc->dir);
	if (!mkdtemp(w->tmp)) {
		error(eb, YERR(IO), "cannot create '%s': %s", w->tmp, strerror(errno));
		free(w->tmp);
		w->tmp = NULL;
		work_free(w);
		return NULL;
	}
	if (uv_queue_work(&m->loop, &w->w, work, work_done)) {
		error(eb, YERR(INTERNAL), "cannot queue the git work");
		work_free(w);
		return NULL;
	}
	return w;
}

void gitcode_submit(struct req *r, const json_t *body)
{
	struct errbuf eb = ERRBUF_INIT;
	struct gitwork *w = work_new(r->m, body, &eb);

	if (!w) {
		req_error(r, &eb);
		return;
	}
	w->r = r;
	r->handler_data = w;
	r->ready = held_ready;
	r->gone = held_gone;
	/* held by the handler's caller (http.c), as a long poll is */
	r->wait = WAIT_HANDLER;
}

int gitcode_run(struct master *m, const struct caller *c, const json_t *body, gitcode_done_fn done, void *arg,
		struct errbuf *eb)
{
	struct gitwork *w = work_new(m, body, eb);

	if (!w)
		return eb->code;
	/* the work runs on a worker thread: these are read on the loop only */
	w->done = done;
	w->arg = arg;
	w->role = c->role;
	w->user = xstrdup(c->user);
	w->team = c->team ? xstrdup(c->team) : NULL;
	return 0;
}

int gitcode_check(struct master *m, const struct job_spec *spec, const char *code,
		  struct errbuf *eb)
{
	const struct gitwork *w = m->gitcode ? m->gitcode->admitting : NULL;

	if (!spec->code)
		return 0;
	if (w && spec->code->sha && !strcmp(spec->code->sha, w->sha) && !strcmp(spec->code->git, w->url) &&
	    !strcmp(spec->code->path ? spec->code->path : "", w->path ? w->path : "") && code &&
	    !strcmp(code + 7, w->hex))
		return 0;
	return error_field(eb, YERR(INVALID_SPEC), "code", "code: a job whose code is in git is "
			   "submitted with POST /v1/jobs (yard submit --git), which fetches it");
}

/* ---- life ---- */

int gitcode_open(struct master *m, const struct conf_list *creds, uint64_t timeout_ms,
		 struct errbuf *eb)
{
	static const char *const sub[] = { "", "/mirrors", "/packed", "/tmp" };
	struct gitcode *gc = xcalloc(1, sizeof(*gc));
	int ret = 0;

	gc->dir = xasprintf("%s/git", m->data_dir);
	gc->timeout_ms = timeout_ms ? timeout_ms : GITCODE_TIMEOUT_MS;
	m->gitcode = gc;
	/* the binary now, for a git-worker started later: a yard replaced on
	 * disk (an upgrade) is not this master's */
	if (!(gc->exe = realpath("/proc/self/exe", NULL)))
		ret = error(eb, YERR(INTERNAL), "cannot find this program (/proc/self/exe): %s",
			    strerror(errno));
	for (size_t i = 0; i < creds->n && !ret; i++)
		ret = gitcreds_add(&gc->creds, "git-credential", creds->items[i], eb);
	for (size_t i = 0; i < ARRAY_SIZE(sub) && !ret; i++) {
		char *dir = xasprintf("%s%s", gc->dir, sub[i]);
		/* what a master that stopped midway left in tmp goes */
		if (!strcmp(sub[i], "/tmp"))
			rm_rf(dir);
		if (mkdir_p(dir, 0700))
			ret = error(eb, YERR(IO), "cannot create '%s': %s", dir, strerror(errno));
		free(dir);
	}
	return ret;
}

void gitcode_stop(struct master *m)
{
	/* spawn_run looks at it ten times a second and kills its git-worker */
	if (m->gitcode)
		m->gitcode->stopping = 1;
}

void gitcode_free(struct master *m)
{
	struct gitcode *gc = m->gitcode;

	if (!gc)
		return;
	gitcreds_release(&gc->creds);
	free(gc->exe);
	free(gc->dir);
	free(gc);
	m->gitcode = NULL;
}
