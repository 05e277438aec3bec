/*
 * yard shell [--gpus N] [--cpus C] [--memory M] [--image IMG] [--pool P]
 * [--idle-timeout D]: a login shell on a node, with the resources asked
 * for (salloc and srun --pty in one). It submits an interactive job of one
 * task (docs/architecture.md, "Interactive jobs"), waits for it to start,
 * saying on stderr why it waits while it is queued (^C meanwhile cancels
 * it), then attaches to its terminal as yard attach does (cmd_attach.c):
 * "~." detaches and the job runs on, yard attach ID comes back. The exit
 * status is the shell's once it exits (the job ends with it), 0 after a
 * detach, 1 when the job could not start or the session was cut off, 2
 * for a usage error.
 */
#include "base/compat.h"

#include <math.h>

#include "base/parse.h"
#include "base/xalloc.h"
#include "cli/cmd.h"
#include "common/spec.h"

/* Polling the job while it waits: fast at first, as an idle node starts it
 * at once. */
#define POLL_FIRST_MS 10
#define POLL_MAX_MS 250
/* The name of the job and of its role. */
#define SHELL_NAME "shell"

/* A signal that asks us to give up while the job waits (^C, a closed
 * terminal, SIGTERM). */
static volatile sig_atomic_t give_up;

static void on_give_up(int sig)
{
	give_up = sig;
}

/* The spec's fields that come from our options: a spec error about one is
 * about the option. */
static const struct {
	const char *field, *option;
} option_fields[] = {
	{ "image", "--image" },
	{ "pool", "--pool" },
	{ "interactive.idle_timeout", "--idle-timeout" },
	{ "tasks.shell.gpus", "--gpus" },
	{ "tasks.shell.cpus", "--cpus" },
	{ "tasks.shell.memory", "--memory" },
};

struct shell_opts {
	const char *gpus, *cpus, *memory, *image, *pool, *idle;
};

/* The job's spec from the options (new reference), or NULL after a usage
 * error (*rc its exit status). */
static json_t *shell_spec(struct cli_ctx *ctx, const struct shell_opts *o, int *rc)
{
	json_t *role = json_object(), *doc, *inter = json_object();
	const char *term = getenv("TERM");
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec spec;
	uint64_t n;

	if (o->gpus) {
		if (parse_u64_str(o->gpus, &n) || n > 64) {
			*rc = cli_usage_error(ctx, "--gpus '%s': expected a number of GPUs, 0 to 64", o->gpus);
			goto fail;
		}
		json_object_set_new(role, "gpus", json_integer((json_int_t)n));
	}
	if (o->cpus) {
		char *end = NULL;
		double c = strtod(o->cpus, &end);
		if (!*o->cpus || *end || !isfinite(c) || c <= 0) {
			*rc = cli_usage_error(ctx, "--cpus '%s': expected a number of CPUs > 0 (0.5, 2)", o->cpus);
			goto fail;
		}
		json_object_set_new(role, "cpus", c == floor(c) && c < 1e9 ? json_integer((json_int_t)c)
									: json_real(c));
	}
	if (o->memory) {
		if (parse_size_str(o->memory, &n)) {
			*rc = cli_usage_error(ctx, "--memory '%s': expected a size such as 4GiB", o->memory);
			goto fail;
		}
		json_object_set_new(role, "memory", json_string(o->memory));
	}
	if (o->idle)
		json_object_set_new(inter, "idle_timeout", json_string(o->idle));
	doc = json_pack("{s:s, s:{s:o}, s:o}", "name", SHELL_NAME, "tasks", SHELL_NAME, role,
			"interactive", inter);
	/* the shell's terminal is of this one's kind */
	if (term && *term && strlen(term) < 64)
		json_object_set_new(doc, "env", json_pack("{s:s}", "TERM", term));
	if (o->image)
		json_object_set_new(doc, "image", json_string(o->image));
	if (o->pool)
		json_object_set_new(doc, "pool", json_string(o->pool));
	if (spec_from_json(doc, &spec, &eb)) {
		spec_release(&spec);
		json_decref(doc);
		for (size_t i = 0; i < ARRAY_SIZE(option_fields); i++)
			if (!strcmp(eb.field, option_fields[i].field)) {
				const char *msg = eb.msg + strlen(eb.field);
				*rc = cli_usage_error(ctx, "%s%s", option_fields[i].option, msg);
				return NULL;
			}
		*rc = cli_fail(ctx, &eb);
		return NULL;
	}
	spec_release(&spec);
	return doc;
fail:
	json_decref(role);
	json_decref(inter);
	return NULL;
}

