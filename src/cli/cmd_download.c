/* yard download: a job's outputs (each task's YARD_OUTPUT_DIR, its latest
 * attempt unless --attempt says which) or its checkpoint, written into DIR
 * from the chunk store, each chunk checked against its digest (docs/api.md,
 * "Outputs"). */
#include "base/compat.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/xalloc.h"
#include "cli/cmd.h"
#include "common/chunks.h"
#include "common/dataset.h"

/* Whether tk is the latest attempt with outputs of its role and index. */
static bool latest_of(const json_t *tasks, const json_t *tk)
{
	size_t i;
	json_t *o;

	json_array_foreach(tasks, i, o)
		if (json_is_string(json_object_get(o, "outputs")) &&
		    !strcmp(cli_jstr(o, "role"), cli_jstr(tk, "role")) &&
		    cli_jint(o, "index") == cli_jint(tk, "index") && cli_jint(o, "attempt") > cli_jint(tk, "attempt"))
			return false;
	return true;
}

/* How many of tasks are stopping: each hands in its outputs as it ends. */
static size_t stopping(const json_t *tasks)
{
	size_t i, n = 0;
	json_t *tk;

	json_array_foreach(tasks, i, tk)
		n += !strcmp(cli_jstr(tk, "state"), "stopping");
	return n;
}

/* The outputs document of job id once none of its tasks (of those asked
 * for) is stopping, or after STOPPING_WAIT_MS: a job cancelled, stopped
 * early or failed is final while the rest of its gang still hands in its
 * outputs and checkpoint. */
#define STOPPING_WAIT_MS 600000
static int outputs_settled(struct cli_ctx *ctx, uint64_t id, const char *task, const char *attempt,
			   json_t **reply, struct errbuf *eb)
{
	uint64_t deadline = mono_ms() + STOPPING_WAIT_MS;
	unsigned delay_ms = 50;
	bool told = false;
	size_t n;
	int ret;

	while (!(ret = cli_outputs_get(ctx, id, task, attempt, reply, eb)) &&
	       (n = stopping(json_object_get(*reply, "tasks"))) && mono_ms() < deadline) {
		if (!told)
			fprintf(stderr, "yard: waiting for %zu stopping task%s of job %" PRIu64
				" to hand in what they leave\n", n, n == 1 ? "" : "s", id);
		told = true;
		json_decref(*reply);
		*reply = NULL;
		usleep(delay_ms * 1000);
		delay_ms = delay_ms * 2 > 500 ? 500 : delay_ms * 2;
	}
	return ret;
}

int cli_outputs_manifest(struct cli_ctx *ctx, uint64_t id, const char *task, const char *attempt,
			 json_t **manifest, struct errbuf *eb)
{
	json_t *reply = NULL, *tasks, *tk, *parts[64];
	char *dirs[64];
	size_t i, n = 0;
	int ret;

	*manifest = NULL;
	if ((ret = outputs_settled(ctx, id, task, attempt, &reply, eb)))
		return ret;
	tasks = json_object_get(reply, "tasks");
	json_array_foreach(tasks, i, tk) {
		const char *d = json_string_value(json_object_get(tk, "outputs"));
		if (!d || (!attempt && !latest_of(tasks, tk)))
			continue;
		if (n == ARRAY_SIZE(parts)) {
			ret = error(eb, YERR(TOO_LARGE), "job %" PRIu64 " has outputs of more than %zu tasks: "
				    "take them with --task ROLE/INDEX", id, ARRAY_SIZE(parts));
			break;
		}
		if ((ret = chunks_manifest_get(&ctx->client.http, d, &parts[n], eb)))
			break;
		/* one task: as it is; else under ROLE-INDEX each */
		dirs[n++] = task ? xstrdup("") : xasprintf("%s-%" PRId64, cli_jstr(tk, "role"), cli_jint(tk, "index"));
	}
	if (!ret && !n)
		ret = error(eb, YERR(NOT_FOUND), "job %" PRIu64 " has no outputs%s%s", id, task ? " of task " : "",
			    task ? task : "");
	if (!ret)
		*manifest = manifest_merge((const char *const *)dirs, parts, n);
	for (i = 0; i < n; i++) {
		json_decref(parts[i]);
		free(dirs[i]);
	}
	json_decref(reply);
	return ret;
}

/* Fetches the files of manifest into dir, each chunk checked. */
static int fetch_into(struct cli_ctx *ctx, const json_t *manifest, const char *what, const char *dir,
		      struct errbuf *eb)
{
	uint64_t size = 0;
	unsigned files = 0;
	char sz[32];
	int ret = manifest_validate(manifest, &size, &files, eb);

	if (!ret)
		ret = client_chunks_fetch(&ctx->client, manifest, dir, eb);
	format_size(size, sz, sizeof(sz));
	if (!ret)
		fprintf(stderr, "%s: %u files, %s -> %s\n", what, files, sz, dir);
	return ret;
}

int cmd_download(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *task = NULL, *attempt = NULL;
	int ckpt = 0;
	const struct cli_option opts[] = {
		{ "task", 0, CLI_OPT_STRING, &task, "ROLE/INDEX", "only this task" },
		{ "attempt", 0, CLI_OPT_STRING, &attempt, "N", "this attempt (default: each task's latest)" },
		{ "checkpoint", 0, CLI_OPT_FLAG, &ckpt, NULL, "the job's latest checkpoint instead" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL, *manifest = NULL;
	uint64_t id;
	int npos, rc;
	const char *dir, *d;

	rc = cli_parse(ctx, "download ID [--task ROLE/INDEX] [--attempt N] [--checkpoint] DIR", opts,
		       ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 2)
		return cli_usage_error(ctx, "expected a job ID and a DIR");
	if (parse_u64_str(argv[1], &id))
		return cli_usage_error(ctx, "job ID: '%s' is not a number", argv[1]);
	dir = argv[2];
	if (mkdir_p(dir, 0755) < 0)
		return cli_usage_error(ctx, "DIR: cannot create '%s': %s", dir, strerror(errno));
	if (!ckpt) {
		rc = cli_outputs_manifest(ctx, id, task, attempt, &manifest, &eb);
	} else if (!(rc = outputs_settled(ctx, id, NULL, NULL, &reply, &eb))) {
		if (!(d = json_string_value(json_object_get(reply, "checkpoint"))))
			rc = error(&eb, YERR(NOT_FOUND), "job %" PRIu64 " has no checkpoint", id);
		else
			rc = chunks_manifest_get(&ctx->client.http, d, &manifest, &eb);
		json_decref(reply);
	}
	if (!rc)
		rc = fetch_into(ctx, manifest, ckpt ? "checkpoint" : "outputs", dir, &eb);
	json_decref(manifest);
	return rc ? cli_fail(ctx, &eb) : EXIT_OK;
}
