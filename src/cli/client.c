#include "base/compat.h"
#include "cli/client.h"

#include "base/crypto.h"
#include "base/fsutil.h"
#include <errno.h>
#include <string.h>
#include "base/parse.h"
#include "base/xalloc.h"

/* Plain requests get this long; a follow request is held up to 20 s by the master. */
#define REQUEST_TIMEOUT_MS 60000L
/* Answers 429 (over the token's rate limit) waited out before one is shown. */
#define CLIENT_RETRY_429 5
/* A submission is sent again (with its idempotency key) for this long
 * while no master answers or none leads: a standby takes over in seconds. */
#define SUBMIT_RETRY_MS 30000
/* A 256 MiB code upload over a slow link may take a while. */
#define UPLOAD_TIMEOUT_MS 1800000L

void client_open(struct client *c, const char *base_url, const struct httpc_tls *tls,
		 const char *token)
{
	httpc_init(&c->http, base_url, tls, token);
	c->http.timeout_ms = REQUEST_TIMEOUT_MS;
	c->http.retry_429 = CLIENT_RETRY_429;
}

void client_close(struct client *c)
{
	httpc_release(&c->http);
}

static int get_json(struct client *c, const char *method, const char *path, json_t *body,
		    json_t **out, struct errbuf *eb)
{
	int ret;
	c->http.timeout_ms = REQUEST_TIMEOUT_MS;
	ret = httpc_json(&c->http, method, path, body, out, NULL, eb);
	if (ret && out && *out) {
		json_decref(*out);
		*out = NULL;
	}
	return ret;
}

int client_whoami(struct client *c, json_t **out, struct errbuf *eb)
{
	return get_json(c, "GET", "/v1/whoami", NULL, out, eb);
}

int client_code_upload(struct client *c, const void *data, size_t len, char **digest,
		       json_t **out, struct errbuf *eb)
{
	struct httpc_response res;
	json_t *doc = NULL;
	json_error_t jerr;
	const char *d;
	int ret;

	*digest = NULL;
	if (out)
		*out = NULL;
	httpc_response_init(&res);
	c->http.timeout_ms = UPLOAD_TIMEOUT_MS;
	ret = httpc_request(&c->http, "POST", "/v1/code", data, len, "application/gzip", &res, eb);
	c->http.timeout_ms = REQUEST_TIMEOUT_MS;
	if (ret)
		goto out;
	if (res.status >= 400) {
		ret = httpc_error_from_reply(&res, eb);
		goto out;
	}
	doc = json_loadb(res.body.buf, res.body.len, 0, &jerr);
	d = doc ? json_string_value(json_object_get(doc, "digest")) : NULL;
	if (!d || strncmp(d, "sha256:", 7)) {
		ret = error(eb, YERR(INTERNAL), "the master's reply to 'POST /v1/code' has no digest");
		goto out;
	}
	*digest = xstrdup(d);
	if (out) {
		*out = doc;
		doc = NULL;
	}
out:
	json_decref(doc);
	httpc_response_release(&res);
	return ret;
}

int client_submit(struct client *c, json_t *spec, const char *code, json_t **out,
		  struct errbuf *eb)
{
	json_t *body = json_object();
	char key[33];
	int ret;

	/* one key for every try: a submission whose reply was lost (a master
	 * failing over, a connection reset) is answered with the job it made */
	random_hex(key, 16);
	json_object_set(body, "spec", spec);
	if (code)
		json_object_set_new(body, "code", json_string(code));
	json_object_set_new(body, "idempotency_key", json_string(key));
	/* code from git: the master fetches and packs it before it answers,
	 * which may take as long as an upload */
	if (json_object_get(spec, "code"))
		c->http.timeout_ms = UPLOAD_TIMEOUT_MS;
	for (unsigned waited = 0, ms = 100;; waited += ms, ms = ms < 1000 ? 2 * ms : ms) {
		ret = get_json(c, "POST", json_object_get(spec, "sweep") ? "/v1/experiments" : "/v1/jobs",
			       body, out, eb);
		if ((ret != YERR(UNAVAILABLE) && ret != YERR(NOT_LEADER)) || waited >= SUBMIT_RETRY_MS)
			break;
		errbuf_reset(eb);
		usleep(ms * 1000);
	}
	c->http.timeout_ms = REQUEST_TIMEOUT_MS;
	json_decref(body);
	return ret;
}

