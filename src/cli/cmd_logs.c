#include "base/compat.h"

#include <pthread.h>

#include "base/clock.h"
#include "base/parse.h"
#include "base/utf8.h"
#include "base/xalloc.h"
#include "cli/cmd.h"

/* The most bytes asked for in one request. */
#define LOG_PAGE (1u << 20)
/* A follow request that comes back empty this fast was not held: pause. */
#define MIN_POLL_MS 200

/* One stream of one task being copied, by the main thread or a helper thread. */
struct log_copy {
	struct client *client;  /* not owned */
	uint64_t id;
	const char *task;       /* "ROLE/INDEX"; not owned */
	bool has_attempt;
	unsigned attempt;
	const char *stream;     /* "stdout" or "stderr" */
	FILE *out;              /* where the bytes go */
	bool follow;
	const char *prefix;     /* "[ROLE/INDEX] " before each line, or NULL: the bytes as stored */
	struct strbuf pending;  /* with prefix: the start of a line not ended yet */
	pthread_mutex_t *lock;  /* serialises writes to out, or NULL */
	struct strbuf *collect; /* when not NULL the bytes go here instead of out */
	struct errbuf eb;       /* OUT: why it stopped early */
	int ret;                /* OUT */
};

void cli_log_prefix(struct strbuf *out, struct strbuf *pending, const char *prefix, const void *data,
		    size_t len, bool end)
{
	const char *p, *nl, *e;

	strbuf_add(pending, data, len);
	p = pending->buf;
	e = pending->buf + pending->len;
	while ((nl = memchr(p, '\n', (size_t)(e - p)))) {
		strbuf_addstr(out, prefix);
		strbuf_add(out, p, (size_t)(nl + 1 - p));
		p = nl + 1;
	}
	if (end && p < e) {
		strbuf_addstr(out, prefix);
		strbuf_add(out, p, (size_t)(e - p));
		strbuf_addch(out, '\n');
		p = e;
	}
	/* keep the unended line for the next bytes */
	size_t rest = (size_t)(e - p);
	memmove(pending->buf, p, rest);
	strbuf_setlen(pending, rest);
}

static int write_out(struct log_copy *lc, const char *buf, size_t len)
{
	int ret = 0;

	if (!len)
		return 0;
	if (lc->lock)
		pthread_mutex_lock(lc->lock);
	if (fwrite(buf, 1, len, lc->out) != len || fflush(lc->out) != 0)
		ret = error(&lc->eb, YERR(IO), "cannot write the task's %s: %s", lc->stream,
			    strerror(errno));
	if (lc->lock)
		pthread_mutex_unlock(lc->lock);
	return ret;
}

/* copy_bytes writes data (end: the stream's last bytes) as lc says. */
static int copy_bytes(struct log_copy *lc, const void *data, size_t len, bool end)
{
	struct strbuf lines = STRBUF_INIT;
	int ret;

	if (lc->collect) {
		strbuf_add(lc->collect, data, len);
		return 0;
	}
	if (!lc->prefix)
		return write_out(lc, data, len);
	/* whole lines only, so that tasks written together never split one */
	cli_log_prefix(&lines, &lc->pending, lc->prefix, data, len, end);
	ret = write_out(lc, lines.buf, lines.len);
	strbuf_release(&lines);
	return ret;
}

static int copy_stream(struct log_copy *lc)
{
	struct client_log_req req = { lc->task, lc->stream, 0, lc->follow, LOG_PAGE, lc->has_attempt,
				      lc->attempt };
	struct client_log_chunk ch;
	int ret = 0;

	client_log_chunk_init(&ch);
	for (;;) {
		uint64_t start = mono_ms();
		ret = client_logs_read(lc->client, lc->id, &req, &ch, &lc->eb);
		if (ret)
			break;
		if (ch.data.len) {
			ret = copy_bytes(lc, ch.data.buf, ch.data.len, false);
			if (ret)
				break;
		}
		/* never go backwards, even if a header is odd */
		req.offset = ch.next_offset > req.offset ? ch.next_offset : req.offset + ch.data.len;
		if (!lc->follow) {
			if (!ch.data.len || req.offset >= ch.size)
				break;
			continue;
		}
		if (ch.eof && req.offset >= ch.size)
			break;
		if (!ch.data.len && mono_ms() - start < MIN_POLL_MS)
			usleep(MIN_POLL_MS * 1000);
	}
	if (!ret)
		ret = copy_bytes(lc, "", 0, true);
	client_log_chunk_release(&ch);
	lc->ret = ret;
	return ret;
}

