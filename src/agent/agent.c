/*
 * The agent. Four threads:
 * - the main thread runs a libuv loop that owns the task table: it
 *   reconciles desired against actual state the moment a work reply arrives
 *   (uv_async), starts and stops tasks through a runtime, and watches each
 *   task's start pipe and exit pidfd (uv_poll);
 * - the poll thread long-polls GET /v1/agents/{id}/work and hands each reply
 *   to the main loop (session.h);
 * - the shipper thread does every other request: log shipping and status
 *   reports, retried until acknowledged (shipper.h);
 * - the heartbeat thread keeps WORK/heartbeat.json fresh for the shims (heartbeat.h).
 * Registration (and re-registration on 401/404) is shared by the first three
 * through struct session (session.h).
 */
#include "base/compat.h"
#include "agent/agent.h"

#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <sys/wait.h>
#include <uv.h>

#include "agent/cache.h"
#include "agent/outputs.h"
#include "agent/cgroup.h"
#include "agent/docker.h"
#include "agent/ephemeral.h"
#include "agent/fetch.h"
#include "agent/gpu.h"
#include "agent/heartbeat.h"
#include "agent/imagestore.h"
#include "agent/runas.h"
#include "agent/runtime.h"
#include "agent/session.h"
#include "agent/sessions.h"
#include "agent/shipper.h"
#include "agent/stage.h"
#include "agent/taskdir.h"
#include "base/clock.h"
#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/spawn.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/httpc.h"
#include "common/spec.h"


/* ---- the main loop ---- */

struct agent;
struct astage;

struct atask {
	struct agent *a;
	const struct runtime_ops *ops;
	struct runtime_task rt;
	uv_poll_t start_poll, exit_poll;
	bool start_active, exit_active;
	int closing;             /* handles still to close before free */
	bool stop_sent, done;
	bool running;            /* the shim reported the task running */
	bool building_said;      /* its image's build was reported */
	bool keep_on_disconnect; /* its job's on_disconnect is keep: never fenced */
	int64_t job;             /* the task's job (task.json) */
	struct astage *staging;  /* its data is being staged (owned by the work request) */
	unsigned uploading;      /* its outputs, checkpoint being handed in; its end waits (exit) */
	struct task_exit exit;
	json_t *execs_wanted;    /* owned: the master's pending execs of the task */
	int64_t *exec_ids;       /* execs started (never started twice) */
	size_t nexec_ids, aexec_ids;
	struct atask *next;
};

/* An exec running inside a task (see src/master/execs.h): a `yard shim
 * --exec` process, our child, watched through a pidfd. */
struct aexec {
	struct agent *a;
	int64_t task, id;
	char *dir;               /* TASKDIR/execs/ID */
	pid_t pid;
	int pidfd;
	uv_poll_t poll;
	struct aexec *next;
};

struct agent {
	const struct agent_config *cfg;
	struct runtime_ctx ctx;
	struct gpu_list gpus;
	uv_loop_t loop;
	uv_async_t wake;
	uv_timer_t tick;
	struct session *s;
	struct shipper sh;
	struct heartbeat_writer hb; /* WORK/heartbeat.json, for the shims (heartbeat.h) */
	pthread_mutex_t fetch_lock; /* agent/fetch.h: one fetch at a time */
	struct cache cache;         /* WORK/cache */
	bool closing;               /* agent_run is on its way out */
	struct atask *tasks;
	struct aexec *execs;
	struct agent_sessions sessions; /* sessions into its tasks (agent/sessions.h) */
	int64_t *finished;          /* ids never to start again */
	size_t nfinished, afinished;
	volatile sig_atomic_t *stop;
	struct ephemeral eph;       /* --ephemeral: when and why it leaves */
};

static bool is_finished(struct agent *a, int64_t id)
{
	for (size_t i = 0; i < a->nfinished; i++)
		if (a->finished[i] == id)
			return true;
	return false;
}

static void add_finished(struct agent *a, int64_t id)
{
	if (is_finished(a, id))
		return;
	ALLOC_GROW(a->finished, a->nfinished + 1, a->afinished);
	a->finished[a->nfinished++] = id;
}

static struct atask *find_task(struct agent *a, int64_t id)
{
	for (struct atask *t = a->tasks; t; t = t->next)
		if (t->rt.id == id && !t->done)
			return t;
	return NULL;
}

static void on_handle_closed(uv_handle_t *h)
{
	struct atask *t = h->data;
	if (--t->closing == 0) {
		t->ops->cleanup(&t->rt);
		json_decref(t->execs_wanted);
		free(t->exec_ids);
		free(t);
	}
}

/* Unlinks t and frees it once its handles are closed. */
static void stage_cancel(struct atask *t);

static void task_forget(struct agent *a, struct atask *t)
{
	struct atask **pp = &a->tasks;
	while (*pp && *pp != t)
		pp = &(*pp)->next;
	if (*pp)
		*pp = t->next;
	t->done = true;
	if (t->uploading)
		return; /* freed by ckpt_uploaded, once the worker lets go of it */
	if (t->staging) {
		/* freed by stage_done once the worker thread lets go of it */
		stage_cancel(t);
		return;
	}
	t->closing = 1;
	if (t->start_active) {
		t->closing++;
		uv_close((uv_handle_t *)&t->start_poll, on_handle_closed);
	}
	if (t->exit_active) {
		t->closing++;
		uv_close((uv_handle_t *)&t->exit_poll, on_handle_closed);
	}
	on_handle_closed((uv_handle_t *)&(uv_poll_t){ .data = t });
}

/* ---- execs inside tasks ---- */

static void on_exec_closed(uv_handle_t *h)
{
	struct aexec *x = h->data;
	/* closed after the loop let go of it (see runtime.h on start_fd) */
	if (x->pidfd >= 0)
		close(x->pidfd);
	free(x->dir);
	free(x);
}

static void exec_forget(struct agent *a, struct aexec *x)
{
	struct aexec **pp = &a->execs;
	while (*pp && *pp != x)
		pp = &(*pp)->next;
	if (*pp)
		*pp = x->next;
	uv_close((uv_handle_t *)&x->poll, on_exec_closed);
}

