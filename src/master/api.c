/* The REST API of the master: the route table and its handlers (those of
 * tokens and the audit log are in api_access.c). */
#include "base/compat.h"
#include "master/api.h"
#include "master/api_handlers.h"

#include <microhttpd.h>
#include <openssl/evp.h>

#include "base/clock.h"
#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/dataset.h"
#include "master/blobreply.h"
#include "master/codeindex.h"
#include "master/datasets.h"
#include "master/execs.h"
#include "master/gitcode.h"
#include "master/jobs.h"
#include "master/logs.h"
#include "master/metrics.h"
#include "master/proxy.h"
#include "master/visibility.h"

#define WORK_WAIT_MAX_S 30

void reply_err(struct req *r, int code, const char *fmt, ...)
{
	struct errbuf eb = ERRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	verror_field(&eb, code, "", fmt, ap);
	va_end(ap);
	req_error(r, &eb);
}

json_t *body_json(struct req *r)
{
	int depth = 0, maxdepth = 0;
	bool in_str = false, esc = false;
	json_error_t jerr;
	json_t *doc;

	for (size_t i = 0; i < r->body.len; i++) {
		char c = r->body.buf[i];
		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '{' || c == '[') {
			if (++depth > maxdepth)
				maxdepth = depth;
		} else if (c == '}' || c == ']') {
			depth--;
		}
	}
	if (maxdepth > API_JSON_DEPTH) {
		reply_err(r, YERR(BAD_REQUEST), "request body: JSON nested deeper than %d", API_JSON_DEPTH);
		return NULL;
	}
	doc = json_loadb(r->body.buf, r->body.len, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc || !json_is_object(doc)) {
		reply_err(r, YERR(BAD_REQUEST), "request body: %s",
			  doc ? "expected a JSON object" : jerr.text);
		json_decref(doc);
		return NULL;
	}
	return doc;
}

struct job *path_job(struct req *r)
{
	uint64_t id;
	struct job *j = NULL;

	if (!parse_u64_str(r->cap[0], &id))
		j = core_job(r->m, id);
	if (!j)
		reply_err(r, YERR(NOT_FOUND), "no job '%s'", r->cap[0]);
	return j;
}

/* the node of an agent route (the route's scope let only its own agent in) */
static struct node *path_agent_node(struct req *r)
{
	struct node *n = core_node(r->m, r->cap[0]);

	if (!n)
		reply_err(r, YERR(NOT_FOUND), "no node '%s'", r->cap[0]);
	return n;
}

struct caller caller_of(const struct req *r)
{
	struct caller c;

	req_caller(r, &c);
	return c;
}

/* ---- users ---- */

static void h_healthz(struct req *r)
{
	json_t *doc = json_pack("{s:b}", "ok", 1);

	leader_health(r->m, doc);
	req_json(r, 200, doc);
}

/* ---- code ---- */

/* Puts a streamed upload into the store as the blob code/HEX.tar.gz, in the
 * open batch (its reply waits for the commit); OUT hex: its digest.
 * Replies with the error itself and returns -1. */
int store_upload(struct req *r, char hex[65])
{
	struct errbuf eb = ERRBUF_INIT;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	char name[CODE_NAME_MAX];
	int rc;

	if (r->upload_fd < 0) {
		reply_err(r, YERR(INTERNAL), "the upload lost its temp file");
		return -1;
	}
	EVP_DigestFinal_ex(r->sha, md, &mdlen);
	hex_encode(md, mdlen, hex);
	close(r->upload_fd);
	r->upload_fd = -1;
	if ((rc = core_batch_open(r->m))) {
		req_error(r, &r->m->batch_eb);
		return -1;
	}
	code_blob_name(name, hex);
	rc = r->m->sops->blob_put_file(r->m->store, name, r->upload_tmp, &eb);
	/* the temp file is taken, even on error */
	free(r->upload_tmp);
	r->upload_tmp = NULL;
	if (rc) {
		req_error(r, &eb);
		return -1;
	}
	return 0;
}

static void h_code_put(struct req *r)
{
	char hex[65];

	if (store_upload(r, hex))
		return;
	{
		char digest[80];
		snprintf(digest, sizeof(digest), "sha256:%s", hex);
		req_json(r, 201, json_pack("{s:s, s:I}", "digest", digest, "size",
					   (json_int_t)r->upload_size));
	}
}

static void h_code_get(struct req *r)
{
	const char *d = r->cap[0];
	char name[CODE_NAME_MAX];

	if (strncmp(d, "sha256:", 7) || strlen(d) != 71 || strspn(d + 7, "0123456789abcdef") != 64) {
		reply_err(r, YERR(BAD_REQUEST), "'%s' is not a sha256 digest", d);
		return;
	}
	code_blob_name(name, d + 7);
	reply_whole_blob(r, name, "application/gzip", "code", d);
}

/* ---- datasets (docs/datasets.md) ---- */

void reply_err_with(struct req *r, const struct errbuf *eb, const char *key, json_t *v)
{
	json_t *e = http_error_json(eb);

	json_object_set_new(e, key, v);
	req_json(r, yerr_http_status(eb->code), json_pack("{s:o}", "error", e));
	r->err_code = eb->code;
}

static void h_blobs_missing(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *body = body_json(r), *d;

	if (!body)
		return;
	if ((d = datasets_missing(r->m, body, &eb)))
		req_json(r, 200, d);
	else
		req_error(r, &eb);
	json_decref(body);
}

static void h_blob_put(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	bool created;

	if (datasets_blob_put(r->m, r->cap[0], r->body.buf, r->body.len, &created, &eb))
		req_error(r, &eb);
	else
		req_json(r, created ? 201 : 200, json_pack("{s:s, s:I, s:b}", "digest", r->cap[0], "size",
							   (json_int_t)r->body.len, "created", created));
}

static void h_blob_get(struct req *r)
{
	const char *d = r->cap[0];
	char name[DATASETS_NAME_MAX];

	if (!dataset_digest_valid(d)) {
		reply_err(r, YERR(BAD_REQUEST), "'%s' is not a sha256 digest", d);
		return;
	}
	datasets_chunk_name(name, d);
	reply_whole_blob(r, name, "application/octet-stream", "chunk", d);
}

static void h_datasets_post(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct caller c = caller_of(r);
	json_t *body = body_json(r), *reply;
	int status, rc;

	if (!body)
		return;
	rc = datasets_create(r->m, &c, body, &reply, &status, &eb);
	if (rc == YERR(MISSING_CHUNKS))
		reply_err_with(r, &eb, "missing", json_incref(json_object_get(reply, "missing")));
	else if (rc)
		req_error(r, &eb);
	else
		req_json(r, status, json_incref(reply));
	json_decref(reply);
	json_decref(body);
}

