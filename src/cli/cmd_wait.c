#include "base/compat.h"

#include "base/clock.h"
#include "base/parse.h"
#include "cli/cmd.h"

/* Polling back-off of an experiment: start fast, settle at twice a second. */
#define WAIT_FIRST_MS 20
#define WAIT_MAX_MS 500

/* wait_one waits for job id (long polls on its state) until it ends or the
 * deadline (0: none) passes, and reports it; EXIT_OK when it succeeded. */
static int wait_one(struct cli_ctx *ctx, uint64_t id, const char *timeout, uint64_t deadline,
		    bool prefix)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *job = NULL;
	bool ok = false, timed_out = false;

	if (client_job_get(&ctx->client, id, &job, &eb))
		return cli_fail(ctx, &eb);
	/* each request is held by the master until the job's state changes */
	while (!cli_job_is_final(job, &ok)) {
		uint64_t now = mono_ms();
		if (deadline && now >= deadline) {
			timed_out = true;
			break;
		}
		if (cli_job_next(ctx, &job, deadline ? (unsigned)(deadline - now) : 0, &eb)) {
			json_decref(job);
			return cli_fail(ctx, &eb);
		}
	}
	if (ctx->json)
		cli_print_json(job);
	else if (prefix)
		printf("%" PRIu64 " %s\n", id, cli_jstr(job, "state"));
	else
		printf("%s\n", cli_jstr(job, "state"));
	if (timed_out) {
		fprintf(stderr, "yard: timed out after %s waiting for job %" PRIu64 " (still %s)\n",
			timeout, id, cli_jstr(job, "state"));
	} else if (!ok) {
		char *reason = cli_reason(json_object_get(job, "reason"));
		fprintf(stderr, "yard: job %" PRIu64 " %s: %s\n", id, cli_jstr(job, "state"), reason);
		free(reason);
	}
	json_decref(job);
	return ok && !timed_out ? EXIT_OK : EXIT_FAIL;
}

/* wait_experiment polls experiment id until it is not running or the
 * deadline (0: none) passes; EXIT_OK when it completed without a failed
 * trial (trials stopped early are a sweep's own outcome). */
static int wait_experiment(struct cli_ctx *ctx, uint64_t id, const char *timeout, uint64_t deadline)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc = NULL;
	unsigned delay_ms = WAIT_FIRST_MS;
	int64_t failed;
	bool ok;

	for (;;) {
		json_decref(doc);
		doc = NULL;
		if (client_experiment(&ctx->client, id, false, &doc, &eb))
			return cli_fail(ctx, &eb);
		if (strcmp(cli_jstr(doc, "state"), "running") ||
		    (deadline && mono_ms() >= deadline))
			break;
		usleep(delay_ms * 1000);
		delay_ms = delay_ms * 2 > WAIT_MAX_MS ? WAIT_MAX_MS : delay_ms * 2;
	}
	failed = cli_jint(json_object_get(doc, "counts"), "failed");
	ok = !strcmp(cli_jstr(doc, "state"), "completed") && !failed;
	if (ctx->json)
		cli_print_json(doc);
	else
		printf("experiment %" PRIu64 " %s\n", id, cli_jstr(doc, "state"));
	if (!strcmp(cli_jstr(doc, "state"), "running"))
		fprintf(stderr, "yard: timed out after %s waiting for experiment %" PRIu64 "\n", timeout,
			id);
	else if (!ok)
		fprintf(stderr, "yard: experiment %" PRIu64 " %s, %" PRId64 " trial%s failed%s%s\n", id,
			cli_jstr(doc, "state"), failed, failed == 1 ? "" : "s",
			json_is_string(json_object_get(doc, "reason")) ? ": " : "",
			json_is_string(json_object_get(doc, "reason")) ? cli_jstr(doc, "reason") : "");
	json_decref(doc);
	return ok ? EXIT_OK : EXIT_FAIL;
}

/* yard wait ID... [--experiment ID] [--timeout S]: waits for every job in
 * turn, then the experiment (one deadline for all); exits 0 only when
 * every one succeeded. */
int cmd_wait(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *timeout = NULL, *exp = NULL;
	const struct cli_option opts[] = {
		{ "timeout", 't', CLI_OPT_STRING, &timeout, "S",
		  "give up after S seconds (or a duration: 90s, 15m, 2h)" },
		{ "experiment", 'e', CLI_OPT_STRING, &exp, "ID",
		  "wait until an experiment has made all its trials and they ended;\n"
		  "exit 0 if it completed with no failed trial" },
	};
	uint64_t id, exp_id = 0, limit_ms = 0, deadline = 0;
	int npos, rc, status = EXIT_OK;

	rc = cli_parse_jobs(ctx, "wait ID... | --experiment ID [--timeout S]", opts, ARRAY_SIZE(opts),
			    argc, argv, true, &npos);
	if (rc < 0 && !npos && !exp)
		rc = cli_usage_error(ctx, "expected one or more job ids, or --experiment ID");
	if (rc < 0 && exp)
		rc = cli_experiment_id(ctx, exp, &exp_id);
	if (rc >= 0)
		return rc;
	if (timeout && parse_duration_str(timeout, &limit_ms) < 0)
		return cli_usage_error(ctx, "--timeout expects seconds or a duration, got '%s'",
				       timeout);
	if (timeout)
		deadline = mono_ms() + limit_ms;
	for (int i = 1; i <= npos; i++) {
		parse_u64_str(argv[i], &id);
		rc = wait_one(ctx, id, timeout, deadline, npos > 1 || exp);
		if (rc != EXIT_OK && status == EXIT_OK)
			status = rc;
	}
	if (exp_id && (rc = wait_experiment(ctx, exp_id, timeout, deadline)) != EXIT_OK &&
	    status == EXIT_OK)
		status = rc;
	return status;
}
