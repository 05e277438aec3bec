/* The session routes (sessions.h, docs/protocol.md "Sessions"): a client's
 * WebSocket into a task, and an agent's leg of a session. */
#include "base/compat.h"
#include "master/api_handlers.h"

#include "master/api.h"

#include <microhttpd.h>

#include "base/parse.h"
#include "base/utf8.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/httphead.h"
#include "common/wsframe.h"
#include "master/jobs.h"
#include "master/sessions.h"

/* The upgrade token of an agent's leg. */
#define AGENT_UPGRADE "yard-session/1"
/* The largest terminal a client may ask for. */
#define TTY_DIM_MAX 10000

/* Whether header name of r holds token in its comma-separated list. */
static bool header_has_token(struct req *r, const char *name, const char *token)
{
	return http_list_has_token(req_header(r, name), token);
}

/* Checks r's WebSocket opening handshake (RFC 6455, 4.2.1) for protocol
 * proto: accept (OUT) is the key's answer, *offered whether the client
 * named proto among its protocols (it may name none). Replies 400 naming
 * the header otherwise. */
static int ws_handshake(struct req *r, const char *proto, char accept[29], bool *offered)
{
	const char *version = req_header(r, "Sec-WebSocket-Version");
	const char *key = req_header(r, "Sec-WebSocket-Key");
	const char *protos = req_header(r, "Sec-WebSocket-Protocol");

	if (!header_has_token(r, "Upgrade", "websocket") || !header_has_token(r, "Connection", "upgrade")) {
		reply_err(r, YERR(BAD_REQUEST), "'%s' is a WebSocket: send 'Connection: Upgrade' and "
			  "'Upgrade: websocket'", r->route->pattern);
		return -1;
	}
	if (!version || strcmp(version, "13")) {
		reply_err(r, YERR(BAD_REQUEST), "Sec-WebSocket-Version '%s': expected 13",
			  version ? version : "");
		return -1;
	}
	if (!ws_key_valid(key)) {
		reply_err(r, YERR(BAD_REQUEST), "Sec-WebSocket-Key '%.64s': expected the base64 of 16 "
			  "bytes", key ? key : "");
		return -1;
	}
	*offered = protos && ws_protocol_offered(protos, proto);
	if (protos && !*offered) {
		reply_err(r, YERR(BAD_REQUEST), "Sec-WebSocket-Protocol '%.200s': this route speaks %s",
			  protos, proto);
		return -1;
	}
	ws_accept_key(key, accept);
	return 0;
}

/* Every cmd=ARG of the query, in order. */
struct argv_collect {
	char **argv;
	size_t n, alloc, bytes;
	bool too_many;
};

static enum MHD_Result collect_cmd(void *cls, enum MHD_ValueKind kind, const char *key,
				   const char *value)
{
	struct argv_collect *a = cls;

	if (strcmp(key, "cmd"))
		return MHD_YES;
	if (!value)
		value = "";
	a->bytes += strlen(value) + 1;
	if (a->n + 1 >= SESSION_ARGV_MAX || a->bytes > SESSION_ARGV_BYTES) {
		a->too_many = true;
		return MHD_NO;
	}
	ALLOC_GROW(a->argv, a->n + 2, a->alloc);
	a->argv[a->n++] = xstrdup(value);
	a->argv[a->n] = NULL;
	return MHD_YES;
}

/* A boolean query parameter: "1"/"true" or "0"/"false"; absent is dflt.
 * Replies 400 naming it otherwise. */
static int query_bool(struct req *r, const char *name, bool dflt, bool *out)
{
	const char *v = req_query(r, name);
	struct errbuf eb = ERRBUF_INIT;

	*out = dflt;
	if (!v)
		return 0;
	if (!strcmp(v, "1") || !strcmp(v, "true")) {
		*out = true;
	} else if (!strcmp(v, "0") || !strcmp(v, "false")) {
		*out = false;
	} else {
		error_field(&eb, YERR(BAD_REQUEST), name, "%s '%.32s': expected 1 or 0", name, v);
		req_error(r, &eb);
		return -1;
	}
	return 0;
}

static int query_dim(struct req *r, const char *name, unsigned dflt, unsigned *out)
{
	const char *v = req_query(r, name);
	uint64_t n;

	*out = dflt;
	if (!v)
		return 0;
	if (parse_u64_str(v, &n) || !n || n > TTY_DIM_MAX) {
		struct errbuf eb = ERRBUF_INIT;
		error_field(&eb, YERR(BAD_REQUEST), name, "%s '%.32s': expected a number of 1 to %d", name,
			    v, TTY_DIM_MAX);
		req_error(r, &eb);
		return -1;
	}
	*out = (unsigned)n;
	return 0;
}

