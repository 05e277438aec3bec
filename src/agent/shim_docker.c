#include "base/compat.h"
#include "agent/shim_docker.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "agent/agent.h"
#include "agent/docker.h"
#include "agent/imagebuild.h"
#include "agent/heartbeat.h"
#include "agent/shim.h"
#include "agent/taskdir.h"
#include "base/clock.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/curllib.h"

/* How often the shim looks for a stop signal while it follows a container. */
#define POLL_MS 200

struct cshim {
	const char *dir;
	json_t *task;             /* task.json */
	json_t *conf;             /* shim.json */
	struct docker api;        /* the main thread's connection */
	char *id;                 /* owned: the container's id, once created or found */
	int fds[3];               /* [1] stdout, [2] stderr: the task's log files */
	uint64_t skip[3];         /* bytes of each stream the files already hold (adoption) */
	int notify_fd;            /* 1 until the start is reported, then -1 */
	struct fence_watch fence; /* its agent's heartbeat (heartbeat.h) */

	/* the output thread: attach (or, adopting, logs) until the container ends */
	pthread_t thread;
	bool thread_started;
	bool adopt;               /* follow the logs of a container found running */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int ready;                /* 0 waiting, 1 the stream is in place, -1 it failed */
	atomic_bool stream_done;
	struct errbuf stream_eb;  /* why the stream failed */
};

static const char *conf_str(const struct cshim *s, const char *key)
{
	return json_string_value(json_object_get(s->conf, key));
}

/* ---- the create request ---- */

static void add_device(json_t *devs, const char *host_path)
{
	struct stat st;
	const char *base = strrchr(host_path, '/');
	if (stat(host_path, &st) < 0 || !S_ISCHR(st.st_mode))
		return;
	char *in = xasprintf("/dev/%s", base ? base + 1 : host_path);
	json_array_append_new(devs, json_pack("{s:s, s:s, s:s}", "PathOnHost", host_path,
					      "PathInContainer", in, "CgroupPermissions", "rwm"));
	free(in);
}

/* The task's environment inside the image. The image keeps its own PATH and
 * HOME; CUDA numbers the GPUs a container holds from 0, since only their
 * device nodes exist there (YARD_GPUS and NVIDIA_VISIBLE_DEVICES keep the
 * node's numbers). */
static json_t *container_env(const struct cshim *s)
{
	json_t *env = json_object_get(s->task, "env"), *out = json_array(), *v;
	size_t ngpus = json_array_size(json_object_get(s->task, "gpus"));
	const char *key;
	json_object_foreach(env, key, v) {
		if (!json_is_string(v) || !strcmp(key, "YARD_CHECKPOINT_DIR") || !strcmp(key, "YARD_DATA_DIR"))
			continue;
		if (!strcmp(key, "CUDA_VISIBLE_DEVICES") && ngpus) {
			struct strbuf sb = STRBUF_INIT;
			strbuf_addstr(&sb, "CUDA_VISIBLE_DEVICES=");
			for (size_t i = 0; i < ngpus; i++)
				strbuf_addf(&sb, "%s%zu", i ? "," : "", i);
			json_array_append_new(out, json_string(sb.buf));
			strbuf_release(&sb);
			continue;
		}
		char *kv = xasprintf("%s=%s", key, json_string_value(v));
		json_array_append_new(out, json_string(kv));
		free(kv);
	}
	char *kv = xasprintf("YARD_CHECKPOINT_DIR=%s", conf_str(s, "checkpoint_dir"));
	json_array_append_new(out, json_string(kv));
	free(kv);
	kv = xasprintf("YARD_DATA_DIR=%s", conf_str(s, "data_dir"));
	json_array_append_new(out, json_string(kv));
	free(kv);
	if (conf_str(s, "output_dir")) {
		kv = xasprintf("YARD_OUTPUT_DIR=%s", conf_str(s, "output_dir"));
		json_array_append_new(out, json_string(kv));
		free(kv);
	}
	if (!json_object_get(env, "YARD_MASTER") && conf_str(s, "master_url")) {
		kv = xasprintf("YARD_MASTER=%s", conf_str(s, "master_url"));
		json_array_append_new(out, json_string(kv));
		free(kv);
	}
	/* the pin works inside a container; a CA file on the host does not
	 * exist there, so YARD_CA is not passed */
	if (!json_object_get(env, "YARD_PIN") && conf_str(s, "master_pin")) {
		kv = xasprintf("YARD_PIN=%s", conf_str(s, "master_pin"));
		json_array_append_new(out, json_string(kv));
		free(kv);
	}
	return out;
}