static void h_datasets_list(struct req *r)
{
	req_json(r, 200, datasets_list_json(r->m));
}

static struct dataset *path_dataset(struct req *r)
{
	struct dataset *ds = datasets_find(r->m, r->cap[0]);

	if (!ds)
		reply_err(r, YERR(NOT_FOUND), "no dataset '%s'", r->cap[0]);
	return ds;
}

/* The version {n} of a route, or NULL after replying. */
static struct dataset_version *path_version(struct req *r, struct dataset *ds)
{
	struct dataset_version *v = NULL;
	uint64_t n;

	if (!parse_u64_str(r->cap[1], &n) && n && n <= UINT_MAX)
		v = datasets_version(ds, (unsigned)n);
	if (!v)
		reply_err(r, YERR(NOT_FOUND), "dataset '%s' has no version '%s'", ds->name, r->cap[1]);
	return v;
}

static void h_dataset_get(struct req *r)
{
	struct dataset *ds = path_dataset(r);

	if (ds)
		req_json(r, 200, datasets_json(ds));
}

static void h_dataset_version_get(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct dataset *ds = path_dataset(r);
	struct dataset_version *v = ds ? path_version(r, ds) : NULL;
	json_t *d;

	if (!v)
		return;
	if ((d = datasets_version_json(r->m, ds, v, &eb)))
		req_json(r, 200, d);
	else
		req_error(r, &eb);
}

static void h_manifest_get(struct req *r)
{
	json_t *man;

	if (!dataset_digest_valid(r->cap[0])) {
		reply_err(r, YERR(BAD_REQUEST), "'%s' is not a sha256 digest", r->cap[0]);
		return;
	}
	if ((man = datasets_manifest(r->m, r->cap[0])))
		req_json(r, 200, man);
	else
		reply_err(r, YERR(NOT_FOUND), "no manifest '%s'", r->cap[0]);
}

static void dataset_delete(struct req *r, struct dataset *ds, unsigned n)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *jobs = NULL;
	char *name;

	name = xstrdup(ds->name);
	if (datasets_delete(r->m, ds, n, &jobs, &eb)) {
		if (jobs)
			reply_err_with(r, &eb, "jobs", jobs);
		else
			req_error(r, &eb);
	} else {
		req_json(r, 200, json_pack("{s:s, s:o, s:b}", "name", name, "version",
					   n ? json_integer(n) : json_null(), "deleted", 1));
	}
	free(name);
}

static void h_dataset_delete(struct req *r)
{
	struct dataset *ds = path_dataset(r);

	if (ds)
		dataset_delete(r, ds, 0);
}

static void h_dataset_version_delete(struct req *r)
{
	struct dataset *ds = path_dataset(r);
	struct dataset_version *v = ds ? path_version(r, ds) : NULL;

	if (v)
		dataset_delete(r, ds, v->version);
}

/* ---- jobs ---- */

static void h_jobs_post(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct caller c = caller_of(r);
	json_t *body = body_json(r);
	struct job *j;
	bool again;

	if (!body)
		return;
	if (gitcode_wanted(body)) {
		/* the code is fetched and packed off the loop: answered later */
		gitcode_submit(r, body);
		json_decref(body);
		return;
	}
	if (jobs_submit(r->m, &c, body, &j, &again, &eb))
		req_error(r, &eb);
	else
		req_json(r, again ? 200 : 201, jobs_job_json(r->m, j, true));
	json_decref(body);
}

/* Whose whole documents a listing for c holds, as a key of the kept
 * listing: "*" every job's, "" none's, else the user and team whose. */
static void viewer_key(const struct master *m, const struct caller *c, struct strbuf *key)
{
	if (c->role == ROLE_ADMIN || (c->role == ROLE_USER && m->visibility_open))
		strbuf_addstr(key, "*");
	else if (c->role == ROLE_USER)
		strbuf_addf(key, "%s/%s", c->user, c->team ? c->team : "");
}

static bool jobs_list_cached(const struct master *m, int st, const char *user, uint64_t limit,
			     const char *viewer)
{
	return m->jobs_list && m->jobs_list_gen == m->jobs_gen && m->jobs_list_state == st &&
	       m->jobs_list_limit == limit && m->jobs_list_viewer && !strcmp(viewer, m->jobs_list_viewer) &&
	       (user ? m->jobs_list_user && !strcmp(user, m->jobs_list_user) : !m->jobs_list_user);
}

/* Whether a listing of the jobs in state st (-1: any) of user (NULL: any)
 * shows j (a slot may be empty). */
static bool listed(const struct job *j, int st, const char *user)
{
	return j && (st < 0 || (int)j->state == st) && (!user || !strcmp(user, j->user));
}

/* Appends the listing of the jobs in state st (-1: any) of user (NULL: any),
 * newest first, at most limit, as req_json would send it to c (whole the
 * jobs c may see whole). Returns whether it may be sent again until a job
 * changes (jobs_job_append). */
static bool jobs_list_make(struct master *m, int st, const char *user, uint64_t limit,
			   const struct caller *c, struct strbuf *sb)
{
	uint64_t n = 0;
	bool keep = true;

	strbuf_addstr(sb, "{\"jobs\":[");
	for (size_t i = m->njobs; i-- > 0 && n < limit;) {
		struct job *j = m->jobs[i];
		if (!listed(j, st, user))
			continue;
		if (n++)
			strbuf_addch(sb, ',');
		keep &= jobs_job_append(m, j, visibility_job(m, c, j), sb);
	}
	strbuf_addstr(sb, "]}\n");
	return keep;
}

/* The listing of view=summary (jobs_job_summary_json's of each job, the
 * same jobs as jobs_list_make's): a fifth of the full one's bytes, made
 * anew each time. */
static void jobs_list_summary(struct master *m, int st, const char *user, uint64_t limit,
			      struct strbuf *sb)
{
	json_t *jobs = json_array();
	uint64_t n = 0;

	for (size_t i = m->njobs; i-- > 0 && n < limit;) {
		struct job *j = m->jobs[i];
		if (!listed(j, st, user))
			continue;
		json_array_append_new(jobs, jobs_job_summary_json(j));
		n++;
	}
	json_t *doc = json_pack("{s:o}", "jobs", jobs);
	char *text = json_dumps(doc, JSON_COMPACT);
	strbuf_addstr(sb, text);
	strbuf_addch(sb, '\n');
	free(text);
	json_decref(doc);
}

