/*
 * The API client's sessions (cli/client.h): exec, attach and port-forward
 * over a WebSocket, which only the libcurl transport carries (httpc.h).
 * Apart from client.c so that the front `yard` (src/front.c), which serves
 * no session, links none of it.
 */
#include "base/compat.h"
#include "cli/client.h"

#include "base/xalloc.h"

char *client_exec_path(uint64_t id, const struct client_exec_req *req)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_addf(&sb, "/v1/jobs/%" PRIu64 "/exec?tty=%d&stdin=%d", id, req->tty, req->stdin_open);
	if (req->cols && req->rows)
		strbuf_addf(&sb, "&cols=%u&rows=%u", req->cols, req->rows);
	if (req->task) {
		char *t = url_escape(req->task);
		strbuf_addf(&sb, "&task=%s", t);
		free(t);
	}
	for (size_t i = 0; req->argv && req->argv[i]; i++) {
		char *a = url_escape(req->argv[i]);
		strbuf_addf(&sb, "&cmd=%s", a);
		free(a);
	}
	return strbuf_detach(&sb, NULL);
}

/* A session's WebSocket of subprotocol proto at path. */
static int session_open(struct client *c, const char *path, const char *proto, struct httpc_stream *s,
			long *status, struct errbuf *eb)
{
	char *header = xasprintf("Sec-WebSocket-Protocol: %s", proto);
	const char *const headers[] = { header, NULL };
	struct httpc_upgrade_req up = { .path = path, .protocol = "websocket", .headers = headers };
	int ret = httpc_upgrade(&c->http, &up, s, status, eb);

	free(header);
	return ret;
}

int client_attach_open(struct client *c, uint64_t id, const char *task, unsigned cols, unsigned rows,
		       struct httpc_stream *s, struct errbuf *eb)
{
	struct strbuf path = STRBUF_INIT;
	int ret;

	strbuf_addf(&path, "/v1/jobs/%" PRIu64 "/attach", id);
	if (cols && rows)
		strbuf_addf(&path, "?cols=%u&rows=%u", cols, rows);
	if (task) {
		char *t = url_escape(task);
		strbuf_addf(&path, "%stask=%s", cols && rows ? "&" : "?", t);
		free(t);
	}
	ret = session_open(c, path.buf, "yard.exec.v1", s, NULL, eb);
	strbuf_release(&path);
	return ret;
}

int client_exec_open(struct client *c, uint64_t id, const struct client_exec_req *req,
		     struct httpc_stream *s, struct errbuf *eb)
{
	char *path = client_exec_path(id, req);
	size_t len = strlen(path);
	int ret;

	if (len > CLIENT_EXEC_PATH_MAX)
		ret = error(eb, YERR(TOO_LARGE), "the command is too long: %zu bytes once URL-encoded, "
			    "the most a session's request takes is %d (run a script instead)", len,
			    CLIENT_EXEC_PATH_MAX);
	else
		ret = session_open(c, path, "yard.exec.v1", s, NULL, eb);
	free(path);
	return ret;
}

int client_portforward_open(struct client *c, uint64_t id, const char *task, unsigned port,
			    struct httpc_stream *s, long *status, struct errbuf *eb)
{
	struct strbuf path = STRBUF_INIT;
	int ret;

	strbuf_addf(&path, "/v1/jobs/%" PRIu64 "/portforward?port=%u", id, port);
	if (task) {
		char *t = url_escape(task);
		strbuf_addf(&path, "&task=%s", t);
		free(t);
	}
	ret = session_open(c, path.buf, "yard.port.v1", s, status, eb);
	strbuf_release(&path);
	return ret;
}