/* POST /containers/create's body: the image, the argv exactly (the image's
 * entrypoint does not wrap it), the host network, the task's dirs at the
 * same paths (data read-only), its GPUs as devices, its limits. */
static json_t *create_body(const struct cshim *s)
{
	json_t *argv = json_object_get(s->task, "argv");
	json_t *cmd = json_array(), *devs = json_array(), *binds = json_array(), *v;
	size_t i;
	static const char *const control[] = { "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools" };
	const char *cwd = conf_str(s, "cwd"), *ckpt = conf_str(s, "checkpoint_dir");
	const char *data = conf_str(s, "data_dir"), *dev_dir = conf_str(s, "dev_dir");

	json_array_foreach(argv, i, v)
		if (i > 0)
			json_array_append(cmd, v);
	json_array_foreach(json_object_get(s->conf, "gpu_devices"), i, v)
		if (json_is_string(v))
			add_device(devs, json_string_value(v));
	for (i = 0; i < ARRAY_SIZE(control); i++) {
		char *p = xasprintf("%s/%s", dev_dir ? dev_dir : "/dev", control[i]);
		add_device(devs, p);
		free(p);
	}
	char *b = xasprintf("%s:%s", cwd, cwd);
	json_array_append_new(binds, json_string(b));
	free(b);
	b = xasprintf("%s:%s", ckpt, ckpt);
	json_array_append_new(binds, json_string(b));
	free(b);
	b = xasprintf("%s:%s:ro", data, data);
	json_array_append_new(binds, json_string(b));
	free(b);
	if (conf_str(s, "output_dir")) {
		b = xasprintf("%s:%s", conf_str(s, "output_dir"), conf_str(s, "output_dir"));
		json_array_append_new(binds, json_string(b));
		free(b);
	}
	/* each staged entry, read-only, at its mount point under the data dir */
	json_array_foreach(json_object_get(s->conf, "data_binds"), i, v) {
		const char *host = json_string_value(json_array_get(v, 0));
		const char *in = json_string_value(json_array_get(v, 1));
		if (!host || !in)
			continue;
		b = xasprintf("%s:%s:ro", host, in);
		json_array_append_new(binds, json_string(b));
		free(b);
	}

	json_int_t mem = json_integer_value(json_object_get(s->task, "memory"));
	json_int_t cpus_milli = json_integer_value(json_object_get(s->task, "cpus_milli"));
	json_int_t pids = json_integer_value(json_object_get(s->task, "pids"));
	json_t *host = json_pack("{s:s, s:o, s:o, s:b}", "NetworkMode", "host", "Binds", binds,
				 "Devices", devs, "Init", 1);
	if (mem > 0) {
		/* no swap beyond the limit: an OOM kill, not a crawl */
		json_object_set_new(host, "Memory", json_integer(mem));
		json_object_set_new(host, "MemorySwap", json_integer(mem));
	}
	/* /dev/shm for data loaders and NCCL: half the memory (64 MiB is docker's default) */
	json_object_set_new(host, "ShmSize", json_integer(mem > 0 ? mem / 2 : (json_int_t)1 << 30));
	if (cpus_milli > 0)
		json_object_set_new(host, "NanoCpus", json_integer(cpus_milli * 1000000));
	if (pids > 0)
		json_object_set_new(host, "PidsLimit", json_integer(pids));
	json_t *body = json_pack("{s:s, s:[O], s:o, s:o, s:s, s:O, s:b, s:b, s:b, s:b, s:o}",
			 "Image", conf_str(s, "image"), "Entrypoint", json_array_get(argv, 0), "Cmd", cmd,
			 "Env", container_env(s), "WorkingDir", cwd,
			 "Labels", json_object_get(s->conf, "labels"), "AttachStdout", 1,
			 "AttachStderr", 1, "Tty", 0, "OpenStdin", 0, "HostConfig", host);
	/* agent --run-as: the container's processes run as the task's user,
	 * which owns its code and checkpoint dirs (runas.h) */
	json_t *ra = json_object_get(s->conf, "run_as");
	if (ra) {
		char *user = xasprintf("%" JSON_INTEGER_FORMAT ":%" JSON_INTEGER_FORMAT,
				       json_integer_value(json_object_get(ra, "uid")),
				       json_integer_value(json_object_get(ra, "gid")));
		json_object_set_new(body, "User", json_string(user));
		free(user);
	}
	return body;
}