/* GET /v1/jobs. Each job's document is kept as text until the job changes,
 * so making a listing is a run of copies; and the last listing is kept
 * whole until any job changes, so a flood of readers asking the same (with
 * the same view of whose jobs they see whole) costs one listing per change,
 * not one each. */
static void h_jobs_list(struct req *r)
{
	struct master *m = r->m;
	const char *state = req_query(r, "state"), *user = req_query(r, "user");
	const char *lim = req_query(r, "limit"), *view = req_query(r, "view");
	struct caller c = caller_of(r);
	uint64_t limit = 100;
	int st = -1;
	struct strbuf sb = STRBUF_INIT, viewer = STRBUF_INIT;

	if (state && (st = job_state_parse(state)) < 0) {
		reply_err(r, YERR(BAD_REQUEST), "state: '%s' is not a job state", state);
		return;
	}
	if (lim && (parse_u64_str(lim, &limit) || !limit)) {
		reply_err(r, YERR(BAD_REQUEST), "limit: expected an integer >= 1, got '%s'", lim);
		return;
	}
	if (view && !strcmp(view, "summary")) {
		jobs_list_summary(m, st, user, limit, &sb);
		req_strbuf(r, 200, "application/json", &sb);
		return;
	}
	if (view && strcmp(view, "full")) {
		reply_err(r, YERR(BAD_REQUEST), "view: '%s' is not a view (full, summary)", view);
		return;
	}
	viewer_key(m, &c, &viewer);
	if (jobs_list_cached(m, st, user, limit, viewer.buf)) {
#ifdef __SANITIZE_ADDRESS__
		/* sanitizer builds (the e2e suite's) check the kept listing */
		jobs_list_make(m, st, user, limit, &c, &sb);
		if (sb.len != m->jobs_list->len || memcmp(sb.buf, m->jobs_list->text, sb.len)) {
			fprintf(stderr, "yard master: the kept job listing is stale:\nkept %s\nnew  %s\n",
				m->jobs_list->text, sb.buf);
			abort();
		}
		strbuf_release(&sb);
#endif
		req_shared(r, 200, "application/json", m->jobs_list);
		goto out;
	}
	if (!jobs_list_make(m, st, user, limit, &c, &sb)) {
		/* true of this instant only: not for the next reader */
		req_strbuf(r, 200, "application/json", &sb);
		goto out;
	}
	shared_body_unref(m->jobs_list);
	m->jobs_list = shared_body_new(sb.buf, sb.len);
	m->jobs_list_state = st;
	free(m->jobs_list_user);
	m->jobs_list_user = user ? xstrdup(user) : NULL;
	free(m->jobs_list_viewer);
	m->jobs_list_viewer = strbuf_detach(&viewer, NULL);
	m->jobs_list_limit = limit;
	m->jobs_list_gen = m->jobs_gen;
	strbuf_release(&sb);
	req_shared(r, 200, "application/json", m->jobs_list);
out:
	strbuf_release(&viewer);
}

static void job_reply(struct req *r, struct job *j)
{
	struct caller c = caller_of(r);

	jobs_refresh_positions(r->m);
	/* the jobs ahead: in the one-job document, not in listings */
	json_t *d = jobs_job_json(r->m, j, visibility_job(r->m, &c, j));
	json_object_set_new(d, "ahead", jobs_ahead_json(r->m, j));
	/* and its history and GPU utilisation: in the one-job document too */
	json_object_set_new(d, "events", j->events ? json_deep_copy(j->events) : json_array());
	json_object_set_new(d, "gpu_util", gpuidle_job_json(j));
	req_json(r, 200, d);
}

/* GET /v1/jobs/{id}?state=S&wait=W: held while the job is still in state
 * S, up to W seconds (a long poll: yard submit --follow and yard wait
 * learn of a change when it happens, not a sleep later). */
static void h_job_get(struct req *r)
{
	const char *state = req_query(r, "state"), *wait = req_query(r, "wait");
	struct job *j = path_job(r);
	uint64_t w = 0;
	int s = -1;

	if (!j)
		return;
	struct errbuf eb = ERRBUF_INIT;
	if (wait && (parse_u64_str(wait, &w) || w > WORK_WAIT_MAX_S)) {
		error_field(&eb, YERR(BAD_REQUEST), "wait", "wait: expected seconds from 0 to %d, got '%.32s'",
			    WORK_WAIT_MAX_S, wait);
		req_error(r, &eb);
		return;
	}
	if (state && (s = job_state_parse(state)) < 0) {
		error_field(&eb, YERR(BAD_REQUEST), "state", "state: expected a job state, got '%.32s'", state);
		req_error(r, &eb);
		return;
	}
	if (w && s >= 0 && j->state == (enum job_state)s) {
		r->wait = WAIT_JOB;
		r->task_id = j->id;
		r->stream = s;
		r->deadline_ms = mono_ms() + w * 1000;
		return;
	}
	job_reply(r, j);
}

static int by_position(const void *a, const void *b)
{
	const struct job *x = *(struct job *const *)a, *y = *(struct job *const *)b;
	unsigned px = x->queue_position ? x->queue_position : UINT_MAX;
	unsigned py = y->queue_position ? y->queue_position : UINT_MAX;
	return px < py ? -1 : px > py ? 1 : (x->id > y->id) - (x->id < y->id);
}

/* GET /v1/queue: the answer is kept until the next scheduling pass, so a
 * flood of readers costs one ordering of the queue and one round of start
 * estimates (jobs_start_estimates) per pass, not one each
 * (a reader always sees its own submissions: one is answered after the
 * pass that took it in). It is written straight as text, the bytes
 * req_json would send: with submissions coming in, it is made again after
 * each pass, and a tree of JSON objects for every queued job was most of
 * that. */