static void *copy_thread(void *arg)
{
	struct log_copy *lc = arg;
	copy_stream(lc);
	return NULL;
}

static bool task_in_attempt(const json_t *t, unsigned attempt)
{
	return json_is_integer(json_object_get(t, "attempt")) && cli_jint(t, "attempt") == attempt;
}

char **cli_attempt_tasks(const json_t *job, unsigned attempt, const char *task, size_t *n)
{
	const json_t *tasks = json_object_get(job, "tasks"), *t;
	char **names = xcalloc(json_array_size(tasks) + 1, sizeof(*names));
	size_t i;

	*n = 0;
	json_array_foreach(tasks, i, t) {
		struct strbuf name = STRBUF_INIT;
		if (!task_in_attempt(t, attempt))
			continue;
		strbuf_addf(&name, "%s/%" PRId64, cli_jstr(t, "role"), cli_jint(t, "index"));
		if (task && strcmp(task, name.buf)) {
			strbuf_release(&name);
			continue;
		}
		names[(*n)++] = strbuf_detach(&name, NULL);
	}
	return names;
}

char *cli_attempt_cause(const json_t *job, unsigned attempt)
{
	const json_t *tasks = json_object_get(job, "tasks"), *t, *any = NULL;
	size_t i;

	/* the task that failed or was lost says why the gang restarted; the
	 * others were stopped with it */
	json_array_foreach(tasks, i, t) {
		const char *state = cli_jstr(t, "state");
		if (!task_in_attempt(t, attempt) || !json_is_object(json_object_get(t, "reason")))
			continue;
		if (!strcmp(state, "failed") || !strcmp(state, "lost"))
			return cli_reason(json_object_get(t, "reason"));
		if (!any)
			any = t;
	}
	if (any)
		return cli_reason(json_object_get(any, "reason"));
	return cli_reason(json_object_get(job, "reason"));
}

static void names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* copy_attempt copies the streams of the tasks of one attempt (with
 * follow, until each ends: one thread and connection per stream and task
 * past the first). */
static int copy_attempt(struct cli_ctx *ctx, uint64_t id, const json_t *job, unsigned attempt,
			const struct cli_logs_opts *o, struct errbuf *eb)
{
	static const char *const snames[] = { "stdout", "stderr" };
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	size_t ntasks, ncopies = 0, started = 0;
	char **names = cli_attempt_tasks(job, attempt, o->task, &ntasks);
	struct log_copy *copies = xcalloc(ntasks * 2 + 1, sizeof(*copies));
	struct client *clients = xcalloc(ntasks * 2 + 1, sizeof(*clients));
	pthread_t *threads = xcalloc(ntasks * 2 + 1, sizeof(*threads));
	char **prefixes = xcalloc(ntasks + 1, sizeof(*prefixes));
	bool prefix = o->prefix || (!o->task && ntasks > 1);
	int ret = 0;

	if (!ntasks) {
		if (o->task)
			ret = error(eb, YERR(NOT_FOUND), "job %" PRIu64 " has no task '%s' in attempt %u",
				    id, o->task, attempt);
		else
			ret = error(eb, YERR(NOT_FOUND), "job %" PRIu64 " has no tasks in attempt %u",
				    id, attempt);
		goto out;
	}
	for (size_t t = 0; t < ntasks; t++) {
		struct strbuf p = STRBUF_INIT;
		strbuf_addf(&p, "[%s] ", names[t]);
		prefixes[t] = strbuf_detach(&p, NULL);
		for (int s = 0; s < 2; s++) {
			struct log_copy *lc = &copies[ncopies];
			if (!(o->streams & (s ? CLI_STREAM_STDERR : CLI_STREAM_STDOUT)))
				continue;
			lc->client = &ctx->client;
			lc->id = id;
			lc->task = names[t];
			lc->has_attempt = true;
			lc->attempt = attempt;
			lc->stream = snames[s];
			lc->out = s ? stderr : stdout;
			lc->follow = o->follow;
			lc->prefix = prefix ? prefixes[t] : NULL;
			strbuf_init(&lc->pending, 0);
			lc->eb = (struct errbuf)ERRBUF_INIT;
			ncopies++;
		}
	}
	if (!o->follow) {
		/* one stream at a time: each task's stdout, then its stderr */
		for (size_t i = 0; i < ncopies && !ret; i++)
			if ((ret = copy_stream(&copies[i])))
				*eb = copies[i].eb;
		goto out;
	}
	/* following: the first on this thread, each other with its own connection */
	for (size_t i = 1; i < ncopies; i++) {
		client_open(&clients[i], ctx->cfg.master, &(struct httpc_tls){ ctx->cfg.ca, ctx->cfg.pin },
			    ctx->cfg.token);
		copies[i].client = &clients[i];
	}
	for (size_t i = 0; i < ncopies; i++)
		copies[i].lock = ncopies > 1 ? &lock : NULL;
	for (started = 1; started < ncopies; started++)
		if (pthread_create(&threads[started], NULL, copy_thread, &copies[started]) != 0) {
			ret = error(eb, YERR(INTERNAL), "cannot start a thread: %s", strerror(errno));
			break;
		}
	if (!ret)
		copy_stream(&copies[0]);
	for (size_t i = 1; i < started; i++)
		pthread_join(threads[i], NULL);
	for (size_t i = 0; i < ncopies && !ret; i++)
		if (copies[i].ret) {
			ret = copies[i].ret;
			*eb = copies[i].eb;
		}
	/* a thread that never started still had its connection opened */
	for (size_t i = 1; i < ncopies; i++)
		client_close(&clients[i]);
out:
	for (size_t i = 0; i < ncopies; i++)
		strbuf_release(&copies[i].pending);
	for (size_t t = 0; t < ntasks; t++)
		free(prefixes[t]);
	free(prefixes);
	free(threads);
	free(clients);
	free(copies);
	names_free(names, ntasks);
	return ret;
}

