/* The agent's shipper thread (shipper.h). */
#include "base/compat.h"
#include "agent/shipper.h"

#include <string.h>
#include <time.h>

#include "agent/cache.h"
#include "agent/ckptwatch.h"
#include "agent/imagebuild.h"
#include "agent/metricship.h"
#include "agent/taskdir.h"
#include "base/clock.h"
#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

/* A log POST carries up to 4 MiB (the master takes up to API_LOG_MAX):
 * each is one request and, at the master, one append in its batch. Chunks
 * of 16 MiB made 1 GiB of a task's log reach the master in 2.9-3.4 s,
 * chunks of 4 MiB in 2.1-2.2 s, of 2 MiB in 2.2-2.4 s (bench/logs.py): the
 * master's body buffer of a large chunk is fresh memory each time. */
#define LOG_CHUNK (4 << 20)
/* Chunks a stream ships in one round before the next task's turn. */
#define LOG_ROUNDS 16
#define SHIP_TICK_MS 50
/* how often the shipper reports GPU utilisation (with NVML only) */
#define GPU_UTIL_MS 5000
#define GPU_UTIL_MAX 1024

struct ship_task {
	int64_t id;
	char *dir;
	uint64_t off[2];        /* acknowledged by the master: stdout, stderr */
	pid_t pid;
	bool running, running_reported;
	int64_t checkpoint_reported; /* the checkpoint_at the master has (wall us; 0: none) */
	bool finished;
	struct task_exit exit;
	json_t *progress;       /* owned: how far its start is (staging, building), not reported yet */
	uint64_t retry_at;      /* mono ms; 0: now */
	unsigned backoff;
	struct metric_ship *metrics; /* owned: its training metrics */
	struct ckpt_watch *ckpt;     /* owned: its checkpoint dir, once running; else NULL */
	struct ship_task *next;
};


static const char *const stream_names[2] = { "stdout", "stderr" };

void shipper_post(struct shipper *sh, struct ship_event *ev)
{
	pthread_mutex_lock(&sh->lock);
	ev->next = NULL;
	if (sh->tail)
		sh->tail->next = ev;
	else
		sh->head = ev;
	sh->tail = ev;
	pthread_cond_signal(&sh->cond);
	pthread_mutex_unlock(&sh->lock);
}

void ship_event(struct shipper *sh, enum ship_event_kind kind, int64_t id, pid_t pid,
		       const struct task_exit *e)
{
	struct ship_event *ev = xcalloc(1, sizeof(*ev));
	ev->kind = kind;
	ev->id = id;
	ev->pid = pid;
	if (e)
		ev->exit = *e;
	shipper_post(sh, ev);
}

/* How far a task's start is: REPORT (owned: {state, ...}) goes to the
 * master in place of any earlier one not sent yet. */
void ship_progress(struct shipper *sh, int64_t id, json_t *report)
{
	struct ship_event *ev = xcalloc(1, sizeof(*ev));
	ev->kind = SHIP_PROGRESS;
	ev->id = id;
	json_object_set_new(report, "id", json_integer((json_int_t)id));
	ev->report = report;
	shipper_post(sh, ev);
}

static struct ship_task *ship_find(struct shipper *sh, int64_t id)
{
	for (struct ship_task *t = sh->tasks; t; t = t->next)
		if (t->id == id)
			return t;
	return NULL;
}

static void ship_load_offsets(struct ship_task *t)
{
	json_t *doc;
	if (taskdir_read_json(t->dir, "shipped.json", &doc, NULL))
		return;
	for (int i = 0; i < 2; i++)
		t->off[i] = (uint64_t)json_integer_value(json_object_get(doc, stream_names[i]));
	json_decref(doc);
}

static void ship_save_offsets(struct ship_task *t)
{
	json_t *doc = json_pack("{s:I, s:I}", "stdout", (json_int_t)t->off[0], "stderr",
				(json_int_t)t->off[1]);
	taskdir_write_json(t->dir, "shipped.json", doc, 0, NULL);
	json_decref(doc);
}