/* The task a session goes into: ?task=ROLE/INDEX of the job's current
 * attempt, or its first task; it must run. Replies and returns NULL
 * otherwise. */
static struct task *session_task(struct req *r, struct job *j)
{
	const char *name = req_query(r, "task");
	struct errbuf eb = ERRBUF_INIT;
	struct task *t = NULL;

	if (name) {
		const char *slash = strrchr(name, '/');
		uint64_t idx = 0;
		char *role;
		if (!slash || slash == name || parse_u64_str(slash + 1, &idx) || idx > UINT_MAX) {
			error_field(&eb, YERR(BAD_REQUEST), "task", "task '%.100s': expected ROLE/INDEX",
				    name);
			req_error(r, &eb);
			return NULL;
		}
		role = xstrndup(name, (size_t)(slash - name));
		t = jobs_current_task(j, role, (unsigned)idx);
		free(role);
		if (!t) {
			error_field(&eb, YERR(BAD_REQUEST), "task", "task '%.100s': job %" PRIu64 " has no "
				    "such task in its attempt %u", name, j->id, j->attempt);
			req_error(r, &eb);
			return NULL;
		}
	} else if (!(t = jobs_current_task(j, NULL, 0))) {
		reply_err(r, YERR(CONFLICT), "job %" PRIu64 " has no task yet", j->id);
		return NULL;
	}
	if (t->state != TASK_RUNNING || !t->node || t->stop) {
		reply_err(r, YERR(CONFLICT), "task %s/%u of job %" PRIu64 " is %s, not running", t->role,
			  t->index, j->id, t->stop && t->state == TASK_RUNNING ? "stopping"
									       : task_state_name(t->state));
		return NULL;
	}
	return t;
}

/* The 101 that makes r's connection the client leg of session s, a
 * WebSocket of protocol proto (named when the client offered it);
 * audit_path (taken) is what the audit entry names: the kind and the
 * task. */
static void upgrade_client(struct req *r, struct session *s, const char *proto, const char *accept,
			   bool offered, char *audit_path)
{
	struct MHD_Response *resp;

	free(r->audit_path);
	r->audit_path = audit_path;
	resp = sessions_upgrade_response(r, s, SESSION_LEG_CLIENT);
	MHD_add_response_header(resp, "Upgrade", "websocket");
	MHD_add_response_header(resp, "Connection", "Upgrade");
	MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
	if (offered)
		MHD_add_response_header(resp, "Sec-WebSocket-Protocol", proto);
	req_set_response(r, 101, resp);
}

/* The rest of a client's session request, once its own checks passed: the
 * job must run, the task (?task=) be one of it; then the session, and the
 * 101 (the audit entry names the kind's query: ?task=T and more). */
static void open_client(struct req *r, struct job *j, const struct session_spec *spec,
			const char *proto, const char *accept, bool offered, const char *more)
{
	struct errbuf eb = ERRBUF_INIT;
	struct session *s;
	struct task *t;

	if (j->state != JOB_RUNNING) {
		reply_err(r, YERR(CONFLICT), "job %" PRIu64 " is %s, not running", j->id,
			  job_state_name(j->state));
		return;
	}
	if (!(t = session_task(r, j)))
		return;
	if (sessions_create(r->m, spec, j, t, &s, &eb)) {
		req_error(r, &eb);
		return;
	}
	upgrade_client(r, s, proto, accept, offered, xasprintf("%s?task=%s%s", r->url, s->task_name, more));
}

/* GET /v1/jobs/{id}/exec?task=&cmd=&cmd=&tty=&stdin=&cols=&rows=: a
 * WebSocket (yard.exec.v1) to a command run in a task of the job. */