/* The engine's verdict on a failed create, in the words a user needs. */
static int create_container(struct cshim *s, struct errbuf *eb)
{
	const char *image = conf_str(s, "image"), *name = conf_str(s, "container");
	json_t *body = create_body(s), *reply = NULL;
	char *path = xasprintf("/containers/create?name=%s", name);
	long status;
	int ret;

	for (int attempt = 0;; attempt++) {
		errbuf_reset(eb);
		if ((ret = docker_call(&s->api, "POST", path, body, &status, &reply, eb)))
			goto out;
		if (status != 404 || attempt > 0)
			break;
		/* the engine lacks the image: pull it once, then create again */
		struct errbuf peb = ERRBUF_INIT;
		ret = docker_pull(&s->api, image, NULL, &peb);
		if (ret == YERR(NOT_FOUND)) {
			ret = error(eb, YERR(NOT_FOUND), "image_not_found: the engine has no image '%s' and "
				    "its registry has none: %s", image, peb.msg);
			goto out;
		}
		if (ret) {
			ret = error(eb, YERR(UNAVAILABLE), "image_pull_failed: the engine has no image '%s' and "
				    "cannot pull it: %s", image, peb.msg);
			goto out;
		}
	}
	if (status != 201 || !json_is_string(json_object_get(reply, "Id"))) {
		ret = error(eb, YERR(BAD_REQUEST), "the engine refused to create the container: %s",
			    status >= 400 ? eb->msg : "no container id in its answer");
		goto out;
	}
	s->id = xstrdup(json_string_value(json_object_get(reply, "Id")));
out:
	json_decref(reply);
	json_decref(body);
	free(path);
	return ret;
}

/* ---- the output stream ---- */

static int sink(void *arg, int stream, const char *buf, size_t len)
{
	struct cshim *s = arg;
	if (stream != 1 && stream != 2)
		return 0;
	if (s->skip[stream]) {
		size_t n = s->skip[stream] < len ? (size_t)s->skip[stream] : len;
		s->skip[stream] -= n;
		buf += n;
		len -= n;
	}
	/* a full disk loses no more than it must: the write is retried by the engine's log */
	if (len && write_all(s->fds[stream], buf, len) < 0)
		fprintf(stderr, "yard shim: cannot write the task's output: %s\n", strerror(errno));
	return 0;
}