/* Waits for job id to run, saying why it waits when that changes. 0 once
 * it runs; else the exit status (it ended first, a request failed, or we
 * were asked to give up: then it is cancelled). */
static int wait_running(struct cli_ctx *ctx, uint64_t id)
{
	struct errbuf eb = ERRBUF_INIT;
	unsigned delay_ms = POLL_FIRST_MS;
	char *said = NULL;
	json_t *job = NULL;
	int rc = -1;

	while (rc < 0) {
		const char *state;
		char *why;
		bool ok;
		json_decref(job);
		job = NULL;
		if (give_up) {
			json_t *out = NULL;
			if (client_cancel(&ctx->client, id, &out, &eb))
				rc = cli_fail(ctx, &eb);
			else
				fprintf(stderr, "yard shell: cancelled job %" PRIu64 "\n", id);
			json_decref(out);
			if (rc < 0)
				rc = 128 + give_up;
			break;
		}
		if (client_job_get(&ctx->client, id, &job, &eb)) {
			rc = cli_fail(ctx, &eb);
			break;
		}
		state = cli_jstr(job, "state");
		if (!strcmp(state, "running")) {
			rc = 0;
			break;
		}
		if (cli_job_is_final(job, &ok)) {
			char *reason = cli_reason(json_object_get(job, "reason"));
			fprintf(stderr, "yard shell: job %" PRIu64 " %s before its shell started: %s\n", id, state,
				reason);
			free(reason);
			rc = EXIT_FAIL;
			break;
		}
		if (!strcmp(state, "queued")) {
			char *reason = cli_reason(json_object_get(job, "reason"));
			int64_t pos = cli_jint(job, "queue_position");
			why = pos ? xasprintf("queued (position %" PRId64 "): %s", pos, reason)
				  : xasprintf("queued: %s", reason);
			free(reason);
		} else {
			why = xasprintf("%s", state);
		}
		if (!said || strcmp(said, why)) {
			fprintf(stderr, "yard shell: job %" PRIu64 " %s\n", id, why);
			free(said);
			said = why;
		} else {
			free(why);
		}
		usleep(delay_ms * 1000);
		delay_ms = delay_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : delay_ms * 2;
	}
	free(said);
	json_decref(job);
	return rc;
}

int cmd_shell(struct cli_ctx *ctx, int argc, char **argv)
{
	struct shell_opts o = { 0 };
	const struct cli_option opts[] = {
		{ "gpus", 0, CLI_OPT_STRING, &o.gpus, "N", "GPUs for the shell (default 0)" },
		{ "cpus", 0, CLI_OPT_STRING, &o.cpus, "C", "CPUs (default 1)" },
		{ "memory", 0, CLI_OPT_STRING, &o.memory, "M", "memory, such as 8GiB (default: no limit)" },
		{ "image", 0, CLI_OPT_STRING, &o.image, "IMG", "run the shell in this container image" },
		{ "pool", 0, CLI_OPT_STRING, &o.pool, "P", "the pool of nodes (default: default)" },
		{ "idle-timeout", 0, CLI_OPT_STRING, &o.idle, "D",
		  "cancel the job once nobody has been attached this long\n(default: the master's, 1h)" },
	};
	struct errbuf eb = ERRBUF_INIT;
	json_t *spec = NULL, *job = NULL;
	struct sigaction sa, old[3];
	static const int sigs[3] = { SIGINT, SIGTERM, SIGHUP };
	uint64_t id;
	int npos, rc;

	rc = cli_parse(ctx, "shell [--gpus N] [--cpus C] [--memory M] [--image IMG] [--pool P] "
		       "[--idle-timeout D]", opts, ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos)
		return cli_usage_error(ctx, "unexpected argument '%s'", argv[1]);
	if (!(spec = shell_spec(ctx, &o, &rc)))
		return rc;
	if (!isatty(STDIN_FILENO)) {
		json_decref(spec);
		return cli_usage_error(ctx, "yard shell needs a terminal on stdin (yard submit runs a job "
				       "without one)");
	}
	if (client_submit(&ctx->client, spec, NULL, &job, &eb)) {
		rc = cli_fail(ctx, &eb);
		goto out;
	}
	id = (uint64_t)cli_jint(job, "id");
	/* from now on a ^C (or a closed terminal) while it waits cancels it */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_give_up;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);
	rc = wait_running(ctx, id);
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	if (rc)
		goto out;
	rc = cli_attach(ctx, id, NULL, "yard shell");
out:
	json_decref(spec);
	json_decref(job);
	return rc;
}
