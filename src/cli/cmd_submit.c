#include "base/compat.h"

#include <libgen.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "base/crypto.h"
#include "cli/cmd.h"
#include "cli/codecache.h"
#include "common/codepack.h"
#include "common/spec.h"
#include "common/spec_code.h"

/* The most code the master takes (docs/protocol.md, POST /v1/code). */
#define MAX_CODE_BYTES (256ull << 20)
/* The biggest spec file we read. */
#define MAX_SPEC_BYTES (4u << 20)

/* wait_until_started polls the job until it has left the queue. */
static int wait_until_started(struct cli_ctx *ctx, uint64_t id, json_t **job, struct errbuf *eb);

int cli_load_spec(const char *file, const struct cli_list *sets, const char *name,
		  json_t **doc, bool *usage, struct errbuf *eb)
{
	struct strbuf text = STRBUF_INIT;
	struct job_spec spec;
	int ret;

	*doc = NULL;
	*usage = false;
	memset(&spec, 0, sizeof(spec));
	if (strbuf_read_file(&text, file, MAX_SPEC_BYTES) < 0) {
		ret = error(eb, YERR(IO), "cannot read '%s': %s", file, strerror(errno));
		goto out;
	}
	ret = spec_load_text(text.buf, text.len, doc, eb);
	if (ret)
		goto out;
	for (size_t i = 0; i < sets->nr; i++) {
		ret = spec_set(*doc, sets->items[i], eb);
		if (ret) {
			*usage = ret == YERR(BAD_REQUEST);
			goto out;
		}
	}
	if (name && json_object_set_new(*doc, "name", json_string(name)) < 0) {
		ret = error_field(eb, YERR(INVALID_SPEC), "name", "name: expected an object document");
		goto out;
	}
	ret = spec_from_json(*doc, &spec, eb);
out:
	spec_release(&spec);
	strbuf_release(&text);
	if (ret) {
		json_decref(*doc);
		*doc = NULL;
	}
	return ret;
}

int cli_upload_code(struct cli_ctx *ctx, const char *file, char **digest, struct errbuf *eb)
{
	char *copy = xstrdup(file);
	const char *dir = dirname(copy);
	struct strbuf tgz = STRBUF_INIT;
	int ret;

	*digest = NULL;
	ret = codepack_create(dir, &tgz, MAX_CODE_BYTES, eb);
	if (!ret && tgz.len > MAX_CODE_BYTES)
		ret = error(eb, YERR(TOO_LARGE), "the code archive of '%s' is over 256 MiB", dir);
	if (!ret)
		ret = client_code_upload(&ctx->client, tgz.buf, tgz.len, digest, NULL, eb);
	strbuf_release(&tgz);
	free(copy);
	return ret;
}

/* The directory that holds file, absolute (caller frees), or NULL. */
static char *code_dir(const char *file)
{
	char *copy = xstrdup(file), *dir = realpath(dirname(copy), NULL);

	free(copy);
	return dir;
}

/* The code of the directory that holds file, as its job names it: the
 * digest the code cache (cli/codecache.h) holds when the directory has not
 * changed since it was uploaded (*cached true), else packed and uploaded
 * now, and remembered once its fingerprint settled. */
static int code_for(struct cli_ctx *ctx, const char *file, char **digest, bool *cached,
		    struct errbuf *eb)
{
	char *dir = code_dir(file);
	char print[SHA256_HEX_LEN + 1];
	bool settled = false;
	int ret;

	*cached = false;
	/* a directory that cannot be fingerprinted is packed, and says why there */
	if (dir && !codepack_fingerprint(dir, print, &settled, NULL)) {
		*digest = codecache_lookup(ctx->cfg.master, dir, print);
		if ((*cached = *digest != NULL)) {
			ret = 0;
			goto out;
		}
	}
	ret = cli_upload_code(ctx, file, digest, eb);
	if (!ret && dir && settled)
		codecache_store(ctx->cfg.master, dir, print, *digest);
out:
	free(dir);
	return ret;
}

/* Submits doc with the code of the directory that holds file (code_for's);
 * a digest from the cache that the master no longer has (400 on "code") is
 * forgotten, and the code packed and uploaded. */
static int submit_with_code(struct cli_ctx *ctx, const char *file, json_t *doc, char **digest,
			    json_t **job, struct errbuf *eb)
{
	bool cached;
	int ret = code_for(ctx, file, digest, &cached, eb);

	if (!ret)
		ret = client_submit(&ctx->client, doc, *digest, job, eb);
	if (ret == YERR(BAD_REQUEST) && cached && !strcmp(eb->field, "code")) {
		char *dir = code_dir(file);
		if (dir)
			codecache_forget(ctx->cfg.master, dir);
		free(dir);
		free(*digest);
		*digest = NULL;
		errbuf_reset(eb);
		if (!(ret = code_for(ctx, file, digest, &cached, eb)))
			ret = client_submit(&ctx->client, doc, *digest, job, eb);
	}
	return ret;
}

int cli_apply_git(json_t *doc, const char *arg, bool *usage, struct errbuf *eb)
{
	struct job_spec spec;
	char *url, *ref;
	int ret;

	memset(&spec, 0, sizeof(spec));
	*usage = false;
	if ((ret = spec_code_split_arg(arg, &url, &ref, eb))) {
		*usage = true;
		return ret;
	}
	json_object_set_new(doc, "code", json_pack("{s:s, s:s}", "git", url, "ref", ref ? ref : "HEAD"));
	ret = spec_from_json(doc, &spec, eb);
	spec_release(&spec);
	free(url);
	free(ref);
	return ret;
}