static void h_queue(struct req *r)
{
	struct master *m = r->m;
	struct strbuf sb = STRBUF_INIT;
	struct job_start_estimate *est;
	struct job **q;
	size_t n;

	if (m->queue_cache && m->queue_cache_pass == m->sched_passes && !m->positions_stale) {
		req_shared(r, 200, "application/json", m->queue_cache);
		return;
	}
	jobs_refresh_positions(m);
	n = m->nqueue;
	q = xcalloc(n + 1, sizeof(*q));
	if (n) /* an empty queue may have no array at all */
		memcpy(q, r->m->queue, n * sizeof(*q));
	sort_array(q, n, sizeof(*q), by_position);
	/* when each would start: once per pass, like the rest of this answer */
	est = xcalloc(n + 1, sizeof(*est));
	jobs_start_estimates(m, q, n, est);
	strbuf_grow(&sb, n * 300);
	strbuf_addstr(&sb, "{\"queue\":[");
	for (size_t i = 0; i < n; i++) {
		struct job *j = q[i];
		bool first = true;
		strbuf_addf(&sb, "%s{\"id\":%" PRIu64 ",\"name\":", i ? "," : "", j->id);
		http_json_string(&sb, j->name);
		strbuf_addstr(&sb, ",\"user\":");
		http_json_string(&sb, j->user);
		if (j->queue_position)
			strbuf_addf(&sb, ",\"position\":%u,\"ahead_count\":%u,\"ahead\":[",
				    j->queue_position, j->queue_position - 1);
		else
			strbuf_addstr(&sb, ",\"position\":null,\"ahead_count\":null,\"ahead\":[");
		/* the jobs just ahead (q is in position order), nearest last */
		for (size_t k = i > JOBS_AHEAD_SHOWN ? i - JOBS_AHEAD_SHOWN : 0; k < i; k++)
			if (q[k]->queue_position) {
				strbuf_addf(&sb, "%s%" PRIu64, first ? "" : ",", q[k]->id);
				first = false;
			}
		if (j->queue_position || j->blocked) { /* blocked: held or after (control.h) */
			strbuf_addstr(&sb, "],\"reason\":{\"code\":");
			http_json_string(&sb, j->wait_code);
			strbuf_addstr(&sb, ",\"message\":");
			http_json_string(&sb, j->wait_msg ? j->wait_msg : "");
			strbuf_addstr(&sb, "}");
		} else {
			strbuf_addstr(&sb, "],\"reason\":null");
		}
		if (est[i].at_us) {
			strbuf_addf(&sb, ",\"start_estimate\":%" PRIu64 ",\"start_estimate_reason\":null}",
				    est[i].at_us);
		} else {
			strbuf_addstr(&sb, ",\"start_estimate\":null,\"start_estimate_reason\":");
			http_json_string(&sb, est[i].reason);
			strbuf_addstr(&sb, "}");
		}
	}
	strbuf_addstr(&sb, "]}\n"); /* newline-terminated, as req_json's */
	free(q);
	free(est);
#ifdef __SANITIZE_ADDRESS__
	{
		/* sanitizer builds (the e2e suite's) check that the text is what
		 * jansson writes: it reads back and dumps to the same bytes */
		json_t *doc = json_loads(sb.buf, 0, NULL);
		char *again = doc ? json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
		if (!again || strlen(again) != sb.len - 1 || memcmp(again, sb.buf, sb.len - 1)) {
			fprintf(stderr, "yard master: GET /v1/queue is not jansson's text:\n%s\n%s\n",
				sb.buf, again ? again : "(unreadable)");
			abort();
		}
		free(again);
		json_decref(doc);
	}
#endif
	shared_body_unref(m->queue_cache);
	m->queue_cache = shared_body_new(sb.buf, sb.len);
	m->queue_cache_pass = m->sched_passes;
	strbuf_release(&sb);
	req_shared(r, 200, "application/json", m->queue_cache);
}

static void h_nodes(struct req *r)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < r->m->nnodes; i++)
		json_array_append_new(arr, jobs_node_json(r->m, r->m->nodes[i]));
	req_json(r, 200, json_pack("{s:o, s:o}", "nodes", arr, "gpu_util", gpuidle_cluster_json(r->m)));
}

/* The node an admin's node route names. */
static struct node *path_node(struct req *r)
{
	struct node *n = core_node(r->m, r->cap[0]);

	if (!n)
		reply_err(r, YERR(NOT_FOUND), "no node '%s'", r->cap[0]);
	return n;
}

/* The longest drain reason kept: a sentence, not a document. */
#define DRAIN_REASON_MAX 256

/* Whether v is a drain reason: a string of 1 to DRAIN_REASON_MAX bytes with
 * no control characters (it is shown on one line of `yard nodes`). */