/* Hands the exec's verdict (its exit.json) to the shipper. */
static void exec_report(struct agent *a, int64_t task, int64_t id, const char *dir)
{
	struct task_exit e;
	struct ship_event *ev;

	if (task_exit_read(dir, &e, NULL)) {
		memset(&e, 0, sizeof(e));
		snprintf(e.reason, sizeof(e.reason), "lost: the exec's shim died without a verdict");
	}
	ev = xcalloc(1, sizeof(*ev));
	ev->kind = SHIP_EXEC;
	ev->report = task_exit_json(&e);
	json_object_set_new(ev->report, "task", json_integer((json_int_t)task));
	json_object_set_new(ev->report, "id", json_integer((json_int_t)id));
	shipper_post(&a->sh, ev);
}

static void on_exec_exit(uv_poll_t *h, int status, int events)
{
	struct aexec *x = h->data;

	waitpid(x->pid, NULL, 0);
	uv_poll_stop(h);
	exec_report(x->a, x->task, x->id, x->dir);
	exec_forget(x->a, x);
}

static bool exec_known(const struct atask *t, int64_t id)
{
	for (size_t i = 0; i < t->nexec_ids; i++)
		if (t->exec_ids[i] == id)
			return true;
	return false;
}

static void exec_start(struct agent *a, struct atask *t, int64_t id, json_t *argv)
{
	struct errbuf eb = ERRBUF_INIT;
	char idbuf[24];
	snprintf(idbuf, sizeof(idbuf), "%" PRId64, id);
	char *dir = xasprintf("%s/execs/%s", t->rt.dir, idbuf);
	char *shim_argv[] = { (char *)a->ctx.shim_exe, "shim", "--dir", t->rt.dir, "--exec", idbuf, NULL };
	json_t *doc = json_pack("{s:O}", "argv", argv);
	struct spawn_opts o;
	pid_t pid = -1;
	int log_fd, ret;

	ALLOC_GROW(t->exec_ids, t->nexec_ids + 1, t->aexec_ids);
	t->exec_ids[t->nexec_ids++] = id;
	ret = mkdir_p(dir, 0755) < 0 ? error(&eb, YERR(IO), "cannot create '%s': %s", dir, strerror(errno))
				     : taskdir_write_json(dir, "exec.json", doc, 0, &eb);
	json_decref(doc);
	if (!ret) {
		char *log = xasprintf("%s/shim.log", t->rt.dir);
		log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		free(log);
		spawn_opts_init(&o);
		o.argv = shim_argv;
		o.stderr_fd = log_fd;
		o.flags = SPAWN_SETSID | SPAWN_FAST;
		ret = spawn_process(&o, &pid, NULL, &eb);
		if (log_fd >= 0)
			close(log_fd);
	}
	int pidfd = ret ? -1 : pidfd_open_pid(pid);
	struct aexec *x = xcalloc(1, sizeof(*x));
	if (pidfd < 0 || uv_poll_init(&a->loop, &x->poll, pidfd) != 0) {
		/* report the failure (or an exec we cannot watch) at once */
		struct task_exit e;
		memset(&e, 0, sizeof(e));
		e.start_failed = true;
		snprintf(e.reason, sizeof(e.reason), "start_failed: %s",
			 ret ? eb.msg : "cannot watch the exec's shim");
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		if (pidfd >= 0)
			close(pidfd);
		task_exit_write(dir, &e, NULL);
		exec_report(a, t->rt.id, id, dir);
		free(dir);
		free(x);
		return;
	}
	x->a = a;
	x->task = t->rt.id;
	x->id = id;
	x->dir = dir;
	x->pid = pid;
	x->pidfd = pidfd;
	x->poll.data = x;
	x->next = a->execs;
	a->execs = x;
	uv_poll_start(&x->poll, UV_READABLE, on_exec_exit);
}

/* Starts the execs the master wants in t that have not been started. Only
 * once the task runs: its cgroup and environment exist then. */
static void task_run_execs(struct agent *a, struct atask *t)
{
	size_t i;
	json_t *d;

	if (!t->running || t->done || t->stop_sent)
		return;
	json_array_foreach(t->execs_wanted, i, d) {
		int64_t id = json_integer_value(json_object_get(d, "id"));
		json_t *argv = json_object_get(d, "argv");
		if (id > 0 && json_is_array(argv) && !exec_known(t, id))
			exec_start(a, t, id, argv);
	}
}

/* Execs end with their task (its cgroup is killed); without cgroups, the
 * agent stops what is left of them. */
static void task_stop_execs(struct agent *a, int64_t task)
{
	for (struct aexec *x = a->execs; x; x = x->next)
		if (x->task == task && x->pid > 0 && x->pidfd >= 0)
			kill(x->pid, SIGTERM);
}

static int task_upload(struct agent *a, struct atask *t, bool ckpt);
static void task_put_user(struct agent *a, struct atask *t);

static void task_finish_rest(struct agent *a, struct atask *t, const struct task_exit *e)
{
	json_t *tj = NULL;
	if (taskdir_read_json(t->rt.dir, "staged.json", &tj, NULL) == 0) {
		stage_unhold(&a->cache, json_object_get(tj, "keys"));
		json_decref(tj);
	}
	task_put_user(a, t);
	add_finished(a, t->rt.id);
	ship_event(&a->sh, SHIP_FINISHED, t->rt.id, 0, e);
	task_forget(a, t);
}

/* The task has finished: its outputs go to the master (off the loop,
 * outputs.h), and its job's checkpoint if it is its attempt's first task;
 * then its end is reported (task_uploaded), so that a restart never misses
 * the checkpoint, and its user is held until its outputs are packed. */
static void task_finish(struct agent *a, struct atask *t, const struct task_exit *e)
{
	json_t *tj = NULL;
	task_stop_execs(a, t->rt.id);
	agent_sessions_task_ended(&a->sessions, t->rt.id);
	bool owner = taskdir_read_json(t->rt.dir, "task.json", &tj, NULL) == 0 &&
		     json_is_true(json_object_get(tj, "checkpoint_owner"));
	json_decref(tj);
	t->exit = *e;
	t->uploading = (task_upload(a, t, false) == 0) + (owner && task_upload(a, t, true) == 0);
	if (!t->uploading)
		task_finish_rest(a, t, e);
	else if (t->exit_active)
		uv_poll_stop(&t->exit_poll); /* readable until closed */
}

