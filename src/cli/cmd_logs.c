#include "base/compat.h"

#include <pthread.h>

#include "base/clock.h"
#include "base/utf8.h"
#include "cli/cmd.h"

/* The most bytes asked for in one request. */
#define LOG_PAGE (1u << 20)
/* A follow request that comes back empty this fast was not held: pause. */
#define MIN_POLL_MS 200

/* One stream being copied, by the main thread or a helper thread. */
struct log_copy {
	struct client *client;  /* not owned */
	uint64_t id;
	const char *task;       /* "ROLE/INDEX" or NULL */
	const char *stream;     /* "stdout" or "stderr" */
	FILE *out;              /* where the bytes go */
	bool follow;
	pthread_mutex_t *lock;  /* serialises writes to out, or NULL */
	struct strbuf *collect; /* when not NULL the bytes go here instead of out */
	struct errbuf eb;       /* OUT: why it stopped early */
	int ret;                /* OUT */
};

static int copy_bytes(struct log_copy *lc, const struct strbuf *data)
{
	int ret = 0;

	if (lc->collect) {
		strbuf_add(lc->collect, data->buf, data->len);
		return 0;
	}
	if (lc->lock)
		pthread_mutex_lock(lc->lock);
	if (fwrite(data->buf, 1, data->len, lc->out) != data->len || fflush(lc->out) != 0)
		ret = error(&lc->eb, YERR(IO), "cannot write the task's %s: %s", lc->stream,
			    strerror(errno));
	if (lc->lock)
		pthread_mutex_unlock(lc->lock);
	return ret;
}

static int copy_stream(struct log_copy *lc)
{
	struct client_log_req req = { lc->task, lc->stream, 0, lc->follow, LOG_PAGE };
	struct client_log_chunk ch;
	int ret = 0;

	client_log_chunk_init(&ch);
	for (;;) {
		uint64_t start = mono_ms();
		ret = client_logs_read(lc->client, lc->id, &req, &ch, &lc->eb);
		if (ret)
			break;
		if (ch.data.len) {
			ret = copy_bytes(lc, &ch.data);
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
	client_log_chunk_release(&ch);
	lc->ret = ret;
	return ret;
}

static void *copy_thread(void *arg)
{
	copy_stream(arg);
	return NULL;
}

int cli_logs_stream(struct cli_ctx *ctx, uint64_t id, const char *task, unsigned streams,
		    bool follow, struct errbuf *eb)
{
	struct log_copy out = { &ctx->client, id, task, "stdout", stdout, follow, NULL, NULL, ERRBUF_INIT, 0 };
	struct log_copy err = { &ctx->client, id, task, "stderr", stderr, follow, NULL, NULL, ERRBUF_INIT, 0 };
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct client second;
	pthread_t th;

	if (!(follow && streams == (CLI_STREAM_STDOUT | CLI_STREAM_STDERR))) {
		/* one stream at a time: stdout first, then stderr */
		if ((streams & CLI_STREAM_STDOUT) && copy_stream(&out)) {
			*eb = out.eb;
			return out.ret;
		}
		if ((streams & CLI_STREAM_STDERR) && copy_stream(&err)) {
			*eb = err.eb;
			return err.ret;
		}
		return 0;
	}
	/* following both: one thread per stream, each with its own connection */
	client_open(&second, ctx->cfg.master, &(struct httpc_tls){ ctx->cfg.ca, ctx->cfg.pin },
		    ctx->cfg.token);
	err.client = &second;
	out.lock = err.lock = &lock;
	if (pthread_create(&th, NULL, copy_thread, &err) != 0) {
		client_close(&second);
		return error(eb, YERR(INTERNAL), "cannot start a thread: %s", strerror(errno));
	}
	copy_stream(&out);
	pthread_join(th, NULL);
	client_close(&second);
	if (out.ret) {
		*eb = out.eb;
		return out.ret;
	}
	if (err.ret) {
		*eb = err.eb;
		return err.ret;
	}
	return 0;
}

/* `yard logs --output json`: both streams of a task as one object. Logs are
 * bytes; bytes that are not UTF-8 are replaced, so use the plain output to
 * get them exactly. */
static int logs_json(struct cli_ctx *ctx, uint64_t id, const char *task, unsigned streams,
		     struct errbuf *eb)
{
	static const char *const names[] = { "stdout", "stderr" };
	json_t *doc = json_pack("{s:I, s:s?}", "job", (json_int_t)id, "task", task);
	int ret = 0;
	for (int i = 0; i < 2 && !ret; i++) {
		struct strbuf raw = STRBUF_INIT, text = STRBUF_INIT;
		struct log_copy lc = { &ctx->client, id, task, names[i], NULL, false, NULL, &raw,
				       ERRBUF_INIT, 0 };
		if (!(streams & (i ? CLI_STREAM_STDERR : CLI_STREAM_STDOUT)))
			continue;
		ret = copy_stream(&lc);
		if (ret)
			*eb = lc.eb;
		utf8_lossy_append(&text, raw.buf, raw.len);
		json_object_set_new(doc, names[i], json_stringn(text.buf, text.len));
		strbuf_release(&raw);
		strbuf_release(&text);
	}
	if (!ret)
		cli_print_json(doc);
	json_decref(doc);
	return ret;
}

int cmd_logs(struct cli_ctx *ctx, int argc, char **argv)
{
	int follow = 0;
	const char *task = NULL, *stream = NULL;
	const struct cli_option opts[] = {
		{ "follow", 'f', CLI_OPT_FLAG, &follow, NULL, "keep printing until the task ends" },
		{ "task", 0, CLI_OPT_STRING, &task, "ROLE/INDEX", "which task (default: the first)" },
		{ "stream", 0, CLI_OPT_STRING, &stream, "NAME", "stdout or stderr (default: both)" },
	};
	struct errbuf eb = ERRBUF_INIT;
	unsigned streams = CLI_STREAM_STDOUT | CLI_STREAM_STDERR;
	uint64_t id;
	int rc;

	rc = cli_parse_job(ctx, "logs [-f] ID [--task ROLE/INDEX] [--stream stdout|stderr]", opts,
		       ARRAY_SIZE(opts), argc, argv, &id);
	if (rc >= 0)
		return rc;
	if (stream && !strcmp(stream, "stdout"))
		streams = CLI_STREAM_STDOUT;
	else if (stream && !strcmp(stream, "stderr"))
		streams = CLI_STREAM_STDERR;
	else if (stream)
		return cli_usage_error(ctx, "unknown stream '%s' (stdout or stderr)", stream);
	if (task && !strchr(task, '/'))
		return cli_usage_error(ctx, "expected --task ROLE/INDEX, got '%s'", task);
	if (ctx->json && follow)
		return cli_usage_error(ctx, "--output json prints what is stored; it cannot follow (-f)");
	if (ctx->json) {
		if (logs_json(ctx, id, task, streams, &eb))
			return cli_fail(ctx, &eb);
		return EXIT_OK;
	}
	if (cli_logs_stream(ctx, id, task, streams, follow, &eb))
		return cli_fail(ctx, &eb);
	return EXIT_OK;
}