int client_experiments(struct client *c, json_t **out, struct errbuf *eb)
{
	return get_json(c, "GET", "/v1/experiments", NULL, out, eb);
}

int client_experiment(struct client *c, uint64_t id, bool cancel, json_t **out, struct errbuf *eb)
{
	char path[80];
	snprintf(path, sizeof(path), "/v1/experiments/%" PRIu64 "%s", id, cancel ? "/cancel" : "");
	return get_json(c, cancel ? "POST" : "GET", path, NULL, out, eb);
}

int client_job_get(struct client *c, uint64_t id, json_t **out, struct errbuf *eb)
{
	char path[64];
	snprintf(path, sizeof(path), "/v1/jobs/%" PRIu64, id);
	return get_json(c, "GET", path, NULL, out, eb);
}

int client_job_wait(struct client *c, uint64_t id, const char *state, unsigned wait_s, json_t **out,
		    struct errbuf *eb)
{
	char *esc = url_escape(state);
	char *path = xasprintf("/v1/jobs/%" PRIu64 "?state=%s&wait=%u", id, esc, wait_s);
	int ret;

	c->http.timeout_ms = REQUEST_TIMEOUT_MS + wait_s * 1000L;
	ret = httpc_json(&c->http, "GET", path, NULL, out, NULL, eb);
	c->http.timeout_ms = REQUEST_TIMEOUT_MS;
	if (ret && *out) {
		json_decref(*out);
		*out = NULL;
	}
	free(path);
	free(esc);
	return ret;
}

static void add_query(struct strbuf *sb, const char *key, const char *value)
{
	char *v = url_escape(value);
	strbuf_addf(sb, "%c%s=%s", strchr(sb->buf, '?') ? '&' : '?', key, v);
	free(v);
}

/* GET base with the filters of a listing: each (key, value) of kv whose
 * value is not NULL, and limit when it is not 0. */
static int get_listing(struct client *c, const char *base, const char *const kv[][2], size_t n,
		       uint64_t limit, json_t **out, struct errbuf *eb)
{
	struct strbuf path = STRBUF_INIT;
	char num[24];
	int ret;

	strbuf_addstr(&path, base);
	for (size_t i = 0; i < n; i++)
		if (kv[i][1])
			add_query(&path, kv[i][0], kv[i][1]);
	if (limit) {
		snprintf(num, sizeof(num), "%" PRIu64, limit);
		add_query(&path, "limit", num);
	}
	ret = get_json(c, "GET", path.buf, NULL, out, eb);
	strbuf_release(&path);
	return ret;
}

int client_jobs_list(struct client *c, const struct client_jobs_filter *f, json_t **out,
		     struct errbuf *eb)
{
	const char *const kv[][2] = { { "state", f ? f->state : NULL }, { "user", f ? f->user : NULL },
				      { "view", f && f->summary ? "summary" : NULL } };

	return get_listing(c, "/v1/jobs", kv, ARRAY_SIZE(kv), f ? f->limit : 0, out, eb);
}

int client_cancel(struct client *c, uint64_t id, json_t **out, struct errbuf *eb)
{
	char path[80];
	snprintf(path, sizeof(path), "/v1/jobs/%" PRIu64 "/cancel", id);
	return get_json(c, "POST", path, NULL, out, eb);
}

int client_job_action(struct client *c, uint64_t id, const char *action, json_t **out,
		      struct errbuf *eb)
{
	char path[80];
	snprintf(path, sizeof(path), "/v1/jobs/%" PRIu64 "/%s", id, action);
	return get_json(c, "POST", path, NULL, out, eb);
}

int client_job_priority(struct client *c, uint64_t id, const char *priority, json_t **out,
			struct errbuf *eb)
{
	char path[80];
	json_t *body = json_pack("{s:s}", "priority", priority);
	int ret;

	snprintf(path, sizeof(path), "/v1/jobs/%" PRIu64, id);
	ret = get_json(c, "POST", path, body, out, eb);
	json_decref(body);
	return ret;
}

