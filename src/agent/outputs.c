/* A task's outputs and checkpoint, packed and handed to the master off the
 * loop (outputs.h). */
#include "base/compat.h"
#include "agent/outputs.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>
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

/* Hands in the list of the files of the archive tgz (digest): what `yard
 * outputs` shows. A failure is logged; the archive stays listed without. */
static void post_files(struct httpc *c, const struct outputs_job *j, const char *digest,
		       const struct strbuf *tgz)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *files, *out = NULL;
	uint64_t count;
	long status = 0;

	if (codepack_list(tgz->buf, tgz->len, OUTPUTS_FILES_MAX, &files, &count, &eb) == 0) {
		json_t *body = json_pack("{s:s, s:o, s:I}", "outputs", digest, "files", files, "count",
					 (json_int_t)count);
		if (httpc_json(c, "POST", j->files_path, body, &out, &status, &eb) == 0 && status != 200)
			error(&eb, YERR(UNAVAILABLE), "HTTP %ld", status);
		json_decref(body);
	}
	if (eb.msg[0])
		fprintf(stderr, "yard agent: cannot list the files of %s: %s\n", j->what, eb.msg);
	json_decref(out);
}

struct work {
	uv_work_t req;
	struct outputs_job job; /* its strings owned */
	char digest[80];        /* OUT of the worker: "" when nothing was handed in */
};

static void pack_post(uv_work_t *req)
{
	struct work *w = req->data;
	const struct outputs_job *j = &w->job;
	struct strbuf tgz = STRBUF_INIT;
	struct errbuf eb = ERRBUF_INIT;
	struct httpc c;
	struct httpc_response res;
	bool empty;

	if (outputs_pack(j->dir, j->run_as, j->uid, j->gid, &tgz, &empty, &eb)) {
		fprintf(stderr, "yard agent: cannot pack %s: %s\n", j->what, eb.msg);
		goto out;
	}
	if (empty) {
		if (j->remove)
			rm_rf(j->dir);
		goto out;
	}
	httpc_init(&c, j->master_url, &j->tls, j->token);
	c.timeout_ms = 600000;
	httpc_response_init(&res);
	for (int attempt = 0; attempt < 5; attempt++) {
		errbuf_reset(&eb);
		httpc_response_release(&res);
		httpc_response_init(&res);
		if (httpc_request(&c, "POST", j->path, tgz.buf, tgz.len, "application/gzip", &res, &eb) == 0 &&
		    res.status == 201)
			break;
		pause_ms(200u << attempt);
	}
	json_t *doc = res.status == 201 ? json_loadb(res.body.buf, res.body.len, 0, NULL) : NULL;
	const char *digest = json_string_value(json_object_get(doc, j->key));
	if (digest) {
		snprintf(w->digest, sizeof(w->digest), "%s", digest);
		if (j->remove)
			rm_rf(j->dir); /* the master holds it now */
		if (j->files_path)
			post_files(&c, j, digest, &tgz);
	} else {
		fprintf(stderr, "yard agent: cannot hand %s to the master: %s (HTTP %ld)\n", j->what,
			eb.msg[0] ? eb.msg : "refused", res.status);
		/* kept, out of reach of the next task to hold its uid */
		if (j->remove && j->run_as && (chown(j->dir, 0, 0) < 0 || chmod(j->dir, 0700) < 0))
			fprintf(stderr, "yard agent: cannot take back '%s': %s\n", j->dir, strerror(errno));
	}
	json_decref(doc);
	httpc_response_release(&res);
	httpc_release(&c);
out:
	strbuf_release(&tgz);
}

static char *dup_or_null(const char *s) { return s ? xstrdup(s) : NULL; }

static void work_free(struct work *w)
{
	free((char *)w->job.master_url);
	free((char *)w->job.token);
	free((char *)w->job.tls.ca_file);
	free((char *)w->job.tls.pin);
	free((char *)w->job.path);
	free((char *)w->job.dir);
	free((char *)w->job.key);
	free((char *)w->job.files_path);
	free((char *)w->job.what);
	free(w);
}

static void pack_post_done(uv_work_t *req, int status)
{
	struct work *w = req->data;

	(void)status;
	if (w->job.done)
		w->job.done(w->job.arg, w->digest[0] ? w->digest : NULL);
	work_free(w);
}

int outputs_queue(uv_loop_t *loop, const struct outputs_job *job)
{
	struct work *w = xcalloc(1, sizeof(*w));

	w->job = *job;
	w->job.master_url = xstrdup(job->master_url);
	w->job.token = dup_or_null(job->token);
	w->job.tls.ca_file = dup_or_null(job->tls.ca_file);
	w->job.tls.pin = dup_or_null(job->tls.pin);
	w->job.path = xstrdup(job->path);
	w->job.dir = xstrdup(job->dir);
	w->job.key = xstrdup(job->key);
	w->job.files_path = dup_or_null(job->files_path);
	w->job.what = xstrdup(job->what);
	w->req.data = w;
	if (uv_queue_work(loop, &w->req, pack_post, pack_post_done) != 0) {
		fprintf(stderr, "yard agent: cannot queue the upload of %s\n", job->what);
		work_free(w);
		return -1;
	}
	return 0;
}
