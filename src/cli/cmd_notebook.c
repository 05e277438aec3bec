/*
 * yard notebook [--gpus N] [--image IMG]: a Jupyter notebook server as a
 * job (framework jupyter: Debian's jupyter-notebook in the process
 * runtime, or the image's), reached through the master's proxy
 * (docs/protocol.md, "Proxy"). It submits the job with a token of
 * Jupyter's own (JUPYTER_TOKEN, made here), waits for a place (saying why
 * it waits, as the queue does), then for the server to answer through the
 * proxy, and prints the URL to open: the proxy's path to the notebook,
 * with the token. A browser needs the master's cookie too (sign in to the
 * web UI once). The job is interactive: once nothing has reached it
 * through the master for its idle timeout (the master's
 * --interactive-idle-timeout) it ends and frees its GPUs; `yard cancel
 * ID` stops it before.
 */
#include "base/compat.h"

#include "base/clock.h"
#include "base/crypto.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/cmd.h"

/* How long the server has to answer once its task runs. */
#define SERVE_TIMEOUT_MS 120000
#define POLL_MS 250
/* The notebook's role, as the URL names it. */
#define ROLE "notebook"

/* The job's task once it runs (its port), or 0 while it does not; -1 when
 * the job ended (said why). */
static int task_port(const json_t *job, unsigned *port)
{
	const json_t *tasks = json_object_get(job, "tasks"), *t;
	size_t i;

	json_array_foreach(tasks, i, t) {
		json_int_t p = json_integer_value(json_object_get(t, "port"));
		if (!strcmp(cli_jstr(t, "state"), "running") && p > 0 && p < 65536) {
			*port = (unsigned)p;
			return 1;
		}
	}
	return 0;
}

int cmd_notebook(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *gpus = NULL, *image = NULL;
	const struct cli_option opts[] = {
		{ "gpus", 0, CLI_OPT_STRING, &gpus, "N", "GPUs for the notebook (default 0)" },
		{ "image", 0, CLI_OPT_STRING, &image, "IMG",
		  "run it in this container image (which has jupyter-notebook); default: the process runtime" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *spec = NULL, *job = NULL;
	char token[33], *path = NULL, *url = NULL, *last_reason = NULL;
	uint64_t id = 0, n_gpus = 0, deadline;
	unsigned port = 0;
	int npos, rc;
	bool ok = false;

	rc = cli_parse(ctx, "notebook [--gpus N] [--image IMG]", opts, ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 0)
		return cli_usage_error(ctx, "takes no arguments (yard notebook [--gpus N] [--image IMG])");
	if (gpus && (parse_u64_str(gpus, &n_gpus) || n_gpus > 1024))
		return cli_usage_error(ctx, "--gpus '%s': expected a number of GPUs", gpus);
	random_hex(token, 16);
	spec = json_pack("{s:s, s:s, s:[s], s:{s:{s:I}}, s:{s:s}, s:{}}", "name", "notebook", "framework",
			 "jupyter", "command", "jupyter-notebook", "tasks", ROLE, "gpus", (json_int_t)n_gpus,
			 "env", "JUPYTER_TOKEN", token, "interactive");
	if (image)
		json_object_set_new(spec, "image", json_string(image));
	if (client_submit(&ctx->client, spec, NULL, &job, &eb)) {
		rc = cli_fail(ctx, &eb);
		goto out;
	}
	id = (uint64_t)json_integer_value(json_object_get(job, "id"));
	fprintf(stderr, "yard notebook: job %" PRIu64 " submitted\n", id);

	/* a place: the queue's reason while it waits */
	for (;;) {
		const char *state;
		json_decref(job);
		job = NULL;
		if (client_job_get(&ctx->client, id, &job, &eb)) {
			rc = cli_fail(ctx, &eb);
			goto out;
		}
		state = cli_jstr(job, "state");
		if (cli_job_is_final(job, &ok)) {
			char *reason = cli_reason(json_object_get(job, "reason"));
			error(&eb, YERR(CONFLICT), "the notebook's job %" PRIu64 " is %s: %s (yard logs %" PRIu64
			      " --task " ROLE "/0)", id, state, reason, id);
			free(reason);
			rc = cli_fail(ctx, &eb);
			goto out;
		}
		if (task_port(job, &port) > 0)
			break;
		if (!strcmp(state, "queued")) {
			char *reason = cli_reason(json_object_get(job, "reason"));
			if (!last_reason || strcmp(reason, last_reason))
				fprintf(stderr, "yard notebook: waiting for a place: %s\n", reason);
			free(last_reason);
			last_reason = reason;
		}
		usleep(POLL_MS * 1000);
	}

	/* the server: it answers through the proxy once it listens */
	path = xasprintf("/v1/jobs/%" PRIu64 "/proxy/" ROLE "/0/%u/api/status?token=%s", id, port, token);
	deadline = mono_ms() + SERVE_TIMEOUT_MS;
	for (;;) {
		struct httpc_response res;
		int ret;
		httpc_response_init(&res);
		ret = httpc_request(&ctx->client.http, "GET", path, NULL, 0, NULL, &res, &eb);
		if (!ret && res.status == 200) {
			httpc_response_release(&res);
			break;
		}
		if (!ret && res.status >= 400 && res.status < 500) {
			/* the master's refusal (a 502 is "nothing listens yet") */
			httpc_error_from_reply(&res, &eb);
			httpc_response_release(&res);
			rc = cli_fail(ctx, &eb);
			goto out;
		}
		httpc_response_release(&res);
		json_decref(job);
		job = NULL;
		if (client_job_get(&ctx->client, id, &job, &eb)) {
			rc = cli_fail(ctx, &eb);
			goto out;
		}
		if (cli_job_is_final(job, &ok) || mono_ms() > deadline) {
			bool ended = cli_job_is_final(job, &ok);
			char *reason = cli_reason(json_object_get(job, "reason"));
			struct errbuf ceb = ERRBUF_INIT;
			json_t *cancelled = NULL;
			/* a server that never answers holds its place for nothing */
			if (!ended)
				client_cancel(&ctx->client, id, &cancelled, &ceb);
			json_decref(cancelled);
			error(&eb, YERR(UNAVAILABLE), "the notebook server of job %" PRIu64 " %s (job %s: %s; "
			      "yard logs %" PRIu64 " --task " ROLE "/0 --stream stderr)", id,
			      ended ? "ended before it answered" : "did not answer within 120 s: cancelled it",
			      cli_jstr(job, "state"), reason, id);
			free(reason);
			rc = cli_fail(ctx, &eb);
			goto out;
		}
		usleep(POLL_MS * 1000);
	}
	url = xasprintf("%s/v1/jobs/%" PRIu64 "/proxy/" ROLE "/0/%u/?token=%s", httpc_url(&ctx->client.http),
			id, port, token);
	if (ctx->json) {
		json_t *doc = json_pack("{s:I, s:s}", "id", (json_int_t)id, "url", url);
		cli_print_json(doc);
		json_decref(doc);
	} else {
		printf("%s\n", url);
		fprintf(stderr, "yard notebook: job %" PRIu64 " serves it; open the URL in a browser signed in to "
			"%s (its cookie lets the browser through the proxy); yard cancel %" PRIu64 " stops it\n",
			id, httpc_url(&ctx->client.http), id);
	}
	rc = EXIT_OK;
out:
	free(last_reason);
	free(path);
	free(url);
	json_decref(job);
	json_decref(spec);
	return rc;
}
