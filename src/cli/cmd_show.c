#include "base/compat.h"

#include "base/clock.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/cmd.h"

static void print_time(const char *label, const json_t *job, const char *key)
{
	int64_t us = cli_jint(job, key);
	char buf[64] = "-";
	if (us > 0)
		format_time_utc((uint64_t)us, buf, sizeof(buf));
	printf("%-12s %s\n", label, buf);
}

/* show_value prints a scalar member, "-" for null or missing. */
static void show_value(const char *label, const json_t *job, const char *key)
{
	const json_t *v = json_object_get(job, key);
	if (json_is_string(v))
		printf("%-12s %s\n", label, json_string_value(v));
	else if (json_is_integer(v))
		printf("%-12s %" JSON_INTEGER_FORMAT "\n", label, json_integer_value(v));
	else
		printf("%-12s -\n", label);
}

static void print_tasks(const json_t *tasks)
{
	static const char *const headers[] = { "ROLE/INDEX", "STATE", "NODE", "GPUS", "EXIT",
					       "REASON" };
	struct cli_table t;
	json_t *task;
	size_t i;

	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(tasks, i, task) {
		json_t *gpus = json_object_get(task, "gpus"), *g, *exitc, *sig;
		struct strbuf gl = STRBUF_INIT;
		char *reason = cli_reason(json_object_get(task, "reason"));
		size_t j;

		json_array_foreach(gpus, j, g)
			strbuf_addf(&gl, "%s%" JSON_INTEGER_FORMAT, j ? "," : "", json_integer_value(g));
		exitc = json_object_get(task, "exit_code");
		sig = json_object_get(task, "signal");
		cli_table_add(&t, "%s/%" PRId64, cli_jstr(task, "role"), cli_jint(task, "index"));
		cli_table_add(&t, "%s", cli_jstr(task, "state"));
		cli_table_add(&t, "%s", cli_jstr(task, "node"));
		cli_table_add(&t, "%s", gl.len ? gl.buf : "-");
		if (json_is_integer(exitc))
			cli_table_add(&t, "%" JSON_INTEGER_FORMAT, json_integer_value(exitc));
		else if (json_is_integer(sig))
			cli_table_add(&t, "signal %" JSON_INTEGER_FORMAT, json_integer_value(sig));
		else
			cli_table_add(&t, "-");
		cli_table_add(&t, "%s", reason);
		free(reason);
		strbuf_release(&gl);
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
}

/* "gpu util    87% now, mean 64%  ▁▃▇█▇" (and "idle since ..." while its
 * GPUs stay idle), from the job's series (master/gpuidle.h). */
static void print_util(const json_t *u)
{
	const json_t *pts = json_object_get(u, "points"), *p;
	struct strbuf sb = STRBUF_INIT;
	double *v;
	size_t i;

	if (!json_is_object(u))
		return;
	v = xcalloc(json_array_size(pts) + 1, sizeof(*v));
	json_array_foreach(pts, i, p)
		v[i] = json_number_value(json_array_get(p, 1));
	cli_sparkline(&sb, v, json_array_size(pts), 30);
	printf("%-12s %.0f%% now, mean %.0f%%  %s\n", "gpu util", json_number_value(json_object_get(u, "last")),
	       json_number_value(json_object_get(u, "mean")), sb.buf ? sb.buf : "");
	if (json_is_integer(json_object_get(u, "idle_since")))
		print_time(json_is_true(json_object_get(u, "flagged")) ? "idle (flag)" : "idle since", u, "idle_since");
	strbuf_release(&sb);
	free(v);
}

int cmd_show(struct cli_ctx *ctx, int argc, char **argv)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *job = NULL;
	char *reason;
	uint64_t id;
	int rc;

	rc = cli_parse_job(ctx, "show ID", NULL, 0, argc, argv, &id);
	if (rc >= 0)
		return rc;
	if (client_job_get(&ctx->client, id, &job, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(job);
		json_decref(job);
		return EXIT_OK;
	}
	reason = cli_reason(json_object_get(job, "reason"));
	show_value("id", job, "id");
	show_value("name", job, "name");
	show_value("user", job, "user");
	show_value("team", job, "team");
	show_value("state", job, "state");
	printf("%-12s %s\n", "reason", reason);
	show_value("priority", job, "priority");
	show_value("attempt", job, "attempt");
	show_value("exit code", job, "exit_code");
	show_value("queue pos", job, "queue_position");
	if (json_array_size(json_object_get(job, "ahead"))) {
		json_t *v;
		size_t i;
		printf("%-12s", "ahead");
		json_array_foreach(json_object_get(job, "ahead"), i, v)
			printf(" %" JSON_INTEGER_FORMAT, json_integer_value(v));
		printf("\n");
	}
	printf("%-12s %" PRIu64 "\n", "gpus", cli_job_gpus(job));
	print_util(json_object_get(job, "gpu_util"));
	/* only jobs that run in a container image: the others look as before */
	if (json_is_string(json_object_get(json_object_get(job, "spec"), "image")))
		show_value("image", json_object_get(job, "spec"), "image");
	show_value("code", job, "code");
	/* code from git: the repository, the ref asked for and the commit run */
	if (json_is_object(json_object_get(json_object_get(job, "spec"), "code"))) {
		const json_t *gc = json_object_get(json_object_get(job, "spec"), "code");
		show_value("repo", gc, "git");
		show_value("ref", gc, "ref");
		show_value("sha", gc, "sha");
		if (json_is_string(json_object_get(gc, "path")))
			show_value("path", gc, "path");
	}
	print_time("submitted", job, "submitted_at");
	print_time("started", job, "started_at");
	print_time("running", job, "running_at");
	print_time("finished", job, "finished_at");
	printf("\n");
	print_tasks(json_object_get(job, "tasks"));
	free(reason);
	json_decref(job);
	return EXIT_OK;
}
