/* A task's outputs and checkpoint, handed to the master's chunk store off
 * the loop (outputs.h). */
#include "base/compat.h"
#include "agent/outputs.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/xalloc.h"
#include "common/chunks.h"

static void pause_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

struct work {
	uv_work_t req;
	struct outputs_job job; /* its strings owned */
	char digest[80];        /* OUT of the worker: "" when nothing was handed in */
};

/* Pushes set's chunks and hands in their manifest: the reply's digest into
 * w->digest. Tried again (only the chunks still missing go) when the
 * master was not reached or lost a chunk in between. */
static void push_post(struct work *w, const struct chunks_set *set, struct errbuf *eb)
{
	const struct outputs_job *j = &w->job;
	struct chunks_stats st = { 0, 0, 0 };
	uint64_t bytes = 0;
	struct httpc c;

	httpc_init(&c, j->master_url, &j->tls, j->token);
	c.timeout_ms = 600000;
	for (int attempt = 0; attempt < 5 && !w->digest[0]; attempt++) {
		json_t *manifest = NULL, *body, *reply = NULL;
		long status = 0;
		if (attempt)
			pause_ms(200u << attempt);
		errbuf_reset(eb);
		if (chunks_push(&c, set, &manifest, &st, eb)) {
			if (eb->code == YERR(IO))
				break; /* the dir changed or cannot be read: trying again reads the same */
			continue;
		}
		body = json_pack("{s:o}", "manifest", manifest);
		if (!httpc_json(&c, "POST", j->path, body, &reply, &status, eb) && status == 201) {
			const char *digest = json_string_value(json_object_get(reply, j->key));
			if (digest)
				snprintf(w->digest, sizeof(w->digest), "%s", digest);
		} else if (status >= 400 && status < 500 && eb->code != YERR(MISSING_CHUNKS) && status != 429) {
			attempt = 5; /* refused: it would be again */
		}
		json_decref(body);
		json_decref(reply);
	}
	httpc_release(&c);
	for (size_t i = 0; i < set->n; i++)
		bytes += set->files[i].size;
	if (w->digest[0])
		fprintf(stderr, "yard agent: handed in %s: %zu files, %" PRIu64 " bytes, uploaded %" PRIu64
			" of %" PRIu64 " chunks (%" PRIu64 " bytes)\n", j->what, set->n, bytes, st.uploaded,
			st.chunks, st.uploaded_bytes);
}

static void pack_post(uv_work_t *req)
{
	struct work *w = req->data;
	const struct outputs_job *j = &w->job;
	struct chunks_as as = { j->uid, j->gid };
	struct chunks_set set;
	struct errbuf eb = ERRBUF_INIT;

	if (chunks_walk(&set, j->dir, true, j->run_as ? &as : NULL, &eb)) {
		fprintf(stderr, "yard agent: cannot read %s: %s\n", j->what, eb.msg);
		goto out;
	}
	if (set.skipped)
		fprintf(stderr, "yard agent: %s: %u entries left out: %s%s\n", j->what, set.skipped,
			set.skipped_names, set.skipped > 3 ? ", ..." : "");
	if (!set.n) {
		if (j->remove)
			rm_rf(j->dir);
		goto out;
	}
	push_post(w, &set, &eb);
	if (w->digest[0]) {
		if (j->remove)
			rm_rf(j->dir); /* the master holds it now */
	} else {
		fprintf(stderr, "yard agent: cannot hand %s to the master: %s\n", j->what,
			eb.msg[0] ? eb.msg : "refused");
		/* kept, out of reach of the next task to hold its uid */
		if (j->remove && j->run_as && (chown(j->dir, 0, 0) < 0 || chmod(j->dir, 0700) < 0))
			fprintf(stderr, "yard agent: cannot take back '%s': %s\n", j->dir, strerror(errno));
	}
out:
	chunks_set_release(&set);
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
	w->job.what = xstrdup(job->what);
	w->req.data = w;
	if (uv_queue_work(loop, &w->req, pack_post, pack_post_done) != 0) {
		fprintf(stderr, "yard agent: cannot queue the upload of %s\n", job->what);
		work_free(w);
		return -1;
	}
	return 0;
}