int client_exec_start(struct client *c, uint64_t id, const char *host, char *const *argv,
		      json_t **out, struct errbuf *eb)
{
	char path[80];
	json_t *args = json_array(), *body;
	int ret;

	for (size_t i = 0; argv[i]; i++)
		json_array_append_new(args, json_string(argv[i]));
	body = json_pack("{s:s, s:o}", "host", host, "argv", args);
	snprintf(path, sizeof(path), "/v1/jobs/%" PRIu64 "/exec", id);
	ret = get_json(c, "POST", path, body, out, eb);
	json_decref(body);
	return ret;
}

int client_exec_get(struct client *c, uint64_t id, uint64_t exec, unsigned wait_s, json_t **out,
		    struct errbuf *eb)
{
	char path[120];
	int ret;
	snprintf(path, sizeof(path), "/v1/jobs/%" PRIu64 "/exec/%" PRIu64 "?wait=%u", id, exec, wait_s);
	c->http.timeout_ms = (wait_s + 30) * 1000L;
	ret = httpc_json(&c->http, "GET", path, NULL, out, NULL, eb);
	if (ret && out && *out) {
		json_decref(*out);
		*out = NULL;
	}
	return ret;
}

void client_log_chunk_init(struct client_log_chunk *ch)
{
	memset(ch, 0, sizeof(*ch));
	strbuf_init(&ch->data, 0);
}

void client_log_chunk_release(struct client_log_chunk *ch)
{
	strbuf_release(&ch->data);
}

char *client_logs_path(uint64_t id, const struct client_log_req *req)
{
	struct strbuf path = STRBUF_INIT;
	char num[24];

	strbuf_addf(&path, "/v1/jobs/%" PRIu64 "/logs", id);
	if (req->task)
		add_query(&path, "task", req->task);
	if (req->has_attempt) {
		snprintf(num, sizeof(num), "%u", req->attempt);
		add_query(&path, "attempt", num);
	}
	if (req->stream)
		add_query(&path, "stream", req->stream);
	snprintf(num, sizeof(num), "%" PRIu64, req->offset);
	add_query(&path, "offset", num);
	if (req->follow)
		add_query(&path, "follow", "1");
	if (req->limit) {
		snprintf(num, sizeof(num), "%" PRIu64, req->limit);
		add_query(&path, "limit", num);
	}
	return strbuf_detach(&path, NULL);
}

int client_logs_read(struct client *c, uint64_t id, const struct client_log_req *req,
		     struct client_log_chunk *ch, struct errbuf *eb)
{
	struct httpc_response res;
	char *path = client_logs_path(id, req);
	int ret;

	httpc_response_init(&res);
	c->http.timeout_ms = REQUEST_TIMEOUT_MS;
	ret = httpc_request(&c->http, "GET", path, NULL, 0, NULL, &res, eb);
	if (ret)
		goto out;
	if (res.status >= 400) {
		ret = httpc_error_from_reply(&res, eb);
		goto out;
	}
	strbuf_reset(&ch->data);
	strbuf_add(&ch->data, res.body.buf, res.body.len);
	if (!res.offset_hdr || parse_u64_str(res.offset_hdr, &ch->next_offset) < 0)
		ch->next_offset = req->offset + res.body.len;
	if (!res.size_hdr || parse_u64_str(res.size_hdr, &ch->size) < 0)
		ch->size = ch->next_offset;
	ch->eof = res.eof_hdr && !strcmp(res.eof_hdr, "1");
out:
	httpc_response_release(&res);
	free(path);
	return ret;
}

int client_metrics(struct client *c, uint64_t id, const char *task, const char *name, json_t **out,
		   struct errbuf *eb)
{
	struct strbuf path = STRBUF_INIT;
	int ret;

	strbuf_addf(&path, "/v1/jobs/%" PRIu64 "/metrics", id);
	if (task)
		add_query(&path, "task", task);
	if (name)
		add_query(&path, "name", name);
	ret = get_json(c, "GET", path.buf, NULL, out, eb);
	strbuf_release(&path);
	return ret;
}

int client_nodes(struct client *c, json_t **out, struct errbuf *eb)
{
	return get_json(c, "GET", "/v1/nodes", NULL, out, eb);
}