static void on_ready(void *arg, bool ok)
{
	struct cshim *s = arg;
	pthread_mutex_lock(&s->lock);
	s->ready = ok ? 1 : -1;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void *stream_thread(void *arg)
{
	struct cshim *s = arg;
	struct docker d;
	docker_init(&d, conf_str(s, "docker_socket"));
	/* adopting, the engine's log replays what the container wrote so far;
	 * sink() drops what the files already hold */
	int ret = s->adopt ? docker_logs(&d, s->id, sink, on_ready, s, &s->stream_eb)
			   : docker_attach(&d, s->id, sink, on_ready, s, &s->stream_eb);
	if (ret)
		fprintf(stderr, "yard shim: %s\n", s->stream_eb.msg);
	docker_release(&d);
	atomic_store(&s->stream_done, true);
	return NULL;
}

static int start_stream(struct cshim *s, struct errbuf *eb)
{
	if (pthread_create(&s->thread, NULL, stream_thread, s) != 0)
		return error(eb, YERR(INTERNAL), "cannot start the output thread");
	s->thread_started = true;
	pthread_mutex_lock(&s->lock);
	while (!s->ready)
		pthread_cond_wait(&s->cond, &s->lock);
	int ok = s->ready > 0;
	pthread_mutex_unlock(&s->lock);
	if (!ok) {
		pthread_join(s->thread, NULL);
		s->thread_started = false;
		return error(eb, YERR(UNAVAILABLE), "cannot attach to the container: %s",
			     s->stream_eb.msg[0] ? s->stream_eb.msg : "the engine refused");
	}
	return 0;
}

/* ---- inspect, stop, remove ---- */

struct cstate {
	bool found, running;
	const char *status;   /* "created", "running", "exited", ... (borrowed from doc) */
	int exit_code;
	bool oom_killed;
	pid_t pid;
	json_t *doc;          /* owned */
};

static int inspect(struct cshim *s, const char *ref, struct cstate *st, struct errbuf *eb)
{
	long status;
	char *path = xasprintf("/containers/%s/json", ref);
	memset(st, 0, sizeof(*st));
	int ret = docker_call(&s->api, "GET", path, NULL, &status, &st->doc, eb);
	free(path);
	if (ret)
		return ret;
	if (status == 404)
		return 0;
	if (status != 200 || !st->doc)
		return error(eb, YERR(UNAVAILABLE), "cannot inspect container '%s': %s", ref, eb->msg);
	json_t *state = json_object_get(st->doc, "State");
	st->found = true;
	st->running = json_is_true(json_object_get(state, "Running"));
	st->status = json_string_value(json_object_get(state, "Status"));
	st->exit_code = (int)json_integer_value(json_object_get(state, "ExitCode"));
	st->oom_killed = json_is_true(json_object_get(state, "OOMKilled"));
	st->pid = (pid_t)json_integer_value(json_object_get(state, "Pid"));
	return 0;
}

static void kill_container(struct cshim *s, const char *sig)
{
	struct errbuf eb = ERRBUF_INIT;
	long status;
	char *path = xasprintf("/containers/%s/kill?signal=%s", s->id, sig);
	/* 409: it is not running any more, which is what we wanted */
	if (docker_call(&s->api, "POST", path, NULL, &status, NULL, &eb) || (status >= 400 && status != 409))
		fprintf(stderr, "yard shim: cannot send %s to container %.12s: %s\n", sig, s->id, eb.msg);
	free(path);
}

static void remove_container(struct cshim *s, const char *ref)
{
	struct errbuf eb = ERRBUF_INIT;
	long status;
	char *path = xasprintf("/containers/%s?force=1&v=1", ref);
	for (int attempt = 0; attempt < 5; attempt++) {
		errbuf_reset(&eb);
		if (docker_call(&s->api, "DELETE", path, NULL, &status, NULL, &eb) == 0 &&
		    (status < 300 || status == 404))
			break;
		/* 409: a removal already in progress */
		struct timespec ts = { 0, 200 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	free(path);
}

/* ---- the task's life ---- */

/* A container of our name left by an earlier shim of this task: adopt it
 * while it runs or once it has ended (its output is in the engine's log);
 * one that never started is removed and made again. 1 when adopted. */
static int find_earlier(struct cshim *s, struct errbuf *eb)
{
	struct cstate st;
	const char *name = conf_str(s, "container");
	int ret = inspect(s, name, &st, eb);
	if (ret)
		return ret;
	if (!st.found) {
		json_decref(st.doc);
		return 0;
	}
	bool ours = json_equal(json_object_get(json_object_get(json_object_get(st.doc, "Config"), "Labels"),
					       "yard.task"),
			       json_object_get(json_object_get(s->conf, "labels"), "yard.task"));
	if (ours && st.status && strcmp(st.status, "created")) {
		s->id = xstrdup(json_string_value(json_object_get(st.doc, "Id")));
		json_decref(st.doc);
		return 1;
	}
	json_decref(st.doc);
	remove_container(s, name);
	return 0;
}

static int open_out(struct cshim *s, int stream, struct errbuf *eb)
{
	char *path = xasprintf("%s/%s", s->dir, stream == 1 ? "stdout" : "stderr");
	struct stat st;
	s->fds[stream] = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (s->fds[stream] < 0) {
		int r = error(eb, YERR(IO), "cannot open '%s': %s", path, strerror(errno));
		free(path);
		return r;
	}
	s->skip[stream] = fstat(s->fds[stream], &st) == 0 ? (uint64_t)st.st_size : 0;
	free(path);
	return 0;
}

/* What the output files held when the container was made (the build's
 * output): the engine's log replays only the container's, so an adopting
 * shim skips the files' sizes less these. */
#define OUTPUT_BASE "output_base.json"

static int save_output_base(struct cshim *s, struct errbuf *eb)
{
	struct stat o, e;
	json_t *doc;
	int ret;

	if (fstat(s->fds[1], &o) || fstat(s->fds[2], &e))
		return error(eb, YERR(IO), "cannot look at the task's output: %s", strerror(errno));
	doc = json_pack("{s:I, s:I}", "stdout", (json_int_t)o.st_size, "stderr", (json_int_t)e.st_size);
	ret = taskdir_write_json(s->dir, OUTPUT_BASE, doc, 0, eb);
	json_decref(doc);
	return ret;
}

static void apply_output_base(struct cshim *s)
{
	static const char *const names[] = { NULL, "stdout", "stderr" };
	json_t *doc = NULL;

	if (taskdir_read_json(s->dir, OUTPUT_BASE, &doc, NULL))
		return; /* none: nothing was written before the container */
	for (int i = 1; i <= 2; i++) {
		json_int_t base = json_integer_value(json_object_get(doc, names[i]));
		s->skip[i] = base > 0 && (uint64_t)base <= s->skip[i] ? s->skip[i] - (uint64_t)base : 0;
	}
	json_decref(doc);
}

void shim_docker_say(const char *task_dir, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	char *path = xasprintf("%s/stdout", task_dir);
	json_t *base = NULL;
	va_list ap;
	int fd;

	strbuf_addstr(&sb, "yard: ");
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	strbuf_addch(&sb, '\n');
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0 || write_all(fd, sb.buf, sb.len) < 0) {
		fprintf(stderr, "yard agent: cannot say in '%s': %s (%s)", path, strerror(errno), sb.buf);
		goto out;
	}
	/* the container's bytes are the file's less the base (apply_output_base) */
	if (!taskdir_read_json(task_dir, OUTPUT_BASE, &base, NULL)) {
		json_int_t n = json_integer_value(json_object_get(base, "stdout"));
		json_object_set_new(base, "stdout", json_integer(n + (json_int_t)sb.len));
		taskdir_write_json(task_dir, OUTPUT_BASE, base, 0, NULL);
	}
out:
	if (fd >= 0)
		close(fd);
	json_decref(base);
	free(path);
	strbuf_release(&sb);
}

/* Before the result, on a line of its own (runtime_shim_started). */
static void say_building(void *arg, const char *tag)
{
	struct cshim *s = arg;
	shim_notify_before(s->notify_fd, "building %s\n", tag);
}

/* Whether the shim was asked to stop (SIGTERM or SIGINT, blocked, pending). */
static bool stop_pending(void)
{
	sigset_t p;

	return !sigpending(&p) && (sigismember(&p, SIGTERM) == 1 || sigismember(&p, SIGINT) == 1);
}

static int start_task(struct cshim *s, struct errbuf *eb)
{
	const char *dirs[] = { conf_str(s, "cwd"), conf_str(s, "checkpoint_dir"), conf_str(s, "data_dir") };
	long status;
	int ret;

	if (!json_array_size(json_object_get(s->task, "argv")))
		return error(eb, YERR(BAD_REQUEST), "the assignment has no argv");
	if (!conf_str(s, "image") || !conf_str(s, "container") || !conf_str(s, "docker_socket"))
		return error(eb, YERR(BAD_REQUEST), "shim.json lacks the image, container or docker_socket");
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (!dirs[i])
			return error(eb, YERR(BAD_REQUEST), "shim.json lacks a directory");
		if (mkdir_p(dirs[i], 0755) < 0)
			return error(eb, YERR(IO), "cannot create '%s': %s", dirs[i], strerror(errno));
	}
	if ((ret = shim_make_output_dir(s->conf, eb)))
		return ret;
	/* the engine mounts absolute paths only */
	static const char *const keys[] = { "cwd", "checkpoint_dir", "data_dir", "output_dir" };
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		if (!conf_str(s, keys[i]))
			continue; /* no output_dir: a shim.json of an older agent */
		char *abs = realpath(conf_str(s, keys[i]), NULL);
		if (!abs)
			return error(eb, YERR(IO), "cannot resolve '%s': %s", conf_str(s, keys[i]), strerror(errno));
		json_object_set_new(s->conf, keys[i], json_string(abs));
		free(abs);
	}
	if ((ret = open_out(s, 1, eb)) || (ret = open_out(s, 2, eb)))
		return ret;
	docker_init(&s->api, conf_str(s, "docker_socket"));
	/* a stop that comes while the image is built, pulled or loaded ends it
	 * (the signals are blocked until the container runs: pending) */
	s->api.stopping = stop_pending;
	if ((ret = find_earlier(s, eb)) < 0)
		return ret;
	if (ret == 1) {
		s->adopt = true;
		apply_output_base(s);
		return start_stream(s, eb);
	}
	/* a new container: nothing of its output can be in the files */
	s->skip[1] = s->skip[2] = 0;
	/* an image built from the code: built first, its output the task's */
	if (json_object_get(s->conf, "image_build") &&
	    ((ret = imagebuild_ensure(&s->api, conf_str(s, "image"), s->dir, conf_str(s, "cwd"),
				      json_object_get(s->conf, "image_build"), s->fds[1], say_building, s,
				      eb)) ||
	     (ret = save_output_base(s, eb))))
		return ret;
	if ((ret = create_container(s, eb)) || (ret = start_stream(s, eb)))
		return ret;
	char *path = xasprintf("/containers/%s/start", s->id);
	ret = docker_call(&s->api, "POST", path, NULL, &status, NULL, eb);
	free(path);
	if (ret)
		return ret;
	if (status >= 400)
		return error(eb, YERR(BAD_REQUEST), "the engine cannot start the container: %s", eb->msg);
	return 0;
}