/* first_attempt: the attempt o asks for, checked against the job's. */
static int first_attempt(const json_t *job, uint64_t id, const struct cli_logs_opts *o,
			 unsigned *attempt, struct errbuf *eb)
{
	int64_t latest = cli_jint(job, "attempt");

	*attempt = (unsigned)(latest > 0 ? latest : 0);
	if (!o->has_attempt)
		return 0;
	if (o->attempt > (uint64_t)*attempt)
		return error_field(eb, YERR(BAD_REQUEST), "attempt",
				   "--attempt %" PRIu64 ": job %" PRIu64 " has attempts 0 to %u",
				   o->attempt, id, *attempt);
	*attempt = (unsigned)o->attempt;
	return 0;
}

int cli_logs_stream(struct cli_ctx *ctx, uint64_t id, const struct cli_logs_opts *o,
		    struct errbuf *eb)
{
	json_t *job = NULL;
	unsigned attempt;
	bool ok;
	int ret;

	ret = client_job_get(&ctx->client, id, &job, eb);
	if (ret || (ret = first_attempt(job, id, o, &attempt, eb)))
		goto out;
	for (;;) {
		ret = copy_attempt(ctx, id, job, attempt, o, eb);
		if (ret || !o->follow)
			goto out;
		/* the attempt's tasks have ended: the job has too, or it goes on
		 * with a later attempt */
		json_decref(job);
		job = NULL;
		if ((ret = client_job_get(&ctx->client, id, &job, eb)))
			goto out;
		while (cli_jint(job, "attempt") <= attempt) {
			if (cli_job_is_final(job, &ok))
				goto out;
			if ((ret = cli_job_next(ctx, &job, 0, eb)))
				goto out;
		}
		char *cause = cli_attempt_cause(job, attempt);
		attempt++;
		fflush(stdout);
		fprintf(stderr, "--- attempt %u (after: %s) ---\n", attempt, cause);
		fflush(stderr);
		free(cause);
	}
out:
	json_decref(job);
	return ret;
}

/* `yard logs --output json`: both streams of each task as an object. Logs
 * are bytes; bytes that are not UTF-8 are replaced, so use the plain output
 * to get them exactly. The first task's streams are also "stdout" and
 * "stderr" of the document itself. */
static int logs_json(struct cli_ctx *ctx, uint64_t id, const struct cli_logs_opts *o,
		     struct errbuf *eb)
{
	static const char *const snames[] = { "stdout", "stderr" };
	json_t *job = NULL, *doc = NULL, *tasks = json_array();
	char **names = NULL;
	size_t n = 0;
	unsigned attempt;
	int ret;