static void check_exit(struct agent *a, struct atask *t)
{
	struct task_exit e;
	if (t->done || t->staging || t->uploading || t->ops->wait(&t->rt, &e) != 0)
		return;
	if (t->start_active) {
		/* read a "running" line that came just before the exit */
		pid_t pid = 0;
		if (t->ops->started(&t->rt, &pid) == 1)
			ship_event(&a->sh, SHIP_RUNNING, t->rt.id, pid, NULL);
	}
	task_finish(a, t, &e);
}

static void on_exit_poll(uv_poll_t *h, int status, int events)
{
	struct atask *t = h->data;
	check_exit(t->a, t);
}

/* The image t's shim built and saved for the master's store, if any, goes
 * there (imagestore.h). */
static void task_hand_in_image(struct agent *a, struct atask *t)
{
	char *id, *token;
	session_creds(a->s, &id, &token);
	struct imagestore_conn c = { a->cfg->master_url, token, { a->cfg->master_ca, a->cfg->master_pin } };
	imagestore_hand_in(&a->loop, &c, a->cfg->work_dir, t->rt.id, t->rt.dir);
	free(id);
	free(token);
}

static void on_start_poll(uv_poll_t *h, int status, int events)
{
	struct atask *t = h->data;
	pid_t pid = 0;
	int r = t->ops->started(&t->rt, &pid);
	if (r == YERR(UNAVAILABLE) && t->rt.building[0] && !t->building_said) {
		/* its image is being built (imagebuild.h): the job says so */
		t->building_said = true;
		ship_progress(&t->a->sh, t->rt.id, json_pack("{s:s, s:s}", "state", "building", "image",
								 t->rt.building));
	}
	if (r == YERR(UNAVAILABLE))
		return;
	uv_poll_stop(h);
	if (r == 1) {
		ship_event(&t->a->sh, SHIP_RUNNING, t->rt.id, pid, NULL);
		t->running = true;
		task_run_execs(t->a, t);
		if (t->ops == &runtime_docker_ops)
			task_hand_in_image(t->a, t);
	}
	/* a failed start ends with exit.json; the exit pidfd reports it */
}

static void watch_task(struct agent *a, struct atask *t)
{
	if (t->rt.start_fd >= 0 && uv_poll_init(&a->loop, &t->start_poll, t->rt.start_fd) == 0) {
		t->start_poll.data = t;
		t->start_active = true;
		uv_poll_start(&t->start_poll, UV_READABLE | UV_DISCONNECT, on_start_poll);
	}
	if (t->rt.exit_fd >= 0 && uv_poll_init(&a->loop, &t->exit_poll, t->rt.exit_fd) == 0) {
		t->exit_poll.data = t;
		t->exit_active = true;
		uv_poll_start(&t->exit_poll, UV_READABLE, on_exit_poll);
	}
}

/* What the agent keeps of a task's assignment (TASKDIR/task.json): a task
 * in an image (or one built) runs in a container, any other as processes; and whether its
 * job's on_disconnect is keep (fence() leaves it running). */
static void task_configure(struct atask *t, const json_t *task)
{
	bool image = json_is_string(json_object_get(task, "image")) || json_object_get(task, "image_build");
	t->ops = image ? &runtime_docker_ops : &runtime_process_ops;
	t->keep_on_disconnect = fence_spares(task);
	t->job = json_integer_value(json_object_get(task, "job"));
}

static struct atask *task_new(struct agent *a, int64_t id)
{
	struct atask *t = xcalloc(1, sizeof(*t));
	t->a = a;
	t->ops = &runtime_process_ops;
	t->rt.id = id;
	t->rt.dir = xasprintf("%s/tasks/%" PRId64, a->cfg->work_dir, id);
	t->rt.start_fd = t->rt.exit_fd = -1;
	t->next = a->tasks;
	a->tasks = t;
	return t;
}

/* The main loop's requests (code, checkpoints) carry the current agent token. */
/* ---- checkpoints: WORK/checkpoints/JOB is shared by the job's tasks on
 * this node; WORK/checkpoints/JOB.digest names the master's checkpoint it
 * holds. The first task of an attempt hands the dir to the master when it
 * ends (before its end is reported, so a restart never misses it); a task
 * whose node holds another checkpoint than the master's latest fetches that
 * one first. A checkpoint thus moves with the job between nodes. ---- */

/* An upload of t's is over (digest: the master's; NULL: nothing handed
 * in): after the last, t's end goes on, or t is freed if it was forgotten
 * meanwhile (the agent is stopping: the next one reports its end, after a
 * new upload). */
static void task_uploaded(void *arg, const char *digest)
{
	struct atask *t = arg;
	if (--t->uploading)
		return;
	if (t->done)
		task_forget(t->a, t);
	else
		task_finish_rest(t->a, t, &t->exit);
}

static void ckpt_uploaded(void *arg, const char *digest)
{
	struct atask *t = arg;
	if (digest)
		ckpt_set_digest(t->a->cfg->work_dir, t->job, digest);
	task_uploaded(arg, digest);
}

/* Queues the upload of t's YARD_OUTPUT_DIR (WORK/outputs/TASK), or
 * (ckpt) of its job's checkpoint dir; t's end goes on in task_uploaded. A
 * task with a user of its own (--run-as) is read as that user. 0 when
 * queued. */
static int task_upload(struct agent *a, struct atask *t, bool ckpt)
{
	char *id, *token;
	session_creds(a->s, &id, &token);
	char *dir = ckpt ? ckpt_path(a->cfg->work_dir, t->job, "") : xasprintf("%s/outputs/%" PRId64, a->cfg->work_dir, t->rt.id);
	char *path = xasprintf("/v1/tasks/%" PRId64 "/%s", t->rt.id, ckpt ? "checkpoint" : "outputs");
	char *what = ckpt ? xasprintf("the checkpoint of job %" PRId64, t->job)
			  : xasprintf("the outputs of task %" PRId64, t->rt.id);
	struct outputs_job j = { a->cfg->master_url, token, { a->cfg->master_ca, a->cfg->master_pin }, path, dir,
				 ckpt ? "checkpoint" : "outputs", what, t->rt.run_as, !ckpt, t->rt.uid,
				 t->rt.gid, ckpt ? ckpt_uploaded : task_uploaded, t };
	int ret = outputs_queue(&a->loop, &j);
	free(id);
	free(token);
	free(dir);
	free(path);
	free(what);
	return ret;
}

