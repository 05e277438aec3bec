#include "base/compat.h"
#include "agent/heartbeat.h"

#include "base/clock.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

uint64_t fence_after_ms(uint64_t lease_ms)
{
	return lease_ms * 2 / 3;
}

uint64_t fence_grace_ms(uint64_t lease_ms)
{
	return lease_ms / 6;
}

uint64_t fence_basis(uint64_t last_ok_ms, bool refused, uint64_t now_ms)
{
	return refused ? now_ms : last_ok_ms;
}

bool fence_due(uint64_t lease_ms, uint64_t basis_ms, uint64_t now_ms)
{
	return lease_ms && basis_ms && now_ms > basis_ms &&
	       now_ms - basis_ms > fence_after_ms(lease_ms);
}

bool fence_spares(const json_t *task)
{
	const char *od = json_string_value(json_object_get(task, "on_disconnect"));
	return od && !strcmp(od, "keep");
}

/* How often the agent rewrites the file: every second, more often for a
 * lease so short that a second is a large part of the countdown. */
static uint64_t heartbeat_period_ms(uint64_t lease_ms)
{
	uint64_t p = lease_ms ? fence_after_ms(lease_ms) / 4 : 1000;
	return p > 1000 ? 1000 : p < 50 ? 50 : p;
}

char *heartbeat_path(const char *work_dir)
{
	return xasprintf("%s/%s", work_dir, HEARTBEAT_FILE);
}

int heartbeat_write(const char *path, const struct heartbeat *hb, struct errbuf *eb)
{
	json_t *doc = json_pack("{s:I, s:I, s:I, s:I}", "basis_ms", (json_int_t)hb->basis_ms,
				"lease_ms", (json_int_t)hb->lease_ms, "at_ms", (json_int_t)hb->at_ms,
				"pid", (json_int_t)hb->pid);
	char *text = json_dumps(doc, JSON_COMPACT);
	int ret = 0;
	if (!text || write_file_replace(path, text, strlen(text), 0644) < 0)
		ret = error(eb, YERR(IO), "cannot write '%s': %s", path, strerror(errno));
	free(text);
	json_decref(doc);
	return ret;
}