static void ship_apply(struct shipper *sh, struct ship_event *ev)
{
	if (ev->kind == SHIP_EXEC) {
		if (!sh->exec_reports)
			sh->exec_reports = json_array();
		json_array_append_new(sh->exec_reports, ev->report);
		ev->report = NULL;
		return;
	}
	struct ship_task *t = ship_find(sh, ev->id);
	if (!t) {
		t = xcalloc(1, sizeof(*t));
		t->id = ev->id;
		t->dir = xasprintf("%s/tasks/%" PRId64, sh->s->work_dir, ev->id);
		ship_load_offsets(t);
		t->metrics = metric_ship_new(t->dir, t->id);
		t->next = sh->tasks;
		sh->tasks = t;
	}
	if (ev->kind == SHIP_RUNNING) {
		t->running = true;
		t->pid = ev->pid;
		if (!t->ckpt)
			t->ckpt = ckpt_watch_new(t->dir);
	} else if (ev->kind == SHIP_FINISHED) {
		t->finished = true;
		t->exit = ev->exit;
	} else if (ev->kind == SHIP_PROGRESS) {
		json_decref(t->progress);
		t->progress = ev->report;
		ev->report = NULL;
	}
}

static void ship_sync_creds(struct shipper *sh)
{
	char *id, *token;
	unsigned gen = session_creds(sh->s, &id, &token);
	httpc_set_token(&sh->c, token);
	httpc_set_token(&sh->mw.c, token); /* the worker waits for a task now */
	if (gen != sh->gen) {
		/* a new registration: report everything again */
		sh->gen = gen;
		for (struct ship_task *t = sh->tasks; t; t = t->next)
			t->running_reported = false;
	}
	free(id);
	free(token);
}

/* Ships what is new in one stream; returns 1 when fully shipped (as far as
 * the file goes), 0 when more is left or an error asks for a retry. */
static int ship_stream(struct shipper *sh, struct ship_task *t, int i)
{
	char *path = xasprintf("%s/%s", t->dir, stream_names[i]);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	int done = 0;
	char *buf = NULL;
	free(path);
	if (fd < 0)
		return 1; /* no output (yet) */
	if (fstat(fd, &st) < 0)
		goto out;
	buf = xmalloc(LOG_CHUNK);
	for (int rounds = 0;; rounds++) {
		if (t->off[i] >= (uint64_t)st.st_size) {
			done = 1;
			break;
		}
		if (rounds == LOG_ROUNDS) {
			/* more output than a round takes: the next round goes at once */
			sh->backlog = true;
			break;
		}
		size_t want = (uint64_t)st.st_size - t->off[i] > LOG_CHUNK ? LOG_CHUNK
					: (size_t)((uint64_t)st.st_size - t->off[i]);
		ssize_t n = pread(fd, buf, want, (off_t)t->off[i]);
		if (n <= 0)
			break;
		char *p = xasprintf("/v1/tasks/%" PRId64 "/log?stream=%s&offset=%" PRIu64, t->id,
				    stream_names[i], t->off[i]);
		struct httpc_response res;
		struct errbuf eb = ERRBUF_INIT;
		httpc_response_init(&res);
		int ret = httpc_request(&sh->c, "POST", p, buf, (size_t)n, "application/octet-stream", &res, &eb);
		free(p);
		json_t *doc = res.body.len ? json_loadb(res.body.buf, res.body.len, 0, NULL) : NULL;
		json_t *size = json_object_get(doc, "size");
		long status = res.status;
		if (ret == 0 && status == 200 && json_is_integer(size)) {
			uint64_t have = (uint64_t)json_integer_value(size);
			t->off[i] = have > t->off[i] + (uint64_t)n ? t->off[i] + (uint64_t)n : have;
			if (t->off[i] < have)
				t->off[i] = have;
			ship_save_offsets(t);
		} else if (ret == 0 && status == 409 && json_is_integer(size)) {
			t->off[i] = (uint64_t)json_integer_value(size);
			ship_save_offsets(t);
		} else if (status == 401 || status == 404) {
			const char *why = json_string_value(json_object_get(json_object_get(doc, "error"),
									   "message"));
			session_refused(sh->s, sh->gen, status, why ? why : eb.msg);
			json_decref(doc);
			httpc_response_release(&res);
			break;
		} else {
			json_decref(doc);
			httpc_response_release(&res);
			t->retry_at = mono_ms() + backoff_next(&t->backoff);
			break;
		}
		t->backoff = 0;
		json_decref(doc);
		httpc_response_release(&res);
	}
out:
	free(buf);
	close(fd);
	return done;
}

/*
 * The task's training metrics (agent/metricship.h) are parsed from its
 * output and shipped by the metrics worker, side by side with its logs:
 * metrics_start hands the task over, metrics_join waits for the result.
 * Between the two the shipper leaves t->metrics and t->finished alone.
 * (On one thread, parsing a gigabyte of a task's lines was a third of the
 * agent's work, and the master waited for the next chunk of its log all
 * the while.)
 */