	ret = client_job_get(&ctx->client, id, &job, eb);
	if (ret || (ret = first_attempt(job, id, o, &attempt, eb)))
		goto out;
	names = cli_attempt_tasks(job, attempt, o->task, &n);
	if (!n && o->task) {
		ret = error(eb, YERR(NOT_FOUND), "job %" PRIu64 " has no task '%s' in attempt %u", id,
			    o->task, attempt);
		goto out;
	}
	doc = json_pack("{s:I, s:s?, s:i}", "job", (json_int_t)id, "task", o->task, "attempt",
			(int)attempt);
	for (size_t t = 0; t < n && !ret; t++) {
		json_t *td = json_pack("{s:s}", "task", names[t]);
		for (int i = 0; i < 2 && !ret; i++) {
			struct strbuf raw = STRBUF_INIT, text = STRBUF_INIT;
			struct log_copy lc = { .client = &ctx->client, .id = id, .task = names[t],
					       .has_attempt = true, .attempt = attempt,
					       .stream = snames[i], .collect = &raw, .eb = ERRBUF_INIT };
			strbuf_init(&lc.pending, 0);
			if (o->streams & (i ? CLI_STREAM_STDERR : CLI_STREAM_STDOUT)) {
				ret = copy_stream(&lc);
				if (ret)
					*eb = lc.eb;
				utf8_lossy_append(&text, raw.buf, raw.len);
				json_object_set_new(td, snames[i], json_stringn(text.buf, text.len));
				if (!t)
					json_object_set_new(doc, snames[i], json_stringn(text.buf, text.len));
			}
			strbuf_release(&lc.pending);
			strbuf_release(&raw);
			strbuf_release(&text);
		}
		json_array_append_new(tasks, td);
	}
	json_object_set(doc, "tasks", tasks);
	if (!ret)
		cli_print_json(doc);
out:
	names_free(names, n);
	json_decref(tasks);
	json_decref(doc);
	json_decref(job);
	return ret;
}

int cmd_logs(struct cli_ctx *ctx, int argc, char **argv)
{
	int follow = 0, prefix = 0;
	const char *task = NULL, *stream = NULL, *attempt = NULL;
	const struct cli_option opts[] = {
		{ "follow", 'f', CLI_OPT_FLAG, &follow, NULL,
		  "keep printing, across the job's restarts, until the job ends" },
		{ "task", 0, CLI_OPT_STRING, &task, "ROLE/INDEX", "only this task (default: every task)" },
		{ "attempt", 0, CLI_OPT_STRING, &attempt, "N",
		  "this attempt, from 0 (default: the latest); with -f, from this one on" },
		{ "prefix", 0, CLI_OPT_FLAG, &prefix, NULL,
		  "start each line with [ROLE/INDEX] even for one task" },
		{ "stream", 0, CLI_OPT_STRING, &stream, "NAME", "stdout or stderr (default: both)" },
	};
	struct cli_logs_opts o = { .streams = CLI_STREAM_STDOUT | CLI_STREAM_STDERR };
	struct errbuf eb = ERRBUF_INIT;
	uint64_t id;
	int rc;

	rc = cli_parse_job(ctx, "logs [-f] ID [--task ROLE/INDEX] [--attempt N] [--prefix] "
			   "[--stream stdout|stderr]", opts, ARRAY_SIZE(opts), argc, argv, &id);
	if (rc >= 0)
		return rc;
	if (stream && !strcmp(stream, "stdout"))
		o.streams = CLI_STREAM_STDOUT;
	else if (stream && !strcmp(stream, "stderr"))
		o.streams = CLI_STREAM_STDERR;
	else if (stream)
		return cli_usage_error(ctx, "unknown stream '%s' (stdout or stderr)", stream);
	if (task && !strchr(task, '/'))
		return cli_usage_error(ctx, "expected --task ROLE/INDEX, got '%s'", task);
	if (attempt && (parse_u64_str(attempt, &o.attempt) || o.attempt > UINT_MAX))
		return cli_usage_error(ctx, "expected --attempt N, a number from 0, got '%s'", attempt);
	if (ctx->json && follow)
		return cli_usage_error(ctx, "--output json prints what is stored; it cannot follow (-f)");
	o.task = task;
	o.has_attempt = attempt != NULL;
	o.follow = follow;
	o.prefix = prefix;
	if (ctx->json) {
		if (logs_json(ctx, id, &o, &eb))
			return cli_fail(ctx, &eb);
		return EXIT_OK;
	}
	if (cli_logs_stream(ctx, id, &o, &eb))
		return cli_fail(ctx, &eb);
	return EXIT_OK;
}