/* "yard/NAME-HASH", HASH the first 8 hex digits of the sha256 of the
 * absolute work dir (runtime.h). Caller frees. */
static char *agent_cgroup_base(const char *name, const char *work_dir)
{
	char hex[SHA256_HEX_LEN + 1];
	char *abs = realpath(work_dir, NULL);
	const char *dir = abs ? abs : work_dir;
	sha256_hex(dir, strlen(dir), hex);
	free(abs);
	return xasprintf("yard/%s-%.8s", name, hex);
}

/* Removes the agent's own (empty) cgroup subtree on the way out; a group that
 * still holds a running task's group stays, and rmdir fails harmlessly. */
static void remove_cgroup_base(const struct runtime_ctx *ctx)
{
	const struct cgroup_ops *ops = cgroup_detect(ctx->cgroup_root);
	struct cgroup cg;
	if (!ops)
		return;
	cgroup_init(&cg, ops, ctx->cgroup_root, ctx->cgroup_base);
	for (size_t i = 0; cg.dirs[i]; i++)
		rmdir(cg.dirs[i]);
	cgroup_release(&cg);
}

static void task_fail(struct agent *a, struct atask *t, const char *why)
{
	struct task_exit e;
	memset(&e, 0, sizeof(e));
	e.start_failed = true;
	snprintf(e.reason, sizeof(e.reason), "start_failed: %s", why);
	task_exit_write(t->rt.dir, &e, NULL);
	task_finish(a, t, &e);
}

/* ---- unprivileged tasks (--run-as, agent/runas.h) ---- */

static bool run_as_on(const struct agent *a)
{
	return a->cfg->run_as && a->cfg->run_as->on;
}

/* Makes t's dirs its user's: the code dir (its working dir and HOME) and
 * the job's checkpoint dir belong to it, mode 0700; the task dir is
 * root:GID 0710, so the task reaches its own files (stdout, data) and no
 * other uid enters. Staged data stays root's, read-only to the task. */
static int task_own_dirs(struct agent *a, struct atask *t, struct errbuf *eb)
{
	char *code = xasprintf("%s/code", t->rt.dir), *ckpt = ckpt_path(a->cfg->work_dir, t->job, "");
	const char *failed = NULL;
	int ret = 0;

	if (mkdir_p(code, 0700) < 0 || mkdir_p(ckpt, 0700) < 0)
		failed = "create";
	else if (chown_tree(code, t->rt.uid, t->rt.gid) < 0 || chown_tree(ckpt, t->rt.uid, t->rt.gid) < 0)
		failed = "give to the task's user";
	else if (chmod(code, 0700) < 0 || chmod(ckpt, 0700) < 0 ||
		 chown(t->rt.dir, 0, t->rt.gid) < 0 || chmod(t->rt.dir, 0710) < 0)
		failed = "set the mode of";
	if (failed)
		ret = error(eb, YERR(IO), "cannot %s the dirs of task %" PRId64 " (uid %u): %s", failed,
			    t->rt.id, (unsigned)t->rt.uid, strerror(errno));
	free(code);
	free(ckpt);
	return ret;
}

/* Takes the user t runs as (a uid of the range for its job) and gives it
 * its dirs. */
static int task_take_user(struct agent *a, struct atask *t, struct errbuf *eb)
{
	int ret = runas_acquire(a->cfg->run_as, t->job, &t->rt.uid, &t->rt.gid, eb);

	if (ret)
		return ret;
	t->rt.run_as = true;
	return task_own_dirs(a, t, eb);
}

/* t has ended: its task dir is root's again, so that the next job to hold
 * its uid cannot enter it; when that was the job's last task here, the
 * job's checkpoint dir too (task_own_dirs gives it back on the next start). */
static void task_put_user(struct agent *a, struct atask *t)
{
	if (!t->rt.run_as || !run_as_on(a))
		return;
	t->rt.run_as = false;
	if (chown(t->rt.dir, 0, 0) < 0 && errno != ENOENT)
		fprintf(stderr, "yard agent: task %" PRId64 ": cannot take back '%s': %s\n", t->rt.id,
			t->rt.dir, strerror(errno));
	if (runas_put(a->cfg->run_as, t->rt.uid)) {
		char *ckpt = ckpt_path(a->cfg->work_dir, t->job, "");
		if (chown(ckpt, 0, 0) < 0 && errno != ENOENT)
			fprintf(stderr, "yard agent: job %" PRId64 ": cannot take back '%s': %s\n", t->job, ckpt,
				strerror(errno));
		free(ckpt);
	}
}

/* After a restart: the user a task found in the work dir runs as (its
 * shim.json), held again until it ends. */
static void task_hold_user(struct agent *a, struct atask *t)
{
	json_t *conf = NULL, *ra;

	if (taskdir_read_json(t->rt.dir, "shim.json", &conf, NULL) == 0 &&
	    (ra = json_object_get(conf, "run_as"))) {
		uid_t uid = (uid_t)json_integer_value(json_object_get(ra, "uid"));
		if (run_as_on(a) && runas_hold(a->cfg->run_as, t->job, uid)) {
			t->rt.run_as = true;
			t->rt.uid = uid;
			t->rt.gid = (gid_t)json_integer_value(json_object_get(ra, "gid"));
		} else {
			fprintf(stderr, "yard agent: task %" PRId64 " runs as uid %u, which --run-as does not "
				"give to job %" PRId64 " now: not tracked\n", t->rt.id, (unsigned)uid, t->job);
		}
	}
	json_decref(conf);
}

/* Hands the task, its code extracted and its data staged, to its runtime. */
static void task_launch(struct agent *a, struct atask *t)
{
	struct errbuf eb = ERRBUF_INIT;
	if (run_as_on(a) && task_take_user(a, t, &eb)) {
		task_fail(a, t, eb.msg);
		return;
	}
	if (t->ops->start(&a->ctx, &t->rt, &eb)) {
		task_fail(a, t, eb.msg);
		return;
	}
	watch_task(a, t);
	if (t->rt.exit_fd < 0)
		check_exit(a, t);
}