int cmd_submit(struct cli_ctx *ctx, int argc, char **argv)
{
	struct cli_list sets = { NULL, 0, 0 };
	int follow = 0;
	const char *name = NULL, *git = NULL;
	const struct cli_option opts[] = {
		{ "set", 0, CLI_OPT_LIST, &sets, "PATH=VALUE",
		  "override a field of the spec (repeatable): --set params.lr=0.1\n"
		  "VALUE is typed as in the YAML file: 7 and 007 are numbers, true a bool,\n"
		  "null null; quoted it is a string: --set 'params.tag=\"007\"'\n"
		  "PATH must name a field of the spec, tasks.ROLE a role of FILE" },
		{ "name", 0, CLI_OPT_STRING, &name, "NAME", "the job's name (overrides the spec's)" },
		{ "git", 0, CLI_OPT_STRING, &git, "URL[@REF]",
		  "the job's code is REF (a branch, a tag or a commit; default HEAD)\n"
		  "of the git repository URL, which the master fetches (the spec's\n"
		  "code: {git: URL, ref: REF}); nothing is uploaded" },
		{ "follow", 'f', CLI_OPT_FLAG, &follow, NULL,
		  "print every task's output, across restarts, until the job ends;\n"
		  "exit 0 if it succeeded (yard logs -f)" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = NULL, *job = NULL;
	char *digest = NULL;
	uint64_t id;
	bool ok, usage;
	int npos, status;

	status = cli_parse(ctx, "submit FILE [--set PATH=VALUE ...] [--name NAME] [--git URL[@REF]] [--follow]", opts,
			   ARRAY_SIZE(opts), argc, argv, &npos);
	if (status >= 0)
		goto out;
	if (npos != 1) {
		status = cli_usage_error(ctx, "expected one spec file");
		goto out;
	}
	if (cli_load_spec(argv[1], &sets, name, &doc, &usage, &eb) ||
	    (git && cli_apply_git(doc, git, &usage, &eb))) {
		status = usage ? cli_usage_error(ctx, "%s", eb.msg) : cli_fail(ctx, &eb);
		goto out;
	}
	if (json_object_get(doc, "code") && json_object_get(doc, "sweep")) {
		status = cli_usage_error(ctx, "code.git: a sweep's trials take uploaded code for now; "
					 "submit the sweep without --git and code");
		goto out;
	}
	if (follow && json_object_get(doc, "sweep")) {
		status = cli_usage_error(ctx, "--follow: a sweep runs many jobs; watch them with yard "
					 "exp show ID, or wait with yard wait --experiment ID");
		goto out;
	}
	/* code from git: the master fetches it, nothing is uploaded */
	if (json_object_get(doc, "code") ? client_submit(&ctx->client, doc, NULL, &job, &eb)
					 : submit_with_code(ctx, argv[1], doc, &digest, &job, &eb)) {
		status = cli_fail(ctx, &eb);
		goto out;
	}
	id = (uint64_t)cli_jint(job, "id");
	if (json_object_get(doc, "sweep") && !ctx->json)
		fprintf(stderr, "experiment %" PRIu64 ": %" PRId64 " trials (%s), %" PRId64 " at a time; "
			"yard exp show %" PRIu64 "\n", id, cli_jint(job, "trials_total"),
			cli_jstr(job, "method"), cli_jint(job, "max_parallel"), id);
	if (!follow) {
		if (ctx->json)
			cli_print_json(job);
		else
			printf("%" PRIu64 "\n", id);
		status = EXIT_OK;
		goto out;
	}
	if (!ctx->json) {
		printf("%" PRIu64 "\n", id);
		fflush(stdout);
	}
	/* --follow: the tasks' logs once they run, then the job's outcome */
	json_decref(job);
	job = NULL;
	if (wait_until_started(ctx, id, &job, &eb)) {
		status = cli_fail(ctx, &eb);
		goto out;
	}
	/* a job that ended before it ran may have no task log: not an error then */
	/* every task's, from the attempt it started with on through its restarts */
	struct cli_logs_opts lo = { .streams = CLI_STREAM_STDOUT | CLI_STREAM_STDERR, .follow = true,
				    .has_attempt = true, .attempt = (uint64_t)cli_jint(job, "attempt") };
	if (!ctx->json && cli_logs_stream(ctx, id, &lo, &eb) && !cli_job_is_final(job, &ok)) {
		status = cli_fail(ctx, &eb);
		goto out;
	}
	json_decref(job);
	job = NULL;
	if (client_job_get(&ctx->client, id, &job, &eb)) {
		status = cli_fail(ctx, &eb);
		goto out;
	}
	while (!cli_job_is_final(job, &ok)) {
		if (cli_job_next(ctx, &job, 0, &eb)) {
			status = cli_fail(ctx, &eb);
			goto out;
		}
	}
	if (ctx->json) {
		cli_print_json(job);
	} else if (!ok) {
		char *reason = cli_reason(json_object_get(job, "reason"));
		fprintf(stderr, "yard: job %" PRIu64 " %s: %s\n", id, cli_jstr(job, "state"), reason);
		free(reason);
	}
	status = ok ? EXIT_OK : EXIT_FAIL;
out:
	json_decref(doc);
	json_decref(job);
	free(digest);
	cli_list_release(&sets);
	return status;
}

/* Waits on the master (a long poll per state) until job id runs or ends. */
static int wait_until_started(struct cli_ctx *ctx, uint64_t id, json_t **job, struct errbuf *eb)
{
	int ret = client_job_get(&ctx->client, id, job, eb);

	while (!ret) {
		const char *state = cli_jstr(*job, "state");
		bool ok;
		if (cli_job_is_final(*job, &ok) || (strcmp(state, "queued") && strcmp(state, "starting")))
			return 0;
		ret = cli_job_next(ctx, job, 0, eb);
	}
	return ret;
}