/* Follows the container until it ends, forwarding a stop: SIGTERM, then
 * after the grace (stop.json's, for a preemption) SIGKILL. */
static void wait_container(struct cshim *s, sigset_t *set, struct cstate *st)
{
	uint64_t grace = 10000, deadline = 0, next_look = 0;
	bool stopping = false, killed = false;
	json_t *g = json_object_get(s->conf, "stop_grace_ms");
	if (json_is_integer(g))
		grace = (uint64_t)json_integer_value(g);

	for (;;) {
		uint64_t now = mono_ms();
		/* the stream ends with the container; look at it then, and now and
		 * then in case the stream broke while it runs */
		if (atomic_load(&s->stream_done) || now >= next_look) {
			struct errbuf eb = ERRBUF_INIT;
			next_look = now + 2000;
			if (inspect(s, s->id, st, &eb) == 0) {
				if (!st->found || !st->running)
					return;
				json_decref(st->doc);
				st->doc = NULL;
			}
		}
		if (stopping && !killed && now >= deadline) {
			killed = true;
			kill_container(s, "SIGKILL");
		}
		struct timespec ts = { 0, POLL_MS * 1000 * 1000 };
		siginfo_t info;
		int sig = sigtimedwait(set, &info, &ts);
		if ((sig == SIGTERM || sig == SIGINT) && !stopping) {
			grace = shim_stop_grace(s->dir, grace);
			stopping = true;
			deadline = mono_ms() + grace;
			kill_container(s, "SIGTERM");
		}
		/* its agent gone: stopped, or a stop under way cut short (heartbeat.h) */
		if (fence_watch_step(&s->fence, &stopping, &deadline))
			kill_container(s, "SIGTERM");
	}
}