/* ---- what a task starts from, on a libuv worker thread: its job's code
 * and checkpoint (agent/fetch.h), then its data (agent/stage.h); the task
 * starts from stage_done, back on the loop ---- */

struct astage {
	uv_work_t req;
	struct agent *a;
	struct atask *t;          /* not freed while staging (task_forget waits) */
	int64_t id;
	json_t *data;             /* owned: the assignment's "data", or NULL */
	char *data_dir, *token;   /* owned */
	char *code, *ckpt;        /* owned digests, or NULL */
	char *code_dir, *archive; /* owned: where the code goes; the code archive fetched */
	struct fetch_config fetch;
	bool fetch_failed;        /* eb is the fetch's, not the staging's */
	struct stage_config cfg;
	struct stage_result res;
	struct errbuf eb;
	int ret;
	uint64_t t0;              /* mono ms */
	volatile sig_atomic_t cancel;
};

static void stage_cancel(struct atask *t)
{
	if (t->staging)
		t->staging->cancel = 1;
}

/* From the worker thread: a progress report for the shipper. */
static void on_stage_progress(void *arg, uint64_t staged, uint64_t total)
{
	struct astage *st = arg;
	ship_progress(&st->a->sh, st->id, json_pack("{s:s, s:I, s:I}", "state", "staging", "staged",
						    (json_int_t)staged, "stage_total", (json_int_t)total));
}

static void stage_work(uv_work_t *req)
{
	struct astage *st = req->data;
	st->ret = fetch_task_inputs(&st->fetch, st->code, st->code_dir, st->t->job, st->ckpt, &st->archive,
				    &st->eb);
	st->fetch_failed = st->ret != 0;
	if (!st->ret) /* an image kept in the master's store (imagestore.h) */
		imagestore_fetch(&st->fetch, st->a->ctx.docker_socket, st->t->rt.dir);
	if (!st->ret && json_array_size(st->data))
		st->ret = stage_data(&st->cfg, st->data, st->data_dir, &st->res, &st->eb);
}

static void astage_free(struct astage *st)
{
	stage_result_release(&st->res);
	json_decref(st->data);
	free(st->data_dir);
	free(st->token);
	free(st->code);
	free(st->ckpt);
	free(st->code_dir);
	free(st->archive);
	free(st);
}

/* The cache entries a staging committed are synced off its task's path
 * (agent/cache.h). */
static void cache_sync_work(uv_work_t *req)
{
	struct agent *a = req->data;

	if (cache_sync(&a->cache))
		fprintf(stderr, "yard agent: cannot sync the data cache: %s\n", strerror(errno));
}

static void cache_sync_done(uv_work_t *req, int status)
{
	free(req);
}

static void stage_done(uv_work_t *req, int status)
{
	struct astage *st = req->data;
	struct agent *a = st->a;
	struct atask *t = st->t;

	t->staging = NULL;
	t->rt.code = st->archive;
	st->archive = NULL;
	if (!st->ret && json_array_size(st->data)) {
		json_t *doc = json_pack("{s:O, s:O}", "keys", st->res.keys, "binds", st->res.binds);
		if (taskdir_write_json(t->rt.dir, "staged.json", doc, 0, &st->eb)) {
			stage_unhold(&a->cache, st->res.keys);
			st->ret = YERR(IO);
		}
		json_decref(doc);
	}
	if (!st->ret && json_array_size(st->data))
		fprintf(stderr, "yard agent: task %" PRId64 ": staged %zu entries, %" PRIu64 " bytes of data, %" PRIu64
			" bytes transferred in %" PRIu64 " ms\n", st->id, json_array_size(st->data), st->res.staged,
			st->res.transferred, mono_ms() - st->t0);
	if (t->done) {
		/* forgotten meanwhile (the agent is stopping): no report, no start */
		if (!st->ret)
			stage_unhold(&a->cache, st->res.keys);
		task_forget(a, t);
	} else if (t->stop_sent) {
		if (!st->ret)
			stage_unhold(&a->cache, st->res.keys);
		/* staged.json (if written) is read again by task_finish: drop it */
		char *p = xasprintf("%s/staged.json", t->rt.dir);
		unlink(p);
		free(p);
		task_fail(a, t, "staging_failed: stopped before the task started");
	} else if (st->ret && st->fetch_failed) {
		task_fail(a, t, st->eb.msg);
	} else if (st->ret) {
		char *why = xasprintf("staging_failed: %s", st->eb.msg);
		fprintf(stderr, "yard agent: task %" PRId64 ": %s\n", st->id, why);
		task_fail(a, t, why);
		free(why);
	} else {
		task_launch(a, t);
	}
	if (!st->ret && json_array_size(st->data)) {
		uv_work_t *sync = xcalloc(1, sizeof(*sync));
		sync->data = a;
		if (uv_queue_work(&a->loop, sync, cache_sync_work, cache_sync_done))
			free(sync); /* the next staging syncs it, or the next agent */
	}
	astage_free(st);
}

/* Starts fetching t's code and checkpoint and staging its data (data,
 * code, ckpt: the assignment's); 0 when under way (stage_done continues). */
