/* A task's outputs, packed and handed to the master off the loop (outputs.h). */
#include "base/compat.h"
#include "agent/outputs.h"

#include <dirent.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <time.h>

#include "base/fsutil.h"
#include "base/xalloc.h"
#include "common/codepack.h"

int outputs_pack(const char *dir, bool run_as, uid_t uid, gid_t gid, struct strbuf *out, bool *empty,
		 struct errbuf *eb)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int rc;

	*empty = true;
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			*empty = false;
	if (d)
		closedir(d);
	if (*empty)
		return 0;
	if (run_as) {
		setfsgid(gid);
		setfsuid(uid);
	}
	rc = codepack_create(dir, out, 0, eb);
	if (run_as) {
		setfsuid(0);
		setfsgid(0);
	}
	return rc;
}

static void pause_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

struct upload {
	uv_work_t req;
	char *url, *ca, *pin, *token, *dir; /* owned */
	int64_t task;
	bool run_as;
	uid_t uid;
	gid_t gid;
};

static void upload_work(uv_work_t *req)
{
	struct upload *u = req->data;
	struct strbuf tgz = STRBUF_INIT;
	struct errbuf eb = ERRBUF_INIT;
	struct httpc c;
	struct httpc_response res;
	bool empty;
	char *path;

	if (outputs_pack(u->dir, u->run_as, u->uid, u->gid, &tgz, &empty, &eb)) {
		fprintf(stderr, "yard agent: cannot pack the outputs of task %" PRId64 ": %s\n", u->task, eb.msg);
		goto out;
	}
	if (empty) {
		rm_rf(u->dir);
		goto out;
	}
	httpc_init(&c, u->url, &(struct httpc_tls){ u->ca, u->pin }, u->token);
	c.timeout_ms = 600000;
	path = xasprintf("/v1/tasks/%" PRId64 "/outputs", u->task);
	httpc_response_init(&res);
	for (int attempt = 0; attempt < 5; attempt++) {
		errbuf_reset(&eb);
		httpc_response_release(&res);
		httpc_response_init(&res);
		if (httpc_request(&c, "POST", path, tgz.buf, tgz.len, "application/gzip", &res, &eb) == 0 &&
		    res.status == 201)
			break;
		pause_ms(200u << attempt);
	}
	if (res.status != 201)
		fprintf(stderr, "yard agent: cannot hand the outputs of task %" PRId64 " to the master: %s (HTTP %ld)\n",
			u->task, eb.msg[0] ? eb.msg : "refused", res.status);
	else
		rm_rf(u->dir); /* the master holds them now */
	httpc_response_release(&res);
	httpc_release(&c);
	free(path);
out:
	strbuf_release(&tgz);
}

static void upload_done(uv_work_t *req, int status)
{
	struct upload *u = req->data;

	(void)status;
	free(u->url);
	free(u->ca);
	free(u->pin);
	free(u->token);
	free(u->dir);
	free(u);
}

static char *dup_or_null(const char *s) { return s ? xstrdup(s) : NULL; }

void outputs_upload(uv_loop_t *loop, const char *master_url, const struct httpc_tls *tls,
		    const char *token, int64_t task, const char *dir, bool run_as, uid_t uid, gid_t gid)
{
	struct upload *u = xcalloc(1, sizeof(*u));

	u->url = xstrdup(master_url);
	u->ca = dup_or_null(tls ? tls->ca_file : NULL);
	u->pin = dup_or_null(tls ? tls->pin : NULL);
	u->token = dup_or_null(token);
	u->dir = xstrdup(dir);
	u->task = task;
	u->run_as = run_as;
	u->uid = uid;
	u->gid = gid;
	u->req.data = u;
	if (uv_queue_work(loop, &u->req, upload_work, upload_done) != 0) {
		fprintf(stderr, "yard agent: cannot queue the outputs of task %" PRId64 "\n", task);
		upload_done(&u->req, 0);
	}
}