/* method on /v1/nodes/NAME + tail, NAME escaped, with body (may be NULL). */
static int node_request(struct client *c, const char *method, const char *name, const char *tail,
			json_t *body, json_t **out, struct errbuf *eb)
{
	char *v = url_escape(name);
	char *path = xasprintf("/v1/nodes/%s%s", v, tail);
	int ret = get_json(c, method, path, body, out, eb);

	free(path);
	free(v);
	return ret;
}

int client_node_drain(struct client *c, const char *name, const char *reason, json_t **out,
		      struct errbuf *eb)
{
	json_t *body = json_object();
	int ret;

	if (reason)
		json_object_set_new(body, "reason", json_string(reason));
	ret = node_request(c, "POST", name, "/drain", body, out, eb);
	json_decref(body);
	return ret;
}

int client_node_resume(struct client *c, const char *name, json_t **out, struct errbuf *eb)
{
	return node_request(c, "POST", name, "/resume", NULL, out, eb);
}

int client_node_remove(struct client *c, const char *name, json_t **out, struct errbuf *eb)
{
	return node_request(c, "DELETE", name, "", NULL, out, eb);
}

int client_provisioners(struct client *c, json_t **out, struct errbuf *eb)
{
	return get_json(c, "GET", "/v1/provisioners", NULL, out, eb);
}

int client_images(struct client *c, json_t **out, struct errbuf *eb)
{
	return get_json(c, "GET", "/v1/images", NULL, out, eb);
}

int client_queue(struct client *c, json_t **out, struct errbuf *eb)
{
	return get_json(c, "GET", "/v1/queue", NULL, out, eb);
}

int client_token_create(struct client *c, const char *user, bool admin, const char *team, bool team_admin,
			const char *expires, json_t **out, struct errbuf *eb)
{
	json_t *body = json_pack("{s:s, s:b}", "user", user, "admin", admin);
	int ret;

	if (team)
		json_object_set_new(body, "team", json_string(team));
	if (team_admin)
		json_object_set_new(body, "team_admin", json_true());
	if (expires)
		json_object_set_new(body, "expires", json_string(expires));
	ret = get_json(c, "POST", "/v1/tokens", body, out, eb);
	json_decref(body);
	return ret;
}

int client_tokens_list(struct client *c, json_t **out, struct errbuf *eb)
{
	return get_json(c, "GET", "/v1/tokens", NULL, out, eb);
}

int client_token_revoke(struct client *c, const char *id, json_t **out, struct errbuf *eb)
{
	char *v = url_escape(id);
	char *path = xasprintf("/v1/tokens/%s", v);
	int ret = get_json(c, "DELETE", path, NULL, out, eb);

	free(path);
	free(v);
	return ret;
}

int client_audit(struct client *c, const struct client_audit_filter *f, json_t **out,
		 struct errbuf *eb)
{
	const char *const kv[][2] = { { "user", f ? f->user : NULL }, { "since", f ? f->since : NULL } };

	return get_listing(c, "/v1/audit", kv, ARRAY_SIZE(kv), f ? f->limit : 0, out, eb);
}

int client_json(struct client *c, const char *method, const char *path, json_t *body, json_t **out,
		long *status, struct errbuf *eb)
{
	int ret;
	c->http.timeout_ms = REQUEST_TIMEOUT_MS;
	ret = httpc_json(&c->http, method, path, body, out, status, eb);
	if (ret && out && *out) {
		json_decref(*out);
		*out = NULL;
	}
	return ret;
}

int client_chunks_push(struct client *c, const struct chunks_set *set, json_t **manifest,
		       struct chunks_stats *st, struct errbuf *eb)
{
	int ret;

	c->http.timeout_ms = UPLOAD_TIMEOUT_MS;
	ret = chunks_push(&c->http, set, manifest, st, eb);
	c->http.timeout_ms = REQUEST_TIMEOUT_MS;
	return ret;
}

int client_chunks_fetch(struct client *c, const json_t *manifest, const char *dir, struct errbuf *eb)
{
	int ret;

	c->http.timeout_ms = UPLOAD_TIMEOUT_MS;
	ret = chunks_fetch(&c->http, manifest, dir, eb);
	c->http.timeout_ms = REQUEST_TIMEOUT_MS;
	return ret;
}