static void *metrics_worker_thread(void *arg)
{
	struct shipper *sh = arg;
	struct metrics_worker *w = &sh->mw;

	pthread_mutex_lock(&sh->lock);
	for (;;) {
		while (!w->task && !w->quit)
			pthread_cond_wait(&w->cond, &sh->lock);
		if (w->quit)
			break;
		struct ship_task *t = w->task;
		pthread_mutex_unlock(&sh->lock);
		struct errbuf eb = ERRBUF_INIT;
		long status = 0;
		int r = metric_ship_run(t->metrics, &w->c, t->finished, &status, &eb);
		pthread_mutex_lock(&sh->lock);
		w->result = r;
		w->status = status;
		w->eb = eb;
		w->task = NULL;
		w->busy = false;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&sh->lock);
	crypto_thread_done();
	return NULL;
}

static void metrics_worker_start(struct shipper *sh)
{
	struct metrics_worker *w = &sh->mw;

	httpc_init_like(&w->c, &sh->c);
	pthread_cond_init(&w->cond, NULL);
	w->started = !pthread_create(&w->thread, NULL, metrics_worker_thread, sh);
	if (!w->started)
		fprintf(stderr, "yard agent: cannot start the metrics thread (%s): metrics are "
			"shipped between logs\n", strerror(errno));
}

static void metrics_worker_stop(struct shipper *sh)
{
	struct metrics_worker *w = &sh->mw;

	if (w->started) {
		pthread_mutex_lock(&sh->lock);
		w->quit = true;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&sh->lock);
		pthread_join(w->thread, NULL);
	}
	pthread_cond_destroy(&w->cond);
	httpc_release(&w->c);
}

/* Hands t's metrics to the worker; false when they wait for a retry. */
static bool metrics_start(struct shipper *sh, struct ship_task *t)
{
	struct metrics_worker *w = &sh->mw;

	if (t->retry_at > mono_ms())
		return false;
	pthread_mutex_lock(&sh->lock);
	w->busy = true;
	if (w->started) {
		w->task = t;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&sh->lock);
	return true;
}

/* What became of metrics_start's: 1 when all are acknowledged, 0 when more
 * is left or a retry is due. */
static int metrics_join(struct shipper *sh, struct ship_task *t, bool started)
{
	struct metrics_worker *w = &sh->mw;

	if (!started)
		return 0;
	if (!w->started) {
		w->eb = (struct errbuf)ERRBUF_INIT;
		w->result = metric_ship_run(t->metrics, &w->c, t->finished, &w->status, &w->eb);
		w->busy = false;
	}
	pthread_mutex_lock(&sh->lock);
	while (w->busy)
		pthread_cond_wait(&w->cond, &sh->lock);
	pthread_mutex_unlock(&sh->lock);
	int r = w->result;
	long status = w->status;
	struct errbuf eb = w->eb;
	if (r >= 0)
		return r;
	if (status == 401 || status == 404) {
		session_refused(sh->s, sh->gen, status, eb.msg);
	} else {
		fprintf(stderr, "yard agent: cannot ship the metrics of task %" PRId64 ": %s\n", t->id, eb.msg);
		t->retry_at = mono_ms() + backoff_next(&t->backoff);
	}
	return 0;
}

static void ship_task_free(struct ship_task *t)
{
	metric_ship_free(t->metrics);
	ckpt_watch_free(t->ckpt);
	json_decref(t->progress);
	free(t->dir);
	free(t);
}

static json_t *exit_report(const struct ship_task *t)
{
	json_t *r = task_exit_json(&t->exit);
	json_object_set_new(r, "id", json_integer((json_int_t)t->id));
	json_object_set_new(r, "state", json_string(t->exit.start_failed ? "start_failed" : "exited"));
	/* what the master must hold before it takes the end (its reply's
	 * "logs" says when it does not) */
	json_object_set_new(r, "log_size", json_pack("{s:I, s:I}", "stdout", (json_int_t)t->off[0],
						     "stderr", (json_int_t)t->off[1]));
	return r;
}

/* Once the final status is acknowledged the task dir is no longer needed:
 * a marker in WORK/finished remembers the id so it is never started again. */
static void ship_retire(struct shipper *sh, struct ship_task *t)
{
	char *rep = xasprintf("%s/reported", t->dir);
	char *fin = xasprintf("%s/finished", sh->s->work_dir);
	char *mark = xasprintf("%s/%" PRId64, fin, t->id);
	write_file_atomic(rep, "", 0, 0644);
	mkdir_p(fin, 0755);
	write_file_atomic(mark, "", 0, 0644);
	rm_rf(t->dir);
	free(rep);
	free(fin);
	free(mark);
}