static int task_stage(struct agent *a, struct atask *t, json_t *data, const char *code, const char *ckpt,
		      struct errbuf *eb)
{
	struct astage *st = xcalloc(1, sizeof(*st));
	char *id;
	session_creds(a->s, &id, &st->token);
	free(id);
	st->a = a;
	st->t = t;
	st->id = t->rt.id;
	st->data = json_incref(data);
	st->data_dir = xasprintf("%s/data", t->rt.dir);
	st->code = code ? xstrdup(code) : NULL;
	st->ckpt = ckpt ? xstrdup(ckpt) : NULL;
	st->code_dir = xasprintf("%s/code", t->rt.dir);
	st->fetch = (struct fetch_config){ a->cfg->work_dir, a->cfg->master_url,
					   { a->cfg->master_ca, a->cfg->master_pin }, st->token, &a->fetch_lock };
	st->t0 = mono_ms();
	st->cfg.cache = &a->cache;
	st->cfg.master_url = a->cfg->master_url;
	st->cfg.token = st->token;
	st->cfg.tls = (struct httpc_tls){ a->cfg->master_ca, a->cfg->master_pin };
	st->cfg.s3_endpoint = a->cfg->s3_endpoint;
	st->cfg.s3_region = a->cfg->s3_region;
	st->cfg.s3_key = a->cfg->s3_key;
	st->cfg.s3_secret = a->cfg->s3_secret;
	st->cfg.symlinks = t->ops != &runtime_docker_ops;
	st->cfg.cancel = &st->cancel;
	st->cfg.progress = on_stage_progress;
	st->cfg.progress_arg = st;
	stage_result_init(&st->res);
	st->req.data = st;
	if (uv_queue_work(&a->loop, &st->req, stage_work, stage_done) != 0) {
		astage_free(st);
		return error(eb, YERR(INTERNAL), "staging_failed: cannot queue the staging");
	}
	t->staging = st;
	return 0;
}

static void start_task(struct agent *a, json_t *assignment, int64_t id)
{
	struct errbuf eb = ERRBUF_INIT;
	struct atask *t = task_new(a, id);
	const char *code = json_string_value(json_object_get(assignment, "code"));
	json_t *data = json_object_get(assignment, "data");
	int ret;

	if (mkdir_p(t->rt.dir, 0755) < 0) {
		ret = error(&eb, YERR(IO), "cannot create '%s': %s", t->rt.dir, strerror(errno));
		goto fail;
	}
	if ((ret = taskdir_write_json(t->rt.dir, "task.json", assignment, 0, &eb)))
		goto fail;
	task_configure(t, assignment);
	ship_event(&a->sh, SHIP_TRACK, id, 0, NULL);
	if (json_is_string(json_object_get(assignment, "error"))) {
		/* the master could not launch it (no port left, ...) */
		ret = error(&eb, YERR(BAD_REQUEST), "%s",
			    json_string_value(json_object_get(assignment, "error")));
		goto fail;
	}
	const char *ckpt = json_string_value(json_object_get(assignment, "checkpoint"));
	if (code || ckpt || json_array_size(data)) {
		if ((ret = task_stage(a, t, data, code, ckpt, &eb)))
			goto fail;
		return;
	}
	task_launch(a, t);
	return;
fail:
	task_fail(a, t, eb.msg);
}

static void stop_task(struct agent *a, struct atask *t)
{
	if (t->stop_sent)
		return;
	t->stop_sent = true;
	if (t->staging) {
		stage_cancel(t); /* never started: stage_done reports it */
		return;
	}
	t->ops->stop(&t->rt);
}

static void reconcile(struct agent *a, json_t *work)
{
	json_t *tasks = json_object_get(work, "tasks"), *d;
	size_t i;
	json_array_foreach(tasks, i, d) {
		json_int_t id = json_integer_value(json_object_get(d, "id"));
		const char *desired = json_string_value(json_object_get(d, "desired"));
		struct atask *t = find_task(a, id);
		if (desired && !strcmp(desired, "run")) {
			if (!t && !is_finished(a, id))
				start_task(a, d, id);
			else if (t) {
				json_decref(t->execs_wanted);
				t->execs_wanted = json_incref(json_object_get(d, "execs"));
				task_run_execs(a, t);
			}
		} else if (t) {
			json_t *grace = json_object_get(d, "stop_grace_ms");
			if (json_is_integer(grace) && !t->stop_sent) {
				/* read by the shim when the stop arrives (shim.h) */
				json_t *doc = json_pack("{s:O}", "grace_ms", grace);
				taskdir_write_json(t->rt.dir, "stop.json", doc, 0, NULL);
				json_decref(doc);
			}
			stop_task(a, t);
		}
	}
	for (struct atask *t = a->tasks; t; t = t->next) {
		bool listed = false;
		json_array_foreach(tasks, i, d)
			if (json_integer_value(json_object_get(d, "id")) == t->rt.id)
				listed = true;
		if (!listed)
			stop_task(a, t);
	}
}

/* What a session into task id is told of it (agent/sessions.h). */
static void session_task(void *arg, int64_t id, struct asession_task *out)
{
	struct atask *t = find_task(arg, id);

	memset(out, 0, sizeof(*out));
	if (!t)
		return;
	out->found = true;
	out->running = t->running && !t->stop_sent && !t->staging;
	out->container = t->ops == &runtime_docker_ops;
	out->dir = xstrdup(t->rt.dir);
}

static void on_wake(uv_async_t *h)
{
	struct agent *a = h->data;
	pthread_mutex_lock(&a->s->lock);
	json_t *work = a->s->work;
	a->s->work = NULL;
	pthread_mutex_unlock(&a->s->lock);
	if (work) {
		char *node = NULL, *token = NULL;
		reconcile(a, work);
		session_creds(a->s, &node, &token);
		agent_sessions_reconcile(&a->sessions, json_object_get(work, "sessions"), node, token,
					 session_task, a);
		free(node);
		free(token);
	}
	if (json_is_true(json_object_get(work, "leave")))
		a->eph.told = true; /* a scale-down: it has no task left */
	json_decref(work);
	if (*a->stop && !a->cfg->ephemeral)
		uv_stop(&a->loop);
}

/* The agent's view of the lease, for fence() and for the shims, which fence
 * when the agent is gone (heartbeat.h). */
static void lease_view(void *arg, struct heartbeat *out)
{
	struct session *s = arg;
	pthread_mutex_lock(&s->lock);
	out->lease_ms = s->lease_ms;
	out->basis_ms = fence_basis(s->last_ok_ms, s->refused, boot_ms());
	pthread_mutex_unlock(&s->lock);
}

/* Fencing: a master out of reach (a partition, not a master that is down:
 * nothing listening answers at once) will declare this node lost when its
 * lease ends and start the node's jobs elsewhere. Before that (the rule of
 * heartbeat.h: two thirds of the lease since the last answer) the tasks of
 * jobs with on_disconnect: stop are stopped, with a grace of a sixth of the
 * lease, so that no job ever runs twice. Reconnected, the agent takes the
 * master's view as always (reconcile). */
