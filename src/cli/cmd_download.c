/* yard download: a job's outputs (each task's YARD_OUTPUT_DIR, its latest
 * attempt unless --attempt says which) or its checkpoint, unpacked into DIR,
 * each archive checked against its digest (docs/api.md, "Outputs"). */
#include "base/compat.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/parse.h"
#include "base/xalloc.h"
#include "cli/cmd.h"
#include "common/codepack.h"

/* Fetches the archive of digest and unpacks it into dest. */
static int fetch_into(struct cli_ctx *ctx, const char *digest, const char *dir, const char *dest,
		      struct errbuf *eb)
{
	char *tmp = xasprintf("%s/.yard-download-%d.tar.gz", dir, (int)getpid());
	int ret = client_archive_get(&ctx->client, digest, tmp, eb);

	if (!ret)
		ret = codepack_extract(tmp, dest, eb);
	unlink(tmp);
	free(tmp);
	if (!ret)
		fprintf(stderr, "%s -> %s\n", digest, dest);
	return ret;
}

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

int cli_outputs_fetch(struct cli_ctx *ctx, uint64_t id, const char *task, const char *attempt,
		      const char *dir, struct errbuf *eb)
{
	json_t *reply = NULL, *tasks, *tk;
	size_t i, got = 0;
	int ret;

	if ((ret = cli_outputs_get(ctx, id, task, attempt, &reply, eb)))
		return ret;
	tasks = json_object_get(reply, "tasks");
	json_array_foreach(tasks, i, tk) {
		const char *d = json_string_value(json_object_get(tk, "outputs"));
		if (!d || (!attempt && !latest_of(tasks, tk)))
			continue;
		/* one task: into DIR; else DIR/ROLE-INDEX each */
		char *dest = task ? xstrdup(dir)
				  : xasprintf("%s/%s-%" PRId64, dir, cli_jstr(tk, "role"), cli_jint(tk, "index"));
		ret = fetch_into(ctx, d, dir, dest, eb);
		free(dest);
		if (ret)
			goto out;
		got++;
	}
	if (!got)
		ret = error(eb, YERR(NOT_FOUND), "job %" PRIu64 " has no outputs%s%s", id, task ? " of task " : "",
			    task ? task : "");
out:
	json_decref(reply);
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
	json_t *reply = NULL;
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
		rc = cli_outputs_fetch(ctx, id, task, attempt, dir, &eb);
	} else if (!(rc = cli_outputs_get(ctx, id, NULL, NULL, &reply, &eb))) {
		if (!(d = json_string_value(json_object_get(reply, "checkpoint"))))
			rc = error(&eb, YERR(NOT_FOUND), "job %" PRIu64 " has no checkpoint", id);
		else
			rc = fetch_into(ctx, d, dir, dir, &eb);
		json_decref(reply);
	}
	return rc ? cli_fail(ctx, &eb) : EXIT_OK;
}
