/* yard exp ls | show ID: experiments (sweeps) and their trials
 * (docs/experiments.md). */
#include "base/compat.h"

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/cmd.h"

/* A value of the objective or a param as a cell: "-" for null. */
static void add_value(struct cli_table *t, const json_t *v)
{
	if (json_is_integer(v))
		cli_table_add(t, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		cli_table_add(t, "%.6g", json_real_value(v));
	else if (json_is_string(v))
		cli_table_add(t, "%s", json_string_value(v));
	else if (json_is_boolean(v))
		cli_table_add(t, "%s", json_is_true(v) ? "true" : "false");
	else
		cli_table_add(t, "-");
}

/* "3/12 done": trials that ended of all the sweep will make. */
static void add_progress(struct cli_table *t, const json_t *e)
{
	const json_t *counts = json_object_get(e, "counts"), *n;
	const char *state;
	int64_t done = 0;

	json_object_foreach((json_t *)counts, state, n) {
		if (!strcmp(state, "succeeded") || !strcmp(state, "failed") ||
		    !strcmp(state, "cancelled") || !strcmp(state, "stopped_early"))
			done += json_integer_value(n);
	}
	cli_table_add(t, "%" PRId64 "/%" PRId64, done, cli_jint(e, "trials_total"));
}

static int exp_ls(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = { "ID", "NAME", "USER", "STATE", "METHOD", "TRIALS",
					       "OBJECTIVE", "BEST", "AGE" };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	json_t *doc = NULL, *e;
	int npos, rc = cli_parse(ctx, "exp ls", NULL, 0, argc, argv, &npos);
	size_t i;

	if (rc >= 0)
		return rc;
	if (npos)
		return cli_usage_error(ctx, "exp ls takes no arguments");
	if (client_experiments(&ctx->client, &doc, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(doc);
		json_decref(doc);
		return EXIT_OK;
	}
	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(doc, "experiments"), i, e) {
		const json_t *obj = json_object_get(e, "objective");
		char age[16];
		cli_table_add(&t, "%" PRId64, cli_jint(e, "id"));
		cli_table_add(&t, "%s", cli_jstr(e, "name"));
		cli_table_add(&t, "%s", cli_jstr(e, "user"));
		cli_table_add(&t, "%s", cli_jstr(e, "state"));
		cli_table_add(&t, "%s", cli_jstr(e, "method"));
		add_progress(&t, e);
		cli_table_add(&t, "%s %s", cli_jstr(obj, "mode"), cli_jstr(obj, "metric"));
		add_value(&t, json_object_get(json_object_get(e, "best"), "value"));
		cli_age(cli_jint(e, "created_at"), age, sizeof(age));
		cli_table_add(&t, "%s", age);
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	json_decref(doc);
	return EXIT_OK;
}

static int exp_show(struct cli_ctx *ctx, int argc, char **argv)
{
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	json_t *doc = NULL, *tr, *name;
	const json_t *names, *obj;
	const char **headers;
	uint64_t id;
	size_t i, k, np;
	int npos, rc = cli_parse(ctx, "exp show ID", NULL, 0, argc, argv, &npos);

	if (rc >= 0)
		return rc;
	if (npos != 1 || parse_u64_str(argv[1], &id) < 0 || !id)
		return cli_usage_error(ctx, "expected one experiment id");
	if (client_experiment(&ctx->client, id, false, &doc, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(doc);
		json_decref(doc);
		return EXIT_OK;
	}
	names = json_object_get(doc, "params");
	obj = json_object_get(doc, "objective");
	printf("experiment %" PRId64 " %s (%s): %s, %s %" PRId64 " trials, %" PRId64 " at a time; "
	       "objective %s %s", cli_jint(doc, "id"), cli_jstr(doc, "name"), cli_jstr(doc, "user"),
	       cli_jstr(doc, "state"), cli_jstr(doc, "method"), cli_jint(doc, "trials_total"),
	       cli_jint(doc, "max_parallel"), cli_jstr(obj, "mode"), cli_jstr(obj, "metric"));
	if (json_is_object(json_object_get(doc, "early_stop")))
		printf("; early stop %s", cli_jstr(json_object_get(doc, "early_stop"), "method"));
	printf("\n");
	if (json_is_string(json_object_get(doc, "reason")))
		printf("reason: %s\n", cli_jstr(doc, "reason"));
	np = json_array_size(names);
	headers = xcalloc(np + 7, sizeof(*headers));
	headers[0] = "TRIAL";
	headers[1] = "JOB";
	headers[2] = "STATE";
	json_array_foreach(names, k, name)
		headers[3 + k] = json_string_value(name);
	headers[3 + np] = "LAST";
	headers[4 + np] = "BEST";
	headers[5 + np] = "STEP";
	cli_table_init(&t, np + 6, headers);
	json_array_foreach(json_object_get(doc, "trials"), i, tr) {
		cli_table_add(&t, "%" PRId64, cli_jint(tr, "trial"));
		cli_table_add(&t, "%" PRId64, cli_jint(tr, "job"));
		cli_table_add(&t, "%s", cli_jstr(tr, "state"));
		json_array_foreach(names, k, name)
			add_value(&t, json_object_get(json_object_get(tr, "params"), json_string_value(name)));
		add_value(&t, json_object_get(tr, "last"));
		add_value(&t, json_object_get(tr, "best"));
		add_value(&t, json_object_get(tr, "step"));
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	free(headers);
	json_decref(doc);
	return EXIT_OK;
}

int cmd_exp(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : NULL;

	if (sub && !strcmp(sub, "ls"))
		return exp_ls(ctx, argc - 1, argv + 1);
	if (sub && !strcmp(sub, "show"))
		return exp_show(ctx, argc - 1, argv + 1);
	if (sub && (!strcmp(sub, "-h") || !strcmp(sub, "--help"))) {
		printf("usage: yard exp ls | show ID   (trials sorted by the objective, best first)\n");
		return EXIT_OK;
	}
	return cli_usage_error(ctx, "expected ls or show");
}