/* Whether the master's answer to a status report says it lost logs of t
 * it had acknowledged (logs: [{id, stdout, stderr}], the sizes it holds,
 * when its machine went down before they reached its disk): they are
 * shipped again from there. */
static bool ship_logs_lost(struct ship_task *t, const json_t *logs)
{
	size_t i;
	json_t *l;

	json_array_foreach(logs, i, l) {
		if (json_integer_value(json_object_get(l, "id")) != t->id)
			continue;
		for (int s = 0; s < 2; s++) {
			json_int_t have = json_integer_value(json_object_get(l, stream_names[s]));
			if (have >= 0 && (uint64_t)have < t->off[s])
				t->off[s] = (uint64_t)have;
		}
		fprintf(stderr, "yard agent: the master lost logs of task %" PRId64 " it had: shipping "
			"them again from %" PRIu64 " (stdout) and %" PRIu64 " (stderr)\n", t->id,
			t->off[0], t->off[1]);
		ship_save_offsets(t);
		return true;
	}
	return false;
}

static void ship_round(struct shipper *sh)
{
	json_t *reports = json_array();
	uint64_t now = mono_ms();
	sh->backlog = false;
	ship_sync_creds(sh);
	pthread_mutex_lock(&sh->s->lock);
	bool back = sh->back != sh->s->back;
	sh->back = sh->s->back;
	pthread_mutex_unlock(&sh->s->lock);
	for (struct ship_task *t = sh->tasks; t; t = t->next) {
		if (back) {
			/* the master answers again (restarted, or a partition
			 * healed): what waited out a back-off goes now */
			t->retry_at = 0;
			t->backoff = 0;
		}
		if (t->retry_at > now)
			continue;
		bool metrics = metrics_start(sh, t);
		int all = ship_stream(sh, t, 0) & ship_stream(sh, t, 1);
		all &= metrics_join(sh, t, metrics);
		/* its last checkpoint: an @yard line, or a change to its checkpoint dir */
		int64_t ck = metric_ship_checkpoint_at(t->metrics);
		int64_t dir_ck = t->finished ? 0 : ckpt_watch_poll(t->ckpt, (int64_t)wall_us());
		if (dir_ck > ck)
			ck = dir_ck;
		if (t->finished && all)
			json_array_append_new(reports, exit_report(t));
		else if (t->running && !t->finished &&
			 (!t->running_reported || ck != t->checkpoint_reported)) {
			/* running, and when it last checkpointed (absent: never) */
			json_t *r = json_pack("{s:I, s:s, s:i}", "id", (json_int_t)t->id, "state", "running",
					      "pid", (int)t->pid);
			if (ck)
				json_object_set_new(r, "checkpoint_at", json_integer(ck));
			json_t *img; /* the image built from its code it runs in (imagebuild.h) */
			if (!t->running_reported && !taskdir_read_json(t->dir, IMAGEBUILD_FILE, &img, NULL))
				json_object_set_new(r, "image", img);
			json_array_append_new(reports, r);
		}
		else if (t->progress && !t->running && !t->finished) {
			/* progress only: a master that does not know the state ignores it */
			json_array_append_new(reports, t->progress);
			t->progress = NULL;
		}
	}
	size_t nexec = json_array_size(sh->exec_reports);
	json_t *util = NULL; /* [{"index", "util"}] when a sample is due */
	if (sh->sampler && now >= sh->util_at) {
		int u[GPU_UTIL_MAX];
		size_t n = gpu_sampler_util(sh->sampler, u, GPU_UTIL_MAX);
		sh->util_at = now + GPU_UTIL_MS;
		util = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(util, json_pack("{s:I, s:o}", "index", (json_int_t)i, "util",
							      u[i] < 0 ? json_null() : json_integer(u[i])));
	}
	if (!json_array_size(reports) && !nexec && !util)
		goto out;
	char *id, *token;
	session_creds(sh->s, &id, &token);
	char *esc = url_escape(id);
	char *path = xasprintf("/v1/agents/%s/status", esc);
	json_t *body = json_pack("{s:O, s:o}", "tasks", reports, "cache", session_cache_keys(sh->s));
	if (nexec)
		json_object_set(body, "execs", sh->exec_reports);
	if (util)
		json_object_set_new(body, "gpus", util);
	long status = 0;
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL;
	int ret = httpc_json(&sh->c, "POST", path, body, &reply, &status, &eb);
	session_contact(sh->s, status > 0, &sh->c);
	json_decref(body);
	free(path);
	free(esc);
	free(id);
	free(token);
	if (ret == 0) {
		size_t i;
		json_t *r;
		sh->status_backoff = 0;
		/* acknowledged: drop the exec reports sent (more may have come since) */
		for (size_t k = 0; k < nexec; k++)
			json_array_remove(sh->exec_reports, 0);
		json_array_foreach(reports, i, r) {
			struct ship_task **pp = &sh->tasks;
			int64_t tid = json_integer_value(json_object_get(r, "id"));
			while (*pp && (*pp)->id != tid)
				pp = &(*pp)->next;
			struct ship_task *t = *pp;
			const char *state = json_string_value(json_object_get(r, "state"));
			if (!t)
				continue;
			if (ship_logs_lost(t, json_object_get(reply, "logs"))) {
				/* its end waits until they are shipped again */
			} else if (!strcmp(state, "exited") || !strcmp(state, "start_failed")) {
				/* its end (exit_report): the task is done with */
				ship_retire(sh, t);
				*pp = t->next;
				ship_task_free(t);
			} else if (!strcmp(state, "running")) {
				const json_t *ck = json_object_get(r, "checkpoint_at");
				t->running_reported = true;
				t->checkpoint_reported = json_is_integer(ck) ? json_integer_value(ck) : 0;
			} /* else progress (staging, building): nothing more to do */
		}
	} else if (status == 401 || status == 404) {
		session_refused(sh->s, sh->gen, status, eb.msg);
	} else {
		fprintf(stderr, "yard agent: cannot report status: %s\n", eb.msg);
		sleep_backoff(sh->s, backoff_next(&sh->status_backoff));
	}
	json_decref(reply);
out:
	json_decref(reports);
}