/* A member that is an integer >= 0 into *out; false when it is not. */
static bool get_u64(const json_t *doc, const char *key, uint64_t *out)
{
	const json_t *v = json_object_get(doc, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

int heartbeat_read(const char *path, struct heartbeat *hb, struct errbuf *eb)
{
	json_error_t jerr;
	json_t *doc = json_load_file(path, 0, &jerr);
	int ret = 0;

	memset(hb, 0, sizeof(*hb));
	if (!doc && !path_exists(path))
		return error(eb, YERR(NOT_FOUND), "'%s' does not exist", path);
	if (!doc)
		return error(eb, YERR(IO), "cannot read '%s': %s", path, jerr.text);
	if (!get_u64(doc, "basis_ms", &hb->basis_ms) || !get_u64(doc, "lease_ms", &hb->lease_ms) ||
	    !get_u64(doc, "at_ms", &hb->at_ms)) {
		memset(hb, 0, sizeof(*hb));
		ret = error(eb, YERR(IO), "'%s': expected basis_ms, lease_ms and at_ms (integers >= 0)",
			    path);
	} else {
		hb->pid = json_integer_value(json_object_get(doc, "pid"));
	}
	json_decref(doc);
	return ret;
}

/* ---- the agent's writer ---- */

/* One write of the agent's current view, under w->lock (one writer of the
 * temp file at a time); returns the lease it holds. */
static uint64_t beat_locked(struct heartbeat_writer *w)
{
	struct heartbeat hb = { 0 };
	struct errbuf eb = ERRBUF_INIT;

	w->view(w->arg, &hb);
	hb.at_ms = boot_ms();
	hb.pid = (int64_t)getpid();
	if (hb.basis_ms && heartbeat_write(w->path, &hb, &eb))
		fprintf(stderr, "yard agent: heartbeat: %s\n", eb.msg);
	return hb.lease_ms;
}

static void *writer_thread(void *arg)
{
	struct heartbeat_writer *w = arg;

	pthread_mutex_lock(&w->lock);
	while (!w->quit) {
		struct timespec ts;
		uint64_t ns = heartbeat_period_ms(beat_locked(w)) * 1000000ULL;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ns += (uint64_t)ts.tv_nsec;
		ts.tv_sec += (time_t)(ns / 1000000000ULL);
		ts.tv_nsec = (long)(ns % 1000000000ULL);
		while (!w->quit && pthread_cond_timedwait(&w->cond, &w->lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

void heartbeat_writer_start(struct heartbeat_writer *w, const char *work_dir,
			    heartbeat_view_fn *view, void *arg)
{
	pthread_condattr_t ca;

	memset(w, 0, sizeof(*w));
	w->path = heartbeat_path(work_dir);
	w->view = view;
	w->arg = arg;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	int err = pthread_create(&w->thread, NULL, writer_thread, w);
	if (err) {
		fprintf(stderr, "yard agent: cannot start the heartbeat thread: %s; the shims will fence "
			"their tasks as if the agent were gone\n", strerror(err));
		return;
	}
	w->started = true;
}

void heartbeat_writer_beat(struct heartbeat_writer *w)
{
	if (!w->path)
		return;
	pthread_mutex_lock(&w->lock);
	beat_locked(w);
	pthread_mutex_unlock(&w->lock);
}

void heartbeat_writer_stop(struct heartbeat_writer *w)
{
	if (!w->path)
		return;
	if (w->started) {
		pthread_mutex_lock(&w->lock);
		w->quit = true;
		pthread_cond_signal(&w->cond);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
	}
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w->path);
	memset(w, 0, sizeof(*w));
}

/* ---- a shim's countdown ---- */

void fence_watch_init(struct fence_watch *w, const json_t *shim_conf, const json_t *task)
{
	const char *path = json_string_value(json_object_get(shim_conf, "heartbeat"));

	memset(w, 0, sizeof(*w));
	w->path = path ? xstrdup(path) : NULL;
	w->spared = fence_spares(task);
}

void fence_watch_release(struct fence_watch *w)
{
	free(w->path);
	w->path = NULL;
}

void fence_watch_see(struct fence_watch *w, const struct heartbeat *hb)
{
	if (hb->basis_ms > w->basis_ms)
		w->basis_ms = hb->basis_ms;
	if (hb->lease_ms)
		w->lease_ms = hb->lease_ms;
	if (hb->at_ms > w->at_ms)
		w->at_ms = hb->at_ms;
}

/* "1.25 s" */
static const char *seconds(uint64_t ms, char *buf, size_t len)
{
	snprintf(buf, len, "%" PRIu64 ".%02" PRIu64 " s", ms / 1000, ms % 1000 / 10);
	return buf;
}

bool fence_watch_check(struct fence_watch *w, uint64_t now_ms)
{
	char gone[32], quiet[32], lease[32];

	if (w->fenced || w->spared || !w->path || !fence_due(w->lease_ms, w->basis_ms, now_ms))
		return false;
	w->fenced = true;
	seconds(now_ms - w->basis_ms, quiet, sizeof(quiet));
	seconds(w->lease_ms, lease, sizeof(lease));
	/* a live agent rewrites the file every period: one that has missed two is gone */
	if (now_ms - w->at_ms > 2 * heartbeat_period_ms(w->lease_ms))
		snprintf(w->why, sizeof(w->why),
			 "stopped: its agent was gone for %s (fenced by its shim; "
			 "no answer from the master for %s of the node's %s lease)",
			 seconds(now_ms - w->at_ms, gone, sizeof(gone)), quiet, lease);
	else
		snprintf(w->why, sizeof(w->why),
			 "stopped: its agent had no answer from the master for %s "
			 "of the node's %s lease (fenced by its shim)", quiet, lease);
	return true;
}

bool fence_watch_poll(struct fence_watch *w)
{
	struct heartbeat hb;

	if (w->fenced || w->spared || !w->path)
		return false;
	if (heartbeat_read(w->path, &hb, NULL) == 0)
		fence_watch_see(w, &hb);
	return fence_watch_check(w, boot_ms());
}

bool fence_watch_step(struct fence_watch *w, bool *stopping, uint64_t *deadline_ms)
{
	uint64_t by;

	if (!fence_watch_poll(w))
		return false;
	by = mono_ms() + fence_grace_ms(w->lease_ms);
	fprintf(stderr, "yard shim: %s\n", w->why);
	if (*stopping) {
		if (by < *deadline_ms)
			*deadline_ms = by;
		return false;
	}
	w->stopped = *stopping = true;
	*deadline_ms = by;
	return true;
}

void fence_watch_mark_exit(const struct fence_watch *w, struct task_exit *e)
{
	struct strbuf sb = STRBUF_INIT;

	if (!w->stopped)
		return;
	strbuf_addf(&sb, "%s: %s", w->why, e->reason[0] ? e->reason : "ended");
	snprintf(e->reason, sizeof(e->reason), "%s", sb.buf);
	strbuf_release(&sb);
	e->has_code = false;
	e->exit_code = 0;
	e->signal = 0;
}