static void fence(struct agent *a)
{
	struct heartbeat v;
	uint64_t now = boot_ms();
	unsigned n = 0;

	lease_view(a->s, &v);
	if (!fence_due(v.lease_ms, v.basis_ms, now))
		return;
	for (struct atask *t = a->tasks; t; t = t->next) {
		if (t->done || t->stop_sent || t->keep_on_disconnect)
			continue;
		json_int_t grace = (json_int_t)fence_grace_ms(v.lease_ms);
		json_t *doc = json_pack("{s:I}", "grace_ms", grace);
		taskdir_write_json(t->rt.dir, "stop.json", doc, 0, NULL);
		json_decref(doc);
		stop_task(a, t); /* a staging is cancelled: the task never starts */
		n++;
	}
	if (n)
		fprintf(stderr, "yard agent: no answer from the master for %" PRIu64 " ms (its lease is %" PRIu64
			" ms): stopped %u task%s (on_disconnect: stop)\n", now - v.basis_ms, v.lease_ms,
			n, n == 1 ? "" : "s");
}

/* An ephemeral agent's tick (ephemeral.h): true when its loop is to end. */
static bool ephemeral_leaves(struct agent *a)
{
	bool stop_tasks;
	bool end = ephemeral_tick(&a->eph, *a->stop != 0, a->tasks != NULL, mono_ms(), &stop_tasks);

	for (struct atask *t = a->tasks; stop_tasks && t; t = t->next)
		stop_task(a, t);
	return end;
}

static void on_tick(uv_timer_t *h)
{
	struct agent *a = h->data;
	if (a->cfg->ephemeral ? ephemeral_leaves(a) : *a->stop != 0) {
		uv_stop(&a->loop);
		return;
	}
	fence(a);
	/* tasks without a pidfd are watched by polling */
	struct atask *next;
	for (struct atask *t = a->tasks; t; t = next) {
		next = t->next;
		if (!t->exit_active && !t->staging)
			check_exit(a, t);
	}
}

/* How long a finished task's marker is kept: it only has to outlive any
 * assignment of that task still on its way from the master. */
#define FINISHED_KEEP_S (7 * 24 * 3600)

/* After a restart: execs an earlier agent started are never started again
 * (their outcome is settled by the master when the task ends). */
static void remember_execs(struct atask *t)
{
	char *dir = xasprintf("%s/execs", t->rt.dir);
	size_t n;
	uint64_t *id = dir_ids(dir, &n);

	for (size_t i = 0; i < n; i++) {
		ALLOC_GROW(t->exec_ids, t->nexec_ids + 1, t->aexec_ids);
		t->exec_ids[t->nexec_ids++] = (int64_t)id[i];
	}
	free(id);
	free(dir);
}