static void *shipper_thread(void *arg)
{
	struct shipper *sh = arg;
	httpc_init(&sh->c, sh->s->master_url, &sh->s->tls, NULL);
	sh->c.timeout_ms = 30000;
	metrics_worker_start(sh);
	for (;;) {
		pthread_mutex_lock(&sh->lock);
		/* a task that writes faster than a round ships: the next round
		 * now, not a tick later (a tick's wait capped a task's log at
		 * 16 MiB per 50 ms) */
		if (!sh->head && !sh->quit && !sh->backlog) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += SHIP_TICK_MS * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&sh->cond, &sh->lock, &ts);
		}
		struct ship_event *evs = sh->head;
		sh->head = sh->tail = NULL;
		bool quit = sh->quit;
		pthread_mutex_unlock(&sh->lock);
		while (evs) {
			struct ship_event *next = evs->next;
			ship_apply(sh, evs);
			free(evs);
			evs = next;
		}
		if (quit)
			break;
		ship_round(sh);
	}
	while (sh->tasks) {
		struct ship_task *t = sh->tasks;
		sh->tasks = t->next;
		ship_task_free(t);
	}
	json_decref(sh->exec_reports);
	metrics_worker_stop(sh);
	httpc_release(&sh->c);
	crypto_thread_done();
	return NULL;
}

int shipper_start(struct shipper *sh, struct session *s, struct gpu_sampler *sampler)
{
	memset(sh, 0, sizeof(*sh));
	sh->s = s;
	sh->sampler = sampler;
	pthread_mutex_init(&sh->lock, NULL);
	pthread_cond_init(&sh->cond, NULL);
	pthread_mutex_lock(&s->lock);
	s->refs++;
	pthread_mutex_unlock(&s->lock);
	if (pthread_create(&sh->thread, NULL, shipper_thread, sh) == 0)
		return 0;
	session_unref(s);
	sh->s = NULL;
	return -1;
}

void shipper_stop(struct shipper *sh)
{
	pthread_mutex_lock(&sh->lock);
	sh->quit = true;
	pthread_cond_signal(&sh->cond);
	pthread_mutex_unlock(&sh->lock);
	if (sh->s)
		pthread_join(sh->thread, NULL);
	while (sh->head) {
		struct ship_event *n = sh->head->next;
		json_decref(sh->head->report);
		free(sh->head);
		sh->head = n;
	}
	pthread_mutex_destroy(&sh->lock);
	pthread_cond_destroy(&sh->cond);
	gpu_sampler_free(sh->sampler);
	if (sh->s)
		session_unref(sh->s);
	sh->s = NULL;
}