void h_exec_session(struct req *r)
{
	struct session_spec spec = { .kind = SESSION_EXEC };
	struct argv_collect cmd = { 0 };
	struct errbuf eb = ERRBUF_INIT;
	struct job *j = path_job(r);
	char accept[29];
	bool offered = false;

	if (!j || ws_handshake(r, WS_PROTO_EXEC, accept, &offered))
		goto out;
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect_cmd, &cmd);
	if (cmd.too_many) {
		error_field(&eb, YERR(BAD_REQUEST), "cmd", "cmd: more than %d arguments or %d bytes",
			    SESSION_ARGV_MAX - 1, SESSION_ARGV_BYTES);
		req_error(r, &eb);
		goto out;
	}
	if (!cmd.n || !*cmd.argv[0]) {
		error_field(&eb, YERR(BAD_REQUEST), "cmd", "cmd: expected the command as one or more "
			    "cmd=ARG, the first not empty");
		req_error(r, &eb);
		goto out;
	}
	for (size_t i = 0; i < cmd.n; i++)
		if (!utf8_valid(cmd.argv[i], strlen(cmd.argv[i]))) {
			/* it goes to the agent in JSON */
			error_field(&eb, YERR(BAD_REQUEST), "cmd", "cmd: argument %zu is not UTF-8", i);
			req_error(r, &eb);
			goto out;
		}
	if (query_bool(r, "tty", false, &spec.tty) || query_bool(r, "stdin", false, &spec.stdin_open) ||
	    query_dim(r, "cols", 80, &spec.cols) || query_dim(r, "rows", 24, &spec.rows))
		goto out;
	spec.argv = cmd.argv;
	open_client(r, j, &spec, WS_PROTO_EXEC, accept, offered, "");
out:
	for (size_t i = 0; i < cmd.n; i++)
		free(cmd.argv[i]);
	free(cmd.argv);
}

/* GET /v1/jobs/{id}/portforward?task=&port=: a WebSocket (yard.port.v1)
 * to a TCP connection to 127.0.0.1:port in the node of a task of the job. */
void h_portforward_session(struct req *r)
{
	struct session_spec spec = { .kind = SESSION_PORT };
	struct errbuf eb = ERRBUF_INIT;
	struct job *j = path_job(r);
	const char *port = req_query(r, "port");
	char accept[29], more[16];
	bool offered = false;
	uint64_t n = 0;

	if (!j || ws_handshake(r, WS_PROTO_PORT, accept, &offered))
		return;
	if (!port || parse_u64_str(port, &n) || !n || n > 65535) {
		error_field(&eb, YERR(BAD_REQUEST), "port", "port '%.32s': expected the task's port, 1 to "
			    "65535", port ? port : "");
		req_error(r, &eb);
		return;
	}
	spec.port = (unsigned)n;
	snprintf(more, sizeof(more), "&port=%u", spec.port);
	open_client(r, j, &spec, WS_PROTO_PORT, accept, offered, more);
}

/* GET /v1/jobs/{id}/attach?task=&cols=&rows=: a WebSocket (yard.exec.v1)
 * to the terminal of an interactive job's task (its shim's, shared with
 * the task's other attachers). */
void h_attach_session(struct req *r)
{
	struct session_spec spec = { .kind = SESSION_ATTACH, .tty = true, .stdin_open = true };
	struct job *j = path_job(r);
	char accept[29];
	bool offered = false;

	if (!j || ws_handshake(r, WS_PROTO_EXEC, accept, &offered))
		return;
	if (query_dim(r, "cols", 80, &spec.cols) || query_dim(r, "rows", 24, &spec.rows))
		return;
	if (!j->spec || !j->spec->interactive) {
		reply_err(r, YERR(CONFLICT), "job %" PRIu64 " is not interactive: only an interactive job "
			  "(yard shell) has a terminal to attach to; yard exec -it runs a command in any "
			  "running job", j->id);
		return;
	}
	open_client(r, j, &spec, WS_PROTO_EXEC, accept, offered, "");
}

/* GET /v1/agents/{id}/sessions/{sid} with Upgrade: yard-session/1: the
 * agent's leg of a session of its node. */
void h_agent_session(struct req *r)
{
	struct session *s = sessions_find(r->m, r->cap[1]);
	struct MHD_Response *resp;

	if (!header_has_token(r, "Upgrade", AGENT_UPGRADE) || !header_has_token(r, "Connection", "upgrade")) {
		reply_err(r, YERR(BAD_REQUEST), "a session's leg is an upgrade: send 'Connection: Upgrade' "
			  "and 'Upgrade: %s'", AGENT_UPGRADE);
		return;
	}
	if (!s || strcmp(s->node, r->cap[0])) {
		reply_err(r, YERR(NOT_FOUND), "node '%s' has no session '%s' (it ended, or it was never "
			  "this node's)", r->cap[0], r->cap[1]);
		return;
	}
	if (s->agent.up) {
		reply_err(r, YERR(CONFLICT), "session '%s' is open already", s->id);
		return;
	}
	resp = sessions_upgrade_response(r, s, SESSION_LEG_AGENT);
	MHD_add_response_header(resp, "Upgrade", AGENT_UPGRADE);
	MHD_add_response_header(resp, "Connection", "Upgrade");
	req_set_response(r, 101, resp);
}