static bool drain_reason_ok(const json_t *v)
{
	const char *p = json_string_value(v);
	size_t len = json_string_length(v);

	if (!p || !len || len > DRAIN_REASON_MAX || strlen(p) != len)
		return false;
	for (; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

/* POST /v1/nodes/{name}/drain, body {"reason": TEXT} or none. */
static void h_drain(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct node *n = path_node(r);
	const json_t *reason;
	json_t *body = NULL;

	if (!n)
		return;
	if (r->body.len && !(body = body_json(r)))
		return;
	reason = json_object_get(body, "reason");
	if (reason && !json_is_null(reason) && !drain_reason_ok(reason)) {
		error_field(&eb, YERR(BAD_REQUEST), "reason",
			    "reason: expected a string of 1 to %d characters on one line",
			    DRAIN_REASON_MAX);
		req_error(r, &eb);
	} else {
		nodes_drain(r->m, n, json_string_value(reason), r->user);
		req_json(r, 200, jobs_node_json(r->m, n));
	}
	json_decref(body);
}

static void h_resume(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct node *n = path_node(r);

	if (!n)
		return;
	if (nodes_resume(r->m, n, &eb))
		req_error(r, &eb);
	else
		req_json(r, 200, jobs_node_json(r->m, n));
}

static void h_node_delete(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct node *n = path_node(r);
	char *name;

	if (!n)
		return;
	name = xstrdup(n->name);
	if (nodes_remove(r->m, n, &eb))
		req_error(r, &eb);
	else
		req_json(r, 200, json_pack("{s:s, s:b}", "name", name, "removed", 1));
	free(name);
}

static void h_metrics(struct req *r)
{
	struct strbuf sb = STRBUF_INIT;

	prom_render(r->m, &sb);
	req_text(r, 200, "text/plain; version=0.0.4", sb.buf, sb.len);
	strbuf_release(&sb);
}

/* ---- agents ---- */

static void h_agents(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *body = body_json(r);
	struct node *n;
	char *tok;

	if (!body)
		return;
	if (nodes_register(r->m, body, &n, &tok, &eb)) {
		req_error(r, &eb);
	} else {
		req_json(r, 200, json_pack("{s:s, s:s, s:i}", "id", n->name, "token", tok, "lease_ms",
					   (int)r->m->lease_ms));
		free(tok);
	}
	json_decref(body);
}

static void h_work(struct req *r)
{
	const char *rev = req_query(r, "rev"), *wait = req_query(r, "wait");
	struct node *n = path_agent_node(r);
	uint64_t w = 0;

	if (!n)
		return;
	r->rev = UINT64_MAX;
	if ((rev && parse_u64_str(rev, &r->rev)) || (wait && parse_u64_str(wait, &w))) {
		reply_err(r, YERR(BAD_REQUEST), "rev and wait: expected integers >= 0");
		return;
	}
	if (w > WORK_WAIT_MAX_S)
		w = WORK_WAIT_MAX_S;
	nodes_touch(r->m, n);
	nodes_apply_event(r->m, n, NODE_EV_HEARTBEAT); /* a lost node is back */
	if (r->rev == n->rev && w) {
		r->wait = WAIT_WORK;
		r->deadline_ms = mono_ms() + w * 1000;
		return;
	}
	req_json(r, 200, jobs_work_json(r->m, n));
}

static void h_status(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct node *n = path_agent_node(r);
	json_t *body, *reply;

	if (!n || !(body = body_json(r)))
		return;
	nodes_apply_event(r->m, n, NODE_EV_HEARTBEAT); /* a lost node is back */
	reply = json_pack("{s:b}", "ok", 1);
	if (nodes_status(r->m, n, body, reply, &eb)) {
		req_error(r, &eb);
		json_decref(reply);
	} else {
		req_json(r, 200, reply);
	}
	json_decref(body);
}

struct task *path_agent_task(struct req *r)
{
	uint64_t id;
	struct task *t = NULL;

	if (!parse_u64_str(r->cap[0], &id))
		t = core_task(r->m, id);
	if (!t)
		reply_err(r, YERR(NOT_FOUND), "no task '%s'", r->cap[0]);
	return t;
}

/* The routes that append by offset: their stream and offset parameters. */
static int stream_offset_params(struct req *r, int *stream, uint64_t *offset)
{
	const char *s = req_query(r, "stream"), *off = req_query(r, "offset");
	*stream = logs_stream_parse(s);
	if (*stream < 0 || !off || parse_u64_str(off, offset)) {
		reply_err(r, YERR(BAD_REQUEST), "stream and offset: expected stdout|stderr and an integer");
		return -1;
	}
	return 0;
}

/* Their reply: rc 0 or YERR(CONFLICT) (409, the agent resends from what the
 * master holds) says `key` = have; anything else is the error in eb. */
static void reply_appended(struct req *r, int rc, const struct errbuf *eb, const char *key,
			   uint64_t have)
{
	if (rc == YERR(CONFLICT)) {
		req_json(r, 409, json_pack("{s:o, s:I}", "error", http_error_json(eb), key, (json_int_t)have));
	} else if (rc) {
		req_error(r, eb);
	} else {
		req_json(r, 200, json_pack("{s:I}", key, (json_int_t)have));
	}
}

static void h_task_log(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct task *t = path_agent_task(r);
	uint64_t offset = 0, have = 0;
	int s;

	if (!t)
		return;
	if (stream_offset_params(r, &s, &offset))
		return;
	int rc = logs_append(r->m, t, s, offset, r->body.buf, r->body.len, &have, &eb);
	reply_appended(r, rc, &eb, "size", have);
}

static void h_task_log_size(struct req *r)
{
	struct task *t = path_agent_task(r);

	if (t)
		req_json(r, 200, json_pack("{s:I, s:I}", "stdout",
					   (json_int_t)logs_size(r->m, t, LOG_STDOUT), "stderr",
					   (json_int_t)logs_size(r->m, t, LOG_STDERR)));
}

static void h_exec_post(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job *j = path_job(r);
	struct exec *e;
	json_t *body;

	if (!j || !(body = body_json(r)))
		return;
	if (execs_create(r->m, j, json_string_value(json_object_get(body, "host")),
			 json_object_get(body, "argv"), &e, &eb)) {
		req_error(r, &eb);
	} else {
		struct task *t = core_task(r->m, e->task_id);
		json_t *d = execs_json(e);
		json_object_set_new(d, "node", json_string(t->node));
		json_object_set_new(d, "task_name", json_sprintf("%s/%u", t->role, t->index));
		req_json(r, 201, d);
	}
	json_decref(body);
}

static void h_exec_get(struct req *r)
{
	const char *wait = req_query(r, "wait");
	struct job *j = path_job(r);
	uint64_t id = 0, w = 0;
	struct exec *e;

	if (!j)
		return;
	if (parse_u64_str(r->cap[1], &id) || !(e = execs_find(r->m, id)) || e->job_id != j->id) {
		reply_err(r, YERR(NOT_FOUND), "job %" PRIu64 " has no exec '%s'", j->id, r->cap[1]);
		return;
	}
	if (wait && parse_u64_str(wait, &w)) {
		reply_err(r, YERR(BAD_REQUEST), "wait: expected seconds >= 0");
		return;
	}
	if (w > WORK_WAIT_MAX_S)
		w = WORK_WAIT_MAX_S;
	if (!execs_settle(r->m, e) && w) {
		r->wait = WAIT_EXEC;
		r->task_id = e->id;
		r->deadline_ms = mono_ms() + w * 1000;
		return;
	}
	req_json(r, 200, execs_json(e));
}

/* ---- training metrics (src/master/metrics.h) ---- */

static void h_task_metrics(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	struct task *t = path_agent_task(r);
	uint64_t offset = 0, stored = 0;
	json_t *body;
	int s, rc;

	if (!t)
		return;
	if (stream_offset_params(r, &s, &offset) || !(body = body_json(r)))
		return;
	rc = metrics_post(r->m, t, s, offset, body, &stored, &eb);
	reply_appended(r, rc, &eb, "offset", stored);
	json_decref(body);
}

static void h_job_metrics(struct req *r)
{
	const char *task = req_query(r, "task"), *name = req_query(r, "name");
	struct errbuf eb = ERRBUF_INIT;
	struct strbuf doc = STRBUF_INIT;
	struct job *j = path_job(r);
	char *role = NULL;
	uint64_t idx = 0;

	if (!j)
		return;
	if (task) {
		const char *slash = strrchr(task, '/');
		if (!slash || parse_u64_str(slash + 1, &idx) || idx > UINT_MAX) {
			reply_err(r, YERR(BAD_REQUEST), "task: expected ROLE/INDEX, got '%s'", task);
			return;
		}
		role = xstrndup(task, (size_t)(slash - task));
		if (!jobs_current_task(j, role, (unsigned)idx)) {
			reply_err(r, YERR(NOT_FOUND), "job %" PRIu64 " has no task '%s'", j->id, task);
			free(role);
			return;
		}
	}
	if (metrics_job_doc(r->m, j, role, (unsigned)idx, name, &doc, &eb)) {
		req_error(r, &eb);
	} else {
		size_t len;
		char *text = strbuf_detach(&doc, &len);
		struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
		MHD_add_response_header(resp, "Content-Type", "application/json");
		req_set_response(r, 200, resp);
	}
	strbuf_release(&doc);
	free(role);
}

bool api_poll_ready(struct req *r, uint64_t now_ms)
{
	if (r->wait == WAIT_EXEC) {
		struct exec *e = execs_find(r->m, r->task_id);
		if (!e) {
			reply_err(r, YERR(NOT_FOUND), "exec %" PRIu64 " is gone", r->task_id);
			return true;
		}
		if (!execs_settle(r->m, e) && now_ms < r->deadline_ms)
			return false;
		req_json(r, 200, execs_json(e));
		return true;
	}
	if (r->wait == WAIT_WORK) {
		struct node *n = core_node(r->m, r->cap[0]);
		if (!n) {
			reply_err(r, YERR(NOT_FOUND), "no node '%s'", r->cap[0]);
			return true;
		}
		/* a held poll is a live agent */
		nodes_touch(r->m, n);
		if (n->rev == r->rev && now_ms < r->deadline_ms)
			return false;
		req_json(r, 200, jobs_work_json(r->m, n));
		return true;
	}
	if (r->wait == WAIT_LOGS)
		return api_logs_poll(r, now_ms);
	if (r->wait == WAIT_JOB) {
		struct job *j = core_job(r->m, r->task_id);
		if (!j) {
			reply_err(r, YERR(NOT_FOUND), "job %" PRIu64 " is gone", r->task_id);
			return true;
		}
		if (j->state == (enum job_state)r->stream && now_ms < r->deadline_ms)
			return false;
		job_reply(r, j);
		return true;
	}
	if (r->wait == WAIT_HANDLER)
		return !r->ready || r->ready(r);
	return true;
}

/* ---- the table ---- */

static const struct route routes[] = {
	{ "GET", "/healthz", h_healthz, PERM_PUBLIC, SCOPE_CLUSTER, ROUTE_ANY_ROLE, BODY_NONE,
	  "liveness and role: {\"ok\": true, \"role\": \"leader\"|\"standby\", \"leader\": URL, \"epoch\": N}" },
	{ "GET", "/metrics", h_metrics, PERM_READ, SCOPE_CLUSTER, 0, BODY_NONE, "Prometheus metrics: jobs, queue and waits, nodes, GPUs by pool and team, scheduler and store timings" },
	{ "GET", "/v1/whoami", h_whoami, PERM_READ, SCOPE_CLUSTER, 0, BODY_NONE, "the caller's user and role" },
	{ "POST", "/v1/tokens", h_tokens, PERM_ADMIN, SCOPE_CLUSTER, ROUTE_AUDIT, BODY_JSON, "create a user (or admin) token (expires: seconds or a duration)" },
	{ "GET", "/v1/tokens", h_tokens_list, PERM_USER, SCOPE_CLUSTER, 0, BODY_NONE, "list tokens by id, never their text (users: their own; admins: all)" },
	{ "DELETE", "/v1/tokens/{id}", h_token_revoke, PERM_USER, SCOPE_TOKEN, ROUTE_AUDIT, BODY_NONE, "revoke a token by id (its own user or admin); refused from its next request" },
	{ "POST", "/v1/admin/reload", h_admin_reload, PERM_ADMIN, SCOPE_CLUSTER, ROUTE_AUDIT, BODY_NONE, "read the master's config file again: apply the reloadable keys that changed, name those that need a restart" },
	{ "GET", "/v1/audit", h_audit, PERM_ADMIN, SCOPE_CLUSTER, 0, BODY_NONE, "the audit log of state-changing requests, newest first (user, since, limit)" },
	{ "POST", "/v1/code", h_code_put, PERM_USER, SCOPE_CLUSTER, 0, BODY_CODE, "upload a job's code (tar.gz, max 256 MiB), content-addressed" },
	{ "GET", "/v1/code/{digest}", h_code_get, PERM_READ, SCOPE_CODE, 0, BODY_NONE, "download code by sha256:HEX digest" },
	{ "POST", "/v1/blobs/missing", h_blobs_missing, PERM_READ, SCOPE_CLUSTER, 0, BODY_JSON, "which of the given chunk digests the master does not hold" },
	{ "PUT", "/v1/blobs/{digest}", h_blob_put, PERM_READ, SCOPE_CLUSTER, 0, BODY_BLOB, "upload a chunk (max 8 MiB) of a dataset, outputs or a checkpoint, checked against its sha256 digest" },
	{ "GET", "/v1/blobs/{digest}", h_blob_get, PERM_READ, SCOPE_CLUSTER, 0, BODY_NONE, "download a chunk" },
	{ "POST", "/v1/datasets", h_datasets_post, PERM_USER, SCOPE_CLUSTER, ROUTE_AUDIT, BODY_MANIFEST, "make a dataset version from a manifest of held chunks (body up to 64 MiB)" },
	{ "GET", "/v1/datasets", h_datasets_list, PERM_READ, SCOPE_CLUSTER, 0, BODY_NONE, "list datasets with their latest version" },
	{ "GET", "/v1/datasets/{name}", h_dataset_get, PERM_READ, SCOPE_CLUSTER, 0, BODY_NONE, "a dataset with its versions" },
	{ "GET", "/v1/datasets/{name}/{n}", h_dataset_version_get, PERM_READ, SCOPE_DATASET, 0, BODY_NONE, "one version of a dataset with its manifest" },
	{ "DELETE", "/v1/datasets/{name}", h_dataset_delete, PERM_USER, SCOPE_DATASET, ROUTE_AUDIT, BODY_NONE, "delete a dataset (its team or admin; 409 in_use while a live job uses it)" },
	{ "DELETE", "/v1/datasets/{name}/{n}", h_dataset_version_delete, PERM_USER, SCOPE_DATASET, ROUTE_AUDIT, BODY_NONE, "delete one version of a dataset (its team or admin)" },
	{ "GET", "/v1/manifests/{digest}", h_manifest_get, PERM_READ, SCOPE_MANIFEST, 0, BODY_NONE, "a manifest by digest: a dataset version's, a task's outputs, a job's checkpoint (agents stage from it)" },
	{ "POST", "/v1/experiments", h_experiments_post, PERM_USER, SCOPE_CLUSTER, ROUTE_AUDIT, BODY_JSON, "submit a sweep (a spec with a sweep section) as an experiment; 201 once its first trial is durable" },
	{ "GET", "/v1/experiments", h_experiments_list, PERM_USER, SCOPE_CLUSTER, 0, BODY_NONE, "list the experiments the caller may see, newest first" },
	{ "GET", "/v1/experiments/{id}", h_experiment_get, PERM_USER, SCOPE_EXPERIMENT, 0, BODY_NONE, "one experiment with its trials, best objective first" },
	{ "POST", "/v1/experiments/{id}/cancel", h_experiment_cancel, PERM_USER, SCOPE_EXPERIMENT, ROUTE_AUDIT, BODY_NONE, "cancel an experiment: its live trials, and no more (its owner, its team or an admin)" },
	{ "POST", "/v1/templates", h_templates_post, PERM_USER, SCOPE_CLUSTER, ROUTE_AUDIT, BODY_JSON, "make a job template that runs again on each new version of a dataset, or on each push to its repository's branches" },
	{ "GET", "/v1/templates", h_templates_list, PERM_USER, SCOPE_CLUSTER, 0, BODY_NONE, "list the templates the caller may see" },
	{ "GET", "/v1/templates/{name}", h_template_get, PERM_USER, SCOPE_TEMPLATE, 0, BODY_NONE, "one template with its runs" },
	{ "DELETE", "/v1/templates/{name}", h_template_delete, PERM_USER, SCOPE_TEMPLATE, ROUTE_AUDIT, BODY_NONE, "delete a template (its jobs stay)" },
	{ "POST", "/v1/hooks/git", h_hook_git, PERM_HOOK, SCOPE_CLUSTER, ROUTE_AUDIT, BODY_JSON, "a git server's push notification (GitHub, Gitea, Gogs), signed with the master's git-hook-secret-file: the templates on that repository and branch run or build at the pushed commit" },
	{ "POST", "/v1/jobs", h_jobs_post, PERM_USER, SCOPE_CLUSTER, ROUTE_AUDIT, BODY_JSON, "submit a job; 201 once it is durable" },
	{ "GET", "/v1/jobs", h_jobs_list, PERM_READ, SCOPE_CLUSTER, 0, BODY_NONE, "list jobs, newest first (state, user, limit)" },
	{ "GET", "/v1/jobs/{id}", h_job_get, PERM_READ, SCOPE_CLUSTER, 0, BODY_NONE, "one job with its tasks; state=S&wait=W holds the reply while it is still in state S (W <= 30 s)" },
	{ "POST", "/v1/jobs/{id}/cancel", h_job_cancel, PERM_USER, SCOPE_JOB, ROUTE_AUDIT, BODY_NONE, "cancel a job (its owner, its team or an admin)" },
	{ "POST", "/v1/jobs/{id}/hold", h_job_hold, PERM_USER, SCOPE_JOB, ROUTE_AUDIT, BODY_NONE, "hold a queued job: it stays queued, never started, until released (its owner, its team or an admin)" },
	{ "POST", "/v1/jobs/{id}/release", h_job_release, PERM_USER, SCOPE_JOB, ROUTE_AUDIT, BODY_NONE, "release a held job (409 when not held)" },
	{ "POST", "/v1/jobs/{id}", h_job_update, PERM_USER, SCOPE_JOB, ROUTE_AUDIT, BODY_JSON, "change a job's priority, {\"priority\": \"low\", \"normal\" or \"high\"} (its owner, its team or an admin)" },
	{ "GET", "/v1/jobs/{id}/logs", h_job_logs, PERM_READ, SCOPE_JOB, 0, BODY_NONE, "a task's log bytes, of any attempt (task, attempt, stream, offset, limit, follow)" },
	{ "POST", "/v1/jobs/{id}/exec", h_exec_post, PERM_JOB, SCOPE_JOB, ROUTE_AUDIT, BODY_JSON, "start a process in the job's task on a host (job token, its owner, its team or an admin)" },
	{ "GET", "/v1/jobs/{id}/attach", h_attach_session, PERM_JOB, SCOPE_JOB, ROUTE_AUDIT | ROUTE_COOKIE, BODY_NONE, "a WebSocket (yard.exec.v1) to the terminal of an interactive job's running task (task, cols, rows), shared with its other attachers: as a job's logs, its owner, its team, an admin or its job token" },
	{ "GET", "/v1/jobs/{id}/exec", h_exec_session, PERM_JOB, SCOPE_JOB, ROUTE_AUDIT | ROUTE_COOKIE, BODY_NONE, "a WebSocket (yard.exec.v1) to a command run in a running task (task, cmd, tty, stdin, cols, rows): as a job's logs, its owner, its team, an admin or its job token" },
	{ "GET", "/v1/jobs/{id}/exec/{eid}", h_exec_get, PERM_JOB, SCOPE_JOB, 0, BODY_NONE, "an exec's state; wait=S holds until it exits" },
	{ "GET", "/v1/jobs/{id}/portforward", h_portforward_session, PERM_JOB, SCOPE_JOB, ROUTE_AUDIT | ROUTE_COOKIE, BODY_NONE, "a WebSocket (yard.port.v1) to a TCP connection to 127.0.0.1:port in the node of a running task (task, port): as an exec" },
	{ "GET", "/v1/jobs/{id}/proxy/{path}", proxy_handle, PERM_JOB, SCOPE_JOB, ROUTE_AUDIT | ROUTE_COOKIE, BODY_STREAM, "HTTP to 127.0.0.1:PORT in a running task's node, {path} ROLE/INDEX/PORT/REST, the target passed on whole; a WebSocket upgrade too; HEAD as GET. As an exec; GET and HEAD that get an answer are not audited" },
	{ "POST", "/v1/jobs/{id}/proxy/{path}", proxy_handle, PERM_JOB, SCOPE_JOB, ROUTE_AUDIT | ROUTE_COOKIE, BODY_STREAM, "as GET, the body (with its Content-Length) streamed upstream" },
	{ "PUT", "/v1/jobs/{id}/proxy/{path}", proxy_handle, PERM_JOB, SCOPE_JOB, ROUTE_AUDIT | ROUTE_COOKIE, BODY_STREAM, "as POST" },
	{ "PATCH", "/v1/jobs/{id}/proxy/{path}", proxy_handle, PERM_JOB, SCOPE_JOB, ROUTE_AUDIT | ROUTE_COOKIE, BODY_STREAM, "as POST" },
	{ "DELETE", "/v1/jobs/{id}/proxy/{path}", proxy_handle, PERM_JOB, SCOPE_JOB, ROUTE_AUDIT | ROUTE_COOKIE, BODY_STREAM, "as POST" },
	{ "GET", "/v1/jobs/{id}/outputs", h_job_outputs, PERM_READ, SCOPE_JOB, 0, BODY_NONE, "the outputs and checkpoint manifests of a job's tasks, every attempt (task, attempt)" },
	{ "GET", "/v1/jobs/{id}/metrics", h_job_metrics, PERM_READ, SCOPE_JOB, 0, BODY_NONE, "training metric series of a job's tasks (task, name)" },
	{ "GET", "/v1/usage", h_usage, PERM_USER, SCOPE_CLUSTER, 0, BODY_NONE, "GPU-seconds, CPU-seconds and peak memory of the tasks of the jobs the caller sees whole (by, since, step)" },
	{ "GET", "/v1/images/stored", h_image_stored, PERM_AGENT, SCOPE_CLUSTER, 0, BODY_NONE, "the manifest of an image built from jobs' code kept in the master's store (store-images), by its name (tag); agents load it from there" },
	{ "GET", "/v1/images", h_images, PERM_READ, SCOPE_CLUSTER, 0, BODY_NONE, "the images built from jobs' code that their tasks ran in, one entry each (size, repository and commit, the job that built it, the jobs that used it), from the jobs the caller may see" },
	{ "GET", "/v1/queue", h_queue, PERM_READ, SCOPE_CLUSTER, 0, BODY_NONE, "queued jobs with position, reason and start estimate" },
	{ "GET", "/v1/nodes", h_nodes, PERM_READ, SCOPE_CLUSTER, 0, BODY_NONE, "nodes with their GPUs, runtimes and free resources" },
	{ "POST", "/v1/nodes/{name}/drain", h_drain, PERM_ADMIN, SCOPE_CLUSTER, ROUTE_AUDIT, BODY_JSON, "drain a node: no new tasks until resumed, through lease lapses and restarts (body: optional reason)" },
	{ "POST", "/v1/nodes/{name}/resume", h_resume, PERM_ADMIN, SCOPE_CLUSTER, ROUTE_AUDIT, BODY_NONE, "undo a drain: the node takes new tasks again (409 when not drained)" },
	{ "GET", "/v1/provisioners", h_provisioners, PERM_READ, SCOPE_CLUSTER, 0, BODY_NONE, "the provisioned pools (elastic capacity): bounds, shape, nodes by state, requests under way" },
	{ "DELETE", "/v1/nodes/{name}", h_node_delete, PERM_ADMIN, SCOPE_CLUSTER, ROUTE_AUDIT, BODY_NONE, "remove a lost node for good (409 while it is live or holds tasks); its name may join again" },
	{ "POST", "/v1/agents", h_agents, PERM_JOIN, SCOPE_CLUSTER, ROUTE_AUDIT, BODY_JSON, "register an agent (join token) with its resources and runtimes; returns its agent token" },
	{ "GET", "/v1/agents/{id}/work", h_work, PERM_AGENT, SCOPE_NODE, 0, BODY_NONE, "long poll for the node's desired state (rev, wait)" },
	{ "GET", "/v1/agents/{id}/sessions/{sid}", h_agent_session, PERM_AGENT, SCOPE_NODE, 0, BODY_NONE, "the agent's leg of a session of its node (Upgrade: yard-session/1), spliced to the client's" },
	{ "POST", "/v1/agents/{id}/status", h_status, PERM_AGENT, SCOPE_NODE, 0, BODY_JSON, "report task states; renews the lease" },
	{ "POST", "/v1/tasks/{id}/log", h_task_log, PERM_AGENT, SCOPE_TASK, 0, BODY_LOG, "append log bytes idempotently by offset (stream, offset)" },
	{ "POST", "/v1/tasks/{id}/checkpoint", h_task_checkpoint, PERM_AGENT, SCOPE_TASK, 0, BODY_MANIFEST, "a task's checkpoint dir as it ended, a manifest of held chunks; the job's restarts start from it" },
	{ "POST", "/v1/tasks/{id}/image", h_task_image, PERM_AGENT, SCOPE_TASK, 0, BODY_MANIFEST, "the image a task's node built (tag), saved by its engine, as a manifest of held chunks, kept for the other nodes to load (store-images)" },
	{ "POST", "/v1/tasks/{id}/outputs", h_task_outputs, PERM_AGENT, SCOPE_TASK, 0, BODY_MANIFEST, "a task's YARD_OUTPUT_DIR as it ended, a manifest of held chunks, kept per attempt" },
	{ "GET", "/v1/tasks/{id}/log/size", h_task_log_size, PERM_AGENT, SCOPE_TASK, 0, BODY_NONE, "bytes of each stream the master holds" },
	{ "POST", "/v1/tasks/{id}/metrics", h_task_metrics, PERM_AGENT, SCOPE_TASK, 0, BODY_METRICS, "store a batch of metric points idempotently by offset (stream, offset)" },
};

const char *scope_name(enum scope s)
{
	static const char *const names[] = { "cluster", "job", "dataset", "code", "manifest", "node",
					     "task", "token", "experiment", "template" };
	static_assert(ARRAY_SIZE(names) == SCOPE__COUNT, "scope names must mirror enum scope");
	return (unsigned)s < SCOPE__COUNT ? names[s] : "?";
}

const struct route *api_routes(size_t *n)
{
	*n = ARRAY_SIZE(routes);
	return routes;
}

/* matches path against pattern; caps get copies of {x} segments ({path},
 * the last of a pattern, takes the rest of the path, slashes and all) */
static bool match(const char *pattern, const char *path, char *caps[2])
{
	const char *p = pattern, *s = path;
	int ncap = 0;
	char *got[2] = { NULL, NULL };

	while (*p && *s) {
		if (*p == '{') {
			const char *pe = strchr(p, '}');
			const char *se = strncmp(p, "{path}", 6) || p[6] ? strchr(s, '/') : NULL;
			size_t len = se ? (size_t)(se - s) : strlen(s);
			if (!pe || !len || ncap >= 2)
				goto no;
			got[ncap++] = xstrndup(s, len);
			p = pe + 1;
			s += len;
			continue;
		}
		if (*p != *s)
			goto no;
		p++;
		s++;
	}
	if (*p || *s)
		goto no;
	caps[0] = got[0];
	caps[1] = got[1];
	return true;
no:
	free(got[0]);
	free(got[1]);
	return false;
}

const struct route *api_match(const char *method, const char *path, char *caps[2],
			      bool *path_known)
{
	*path_known = false;
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
		char *c[2] = { NULL, NULL };
		if (!match(routes[i].pattern, path, c))
			continue;
		/* HEAD is GET without the body (MHD leaves it out) */
		if (!strcmp(routes[i].method, method) ||
		    (!strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET"))) {
			caps[0] = c[0];
			caps[1] = c[1];
			return &routes[i];
		}
		*path_known = true;
		free(c[0]);
		free(c[1]);
	}
	return NULL;
}