/* After a restart: reattach to running tasks, report finished ones. */
static void scan_work_dir(struct agent *a)
{
	char *dir = xasprintf("%s/tasks", a->cfg->work_dir);
	char *fin = xasprintf("%s/finished", a->cfg->work_dir);
	DIR *d = opendir(fin);
	struct dirent *de;
	uint64_t id;
	time_t horizon = time(NULL) - FINISHED_KEEP_S;
	while (d && (de = readdir(d))) {
		struct stat st;
		if (parse_u64_str(de->d_name, &id) < 0)
			continue;
		/* the master stopped sending a finished task long ago: forget it */
		if (fstatat(dirfd(d), de->d_name, &st, 0) == 0 && st.st_mtime < horizon) {
			unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		add_finished(a, (int64_t)id);
	}
	if (d)
		closedir(d);
	size_t nids;
	uint64_t *ids = dir_ids(dir, &nids);
	for (size_t x = 0; x < nids; x++) {
		struct atask *t = task_new(a, (int64_t)ids[x]);
		char *rep = xasprintf("%s/reported", t->rt.dir);
		bool reported = path_exists(rep);
		free(rep);
		if (reported) {
			/* acknowledged: only the clean-up was left */
			add_finished(a, t->rt.id);
			rm_rf(t->rt.dir);
			task_forget(a, t);
			continue;
		}
		ship_event(&a->sh, SHIP_TRACK, t->rt.id, 0, NULL);
		json_t *tj = NULL;
		if (taskdir_read_json(t->rt.dir, "staged.json", &tj, NULL) == 0) {
			/* task_finish releases them */
			json_t *k;
			size_t ki;
			json_array_foreach(json_object_get(tj, "keys"), ki, k)
				if (json_is_string(k))
					cache_hold(&a->cache, json_string_value(k));
			json_decref(tj);
			tj = NULL;
		}
		if (taskdir_read_json(t->rt.dir, "task.json", &tj, NULL) == 0)
			task_configure(t, tj);
		json_decref(tj);
		task_hold_user(a, t);
		if (t->ops->reattach(&a->ctx, &t->rt) == 1) {
			json_t *pj;
			pid_t pid = 0;
			if (taskdir_read_json(t->rt.dir, "task.pid", &pj, NULL) == 0) {
				pid = (pid_t)json_integer_value(json_object_get(pj, "pid"));
				json_decref(pj);
			}
			if (pid > 0)
				ship_event(&a->sh, SHIP_RUNNING, t->rt.id, pid, NULL);
			t->running = pid > 0;
			remember_execs(t);
			watch_task(a, t);
		}
		check_exit(a, t);
	}
	free(ids);
	free(dir);
	free(fin);
}

int agent_run(const struct agent_config *cfg, volatile sig_atomic_t *stop, struct errbuf *eb)
{
	struct agent a;
	pthread_t poller;
	int ret = 0;
	bool poller_started = false;
	char *shim_exe = NULL; /* a.ctx.shim_exe */
	char *yard_exe = NULL; /* a.ctx.yard_exe */
	char *cgroup_base = NULL; /* a.ctx.cgroup_base */
	char *engine = NULL;      /* what answers on a.ctx.docker_socket */

	memset(&a, 0, sizeof(a));
	a.cfg = cfg;
	a.stop = stop;
	if (!cfg->master_url || !cfg->name || !cfg->work_dir)
		return error(eb, YERR(BAD_REQUEST), "the agent needs a master url, a name and a work dir");
	if ((ret = gpu_discover(cfg->gpus ? cfg->gpus : "none", cfg->name, &a.gpus, eb)))
		goto out_gpus;
	char *tasks_dir = xasprintf("%s/tasks", cfg->work_dir);
	if (mkdir_p(tasks_dir, 0755) < 0) {
		ret = error(eb, YERR(IO), "cannot create '%s': %s", tasks_dir, strerror(errno));
		free(tasks_dir);
		goto out_gpus;
	}
	free(tasks_dir);
	if (cfg->run_as && cfg->run_as->on && (ret = runas_prepare_work_dir(cfg->work_dir, eb)))
		goto out_gpus;
	a.ctx.work_dir = cfg->work_dir;
	a.ctx.agent_name = cfg->name;
	cgroup_base = agent_cgroup_base(cfg->name, cfg->work_dir);
	a.ctx.cgroup_base = cgroup_base;
	a.ctx.dev_dir = cfg->dev_dir ? cfg->dev_dir : "/dev";
	shim_exe = runtime_shim_exe(cfg->self_exe);
	a.ctx.shim_exe = shim_exe;
	yard_exe = cfg->self_exe ? xstrdup(cfg->self_exe) : realpath("/proc/self/exe", NULL);
	a.ctx.yard_exe = yard_exe;
	a.ctx.master_url = cfg->master_url;
	a.ctx.master_ca = cfg->master_ca;
	a.ctx.master_pin = cfg->master_pin;
	a.ctx.cgroup_root = getenv("YARD_CGROUP_ROOT");
	a.ctx.cgroups = cgroup_detect(a.ctx.cgroup_root) != NULL && geteuid() == 0;
	a.ctx.shims_fence = !cfg->master_in_process;
	if (!a.ctx.cgroups)
		fprintf(stderr, "yard agent: no usable cgroups: tasks run without limits\n");
	a.ctx.gpus = &a.gpus;
	if (cfg->docker) {
		/* an engine that does not answer now is a mistake to report, not to run past */
		struct docker d;
		a.ctx.docker_socket = cfg->docker_socket ? cfg->docker_socket : "/var/run/docker.sock";
		docker_init(&d, a.ctx.docker_socket);
		ret = docker_engine(&d, &engine, eb);
		docker_release(&d);
		if (ret) {
			char *why = xstrdup(eb->msg);
			error(eb, ret, "--runtime docker: %s", why);
			free(why);
			goto out_gpus;
		}
	}

	char *cache_dir = xasprintf("%s/cache", cfg->work_dir);
	ret = cache_open(&a.cache, cache_dir, cfg->cache_size ? cfg->cache_size : CACHE_DEFAULT_CAP, eb);
	free(cache_dir);
	if (ret)
		goto out_cache;
	a.s = session_new(cfg, &a.gpus, engine, stop);
	a.s->cache = &a.cache;
	/* from before the registration: a master found down stops the shims' countdown */
	heartbeat_writer_start(&a.hb, cfg->work_dir, lease_view, a.s);
	if (session_register(a.s, 0) < 0)
		goto out_session; /* stopped before registering */
	heartbeat_writer_beat(&a.hb); /* fresh before any shim is started or re-adopted */

	uv_loop_init(&a.loop);
	uv_async_init(&a.loop, &a.wake, on_wake);
	a.wake.data = &a;
	uv_timer_init(&a.loop, &a.tick);
	a.tick.data = &a;
	uv_timer_start(&a.tick, on_tick, 100, 100);
	pthread_mutex_init(&a.fetch_lock, NULL);

	{
		struct httpc_tls tls = { .ca_file = cfg->master_ca, .pin = cfg->master_pin };
		agent_sessions_init(&a.sessions, cfg->master_url, &tls, a.ctx.docker_socket);
	}
	shipper_start(&a.sh, a.s, gpu_sampler_open(cfg->gpus, cfg->work_dir));
	scan_work_dir(&a);
	pthread_mutex_lock(&a.s->lock);
	a.s->wake = &a.wake;
	a.s->refs++;
	pthread_mutex_unlock(&a.s->lock);
	if (pthread_create(&poller, NULL, session_poll_thread, a.s) != 0) {
		session_unref(a.s);
		ret = error(eb, YERR(INTERNAL), "cannot start the poll thread");
	} else {
		poller_started = true;
		ephemeral_init(&a.eph, cfg->idle_ms, mono_ms());
		uv_run(&a.loop, UV_RUN_DEFAULT);
	}

	/* tasks keep running: the shims own them. Close everything of ours
	 * (stagings under way are cancelled; the last uv_run waits for them). */
	pthread_mutex_lock(&a.s->lock);
	a.s->closed = true;
	a.s->wake = NULL;
	pthread_mutex_unlock(&a.s->lock);
	/* its long poll stops now (httpc's cancelled): joined, it has freed
	 * its TLS state before the process exits */
	if (poller_started)
		pthread_join(poller, NULL);
	/* a session does not outlive its agent: the master tells the clients */
	agent_sessions_stop(&a.sessions);
	a.closing = true;
	while (a.tasks)
		task_forget(&a, a.tasks);
	while (a.execs)
		exec_forget(&a, a.execs);
	uv_close((uv_handle_t *)&a.wake, NULL);
	uv_close((uv_handle_t *)&a.tick, NULL);
	uv_run(&a.loop, UV_RUN_DEFAULT);
	uv_loop_close(&a.loop);
	pthread_mutex_destroy(&a.fetch_lock);
	shipper_stop(&a.sh);
	if (a.ctx.cgroups)
		remove_cgroup_base(&a.ctx);
	if (a.eph.why[0]) {
		char *id, *token;
		session_creds(a.s, &id, &token);
		ephemeral_say_left(a.s->master_url, &a.s->tls, a.s->name, id, token, a.eph.why);
		free(id);
		free(token);
	}
out_session:
	heartbeat_writer_stop(&a.hb);
	pthread_mutex_lock(&a.s->lock);
	a.s->cache = NULL;
	pthread_mutex_unlock(&a.s->lock);
	session_unref(a.s);
	free(a.finished);
out_cache:
	cache_release(&a.cache);
out_gpus:
	gpu_list_release(&a.gpus);
	free(shim_exe);
	free(yard_exe);
	free(cgroup_base);
	free(engine);
	return ret;
}