static void describe_exit(const struct cstate *st, struct task_exit *e)
{
	if (!st->found) {
		snprintf(e->reason, sizeof(e->reason), "lost: the container was removed behind the agent's back");
		return;
	}
	if (st->oom_killed) {
		e->oom_killed = true;
		e->signal = SIGKILL;
		snprintf(e->reason, sizeof(e->reason), "oom_killed: killed by the kernel out of memory");
		return;
	}
	/* the engine reports a death by signal N as 128+N, like a shell */
	if (st->exit_code > 128 && st->exit_code < 128 + 65) {
		e->signal = st->exit_code - 128;
		snprintf(e->reason, sizeof(e->reason), "killed by signal %d (%s)", e->signal, strsignal(e->signal));
		return;
	}
	e->has_code = true;
	e->exit_code = st->exit_code;
	snprintf(e->reason, sizeof(e->reason), "exited with status %d", e->exit_code);
}

int shim_docker_main(const char *dir)
{
	struct cshim s = { .dir = dir, .fds = { -1, -1, -1 }, .notify_fd = 1 };
	struct errbuf eb = ERRBUF_INIT;
	struct task_exit e;
	struct cstate st = { 0 };
	sigset_t set;
	char buf[64];
	int ret;

	memset(&e, 0, sizeof(e));
	if (curllib_load(&eb)) /* before the output thread exists */
		die("%s", eb.msg);
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	/* the output thread inherits the mask: only the main thread takes signals */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);

	char *shim_pid = xasprintf("%s/shim.pid", dir);
	snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	write_file_replace(shim_pid, buf, strlen(buf), 0644);
	free(shim_pid);

	if ((ret = taskdir_read_json(dir, "task.json", &s.task, &eb)) ||
	    (ret = taskdir_read_json(dir, "shim.json", &s.conf, &eb)) ||
	    (ret = start_task(&s, &eb))) {
		s.api.stopping = NULL;
		snprintf(e.reason, sizeof(e.reason), "start_failed: %s", eb.msg);
		e.start_failed = true;
		shim_notify(&s.notify_fd, "%s\n", e.reason);
		goto out_remove;
	}
	if (inspect(&s, s.id, &st, &eb) == 0 && st.pid > 0) {
		json_t *pidj = json_pack("{s:i, s:i, s:s}", "pid", (int)st.pid, "pgid", (int)st.pid,
					 "container", s.id);
		taskdir_write_json(dir, "task.pid", pidj, 0, NULL);
		json_decref(pidj);
	}
	s.api.stopping = NULL; /* from now on wait_container takes the signals */
	shim_notify(&s.notify_fd, "running %d\n", (int)st.pid);
	json_decref(st.doc);
	st.doc = NULL;

	fence_watch_init(&s.fence, s.conf, s.task);
	wait_container(&s, &set, &st);
	if (s.thread_started) {
		/* the stream ends with the container: every byte is in the files before exit.json */
		pthread_join(s.thread, NULL);
		s.thread_started = false;
	}
	describe_exit(&st, &e);
	fence_watch_mark_exit(&s.fence, &e);
	fence_watch_release(&s.fence);
out_remove:
	if (s.thread_started) {
		/* a start that failed after the attach: the stream ends with the removal */
		if (s.id)
			remove_container(&s, s.id);
		pthread_join(s.thread, NULL);
	}
	if (s.id)
		remove_container(&s, s.id);
	if (s.api.curl)
		docker_release(&s.api);
	for (int i = 1; i <= 2; i++)
		if (s.fds[i] >= 0)
			close(s.fds[i]);
	json_decref(st.doc);
	json_decref(s.task);
	json_decref(s.conf);
	free(s.id);
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cond);
	if (task_exit_write(dir, &e, &eb)) {
		fprintf(stderr, "yard shim: %s\n", eb.msg);
		return 1;
	}
	return 0;
}

int cmd_shim_any(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--dir")) {
		json_t *conf = NULL;
		bool container = false;
		if (taskdir_read_json(argv[2], "shim.json", &conf, NULL) == 0)
			container = json_is_string(json_object_get(conf, "image"));
		json_decref(conf);
		if (container)
			return shim_docker_main(argv[2]);
	}
	return cmd_shim(argc, argv);
}
