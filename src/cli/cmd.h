/*
 * What the CLI commands share: the context cli_main() hands each command,
 * the parsing of its options (with the common --master, --token, --output),
 * error reporting with the CLI's exit statuses, and output helpers.
 * Internal to src/cli/.
 */
#ifndef YARD_CLI_CMD_H
#define YARD_CLI_CMD_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "cli/client.h"
#include "cli/config.h"
#include "cli/options.h"

/* Exit statuses. */
#define EXIT_OK 0
#define EXIT_FAIL 1  /* failure reported by the server, or no server */
#define EXIT_USAGE 2 /* usage error or invalid spec */

enum cli_cmd_flags {
	NEED_MASTER = 1 << 0, /* resolve the master and open ctx->client */
	TASK_HELPER = 1 << 1, /* runs inside tasks; not listed in the usage */
	SUBCOMMAND = 1 << 2,  /* run through another command ("admin reload"); not listed */
};

struct cli_ctx {
	const char *cmd;          /* the command's name: "submit" */
	unsigned flags;           /* enum cli_cmd_flags of the command */
	const char *opt_master;   /* --master, points into argv */
	const char *opt_token;    /* --token */
	const char *opt_ca;       /* --ca */
	const char *opt_pin;      /* --pin */
	const char *opt_output;   /* --output */
	bool json;                /* --output json */
	struct cli_config cfg;    /* owned: the resolved master and token */
	struct client client;     /* open when has_client */
	bool has_client;
};

/* A command: one line of a command table (cli.c's, the front's in
 * src/front.c), git.c style. */
struct cli_command {
	const char *name;
	int (*fn)(struct cli_ctx *ctx, int argc, char **argv);
	unsigned flags; /* enum cli_cmd_flags */
	const char *help;
};

/* cli_run runs command c with argv (argv[0] its name) in a fresh context;
 * returns its exit status. */
int cli_run(const struct cli_command *c, int argc, char **argv);

/* cli_parse parses the command's options and the common ones (argv[0] is the
 * command name). It returns -1 when the command should go on, with the
 * positional arguments in argv[1..*npos]; otherwise the exit status to
 * return at once (0 after printing --help, 2 after a usage error). With
 * NEED_MASTER it also resolves the master and token and opens ctx->client. */
int cli_parse(struct cli_ctx *ctx, const char *synopsis, const struct cli_option *opts,
	      size_t nopts, int argc, char **argv, int *npos);

/*
 * The CLI's errors are shown by these two (and cli_parse, through the same
 * code): as text on stderr, or with --output json as
 *   {"error": {"code": "invalid_spec", "message": "...", "field": "tasks.x"}}
 * on stdout, field null when the error is not about one; code is "usage" for
 * usage errors, else the API's code (base/error.h).
 */

/* cli_usage_error reports "yard CMD: MSG" and a hint; returns EXIT_USAGE. */
int cli_usage_error(struct cli_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* cli_fail reports eb and returns its exit status: EXIT_USAGE with
 * "yard: invalid spec: FIELD: MSG" for YERR(INVALID_SPEC), else
 * "yard: MSG" and EXIT_FAIL. */
int cli_fail(struct cli_ctx *ctx, const struct errbuf *eb);

/* cli_parse_job is cli_parse for a command that takes exactly one job id:
 * -1 to go on with *id (OUT) set, else the exit status to return. */
int cli_parse_job(struct cli_ctx *ctx, const char *synopsis, const struct cli_option *opts,
		  size_t nopts, int argc, char **argv, uint64_t *id);

/* cli_parse_jobs is cli_parse for a command that takes one or more job
 * ids (argv[1..*npos], each checked; none at all is fine with none_ok):
 * -1 to go on, else the exit status. */
int cli_parse_jobs(struct cli_ctx *ctx, const char *synopsis, const struct cli_option *opts,
		   size_t nopts, int argc, char **argv, bool none_ok, int *npos);
/* cli_experiment_id: the id of an --experiment option (0 when not given)
 * into *id; -1 to go on, else a usage error's exit status. */
int cli_experiment_id(struct cli_ctx *ctx, const char *opt, uint64_t *id);

/* cli_print_json pretty-prints doc on stdout, followed by a newline. */
void cli_print_json(const json_t *doc);

/* Accessors that never fail: "-" (or 0) for a missing or null member. */
const char *cli_jstr(const json_t *obj, const char *key);
int64_t cli_jint(const json_t *obj, const char *key);
/* cli_reason: "code: message" of a reason object, "-" when null; caller frees. */
char *cli_reason(const json_t *reason);
/* cli_age: "45s", "12m", "3h", "5d" since a wall_us time; "-" for 0. */
void cli_age(int64_t since_us, char *buf, size_t len);
/* cli_until: "in 45s", "in 12m", "in 3h", "in 5d" until a wall_us time; "now"
 * once it is past. */
void cli_until(int64_t at_us, char *buf, size_t len);
/* cli_job_gpus: GPUs the job asks for (replicas x gpus over its spec's roles). */
uint64_t cli_job_gpus(const json_t *job);

/* A text table: columns padded to their widest cell, the last one not;
 * CSV under --output csv. */
struct cli_table {
	size_t ncols;
	char **cells; /* owned, row-major, header first */
	size_t nr, alloc;
};

void cli_table_init(struct cli_table *t, size_t ncols, const char *const *headers);
/* cli_table_add appends one cell (a new row starts every ncols cells). */
void cli_table_add(struct cli_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_table_print(const struct cli_table *t, FILE *out);
void cli_table_release(struct cli_table *t);

/* Which log streams to read. */
enum cli_streams { CLI_STREAM_STDOUT = 1 << 0, CLI_STREAM_STDERR = 1 << 1 };

/* What `yard logs` prints (cli_logs_stream). */
struct cli_logs_opts {
	const char *task;       /* "ROLE/INDEX" or NULL: every task of the attempt */
	bool has_attempt;       /* false: the job's latest attempt */
	uint64_t attempt;       /* numbered from 0, as the job's "attempt" */
	unsigned streams;       /* enum cli_streams */
	bool follow;            /* until the job is final, across its restarts */
	bool prefix;            /* "[ROLE/INDEX] " before each line even for one task (it is
	                         * there anyway when more than one task is shown) */
};

/* cli_logs_stream copies the log streams of a job's tasks to our stdout and
 * stderr: the bytes as stored for one task, each line prefixed
 * "[ROLE/INDEX] " for several. With follow, until the job is final, going
 * on with each later attempt after a line "--- attempt N (after: REASON)
 * ---" on stderr. Returns 0 or the failing request's error in eb. */
int cli_logs_stream(struct cli_ctx *ctx, uint64_t id, const struct cli_logs_opts *o,
		    struct errbuf *eb);
/* cli_log_prefix appends to out each whole line of pending + data[0..len)
 * with prefix before it, and keeps the unended rest in pending; end: the
 * rest too, ended with a newline. */
void cli_log_prefix(struct strbuf *out, struct strbuf *pending, const char *prefix, const void *data,
		    size_t len, bool end);
/* cli_attempt_tasks: the names ("ROLE/INDEX") of the tasks of attempt
 * `attempt` in a job document, in its order, only `task` when not NULL;
 * *n (OUT) of them. Caller frees each and the array. */
char **cli_attempt_tasks(const json_t *job, unsigned attempt, const char *task, size_t *n);
/* cli_attempt_cause: why attempt `attempt` ended, "code: message" of the
 * task that failed or was lost (else of any task with a reason, else the
 * job's); caller frees. */
char *cli_attempt_cause(const json_t *job, unsigned attempt);

/* cli_sparkline appends to out a line of width block characters (▁..█, UTF-8)
 * that draws values[0..n): each character the mean of its share of the
 * values, scaled between their least and greatest mean; a flat series is a
 * flat line, fewer values than width draw one character each. */
void cli_sparkline(struct strbuf *out, const double *values, size_t n, size_t width);

/* cli_job_is_final: whether the job object's state is final (OUT: *succeeded). */
bool cli_job_is_final(const json_t *job, bool *succeeded);
/* cli_job_next: *job (a job object, replaced) once its state has changed,
 * or as it is after max_ms (0: 30 s); the master holds the request until
 * then (a long poll), so a change is seen when it happens. */
int cli_job_next(struct cli_ctx *ctx, json_t **job, unsigned max_ms, struct errbuf *eb);

/* The commands: each parses its own options; returns the exit status. */
int cmd_submit(struct cli_ctx *ctx, int argc, char **argv);
int cmd_ls(struct cli_ctx *ctx, int argc, char **argv);
int cmd_show(struct cli_ctx *ctx, int argc, char **argv);
int cmd_logs(struct cli_ctx *ctx, int argc, char **argv);
/* yard exec (cmd_exec.c): a command in a running task, over a session. */
int cmd_exec(struct cli_ctx *ctx, int argc, char **argv);
/* yard shell (cmd_shell.c): an interactive job, attached to once it runs;
 * yard attach (cmd_attach.c): the terminal of one. */
int cmd_shell(struct cli_ctx *ctx, int argc, char **argv);
int cmd_attach(struct cli_ctx *ctx, int argc, char **argv);
/* cli_attach attaches to the terminal of interactive job id (task NULL:
 * its task) from our own (stdin a terminal, put in raw mode until it
 * ends); who names us in messages. Returns the exit status (cmd_attach.c
 * says which). */
int cli_attach(struct cli_ctx *ctx, uint64_t id, const char *task, const char *who);
/* yard port-forward (cmd_portforward.c): a local port to a task's, over sessions. */
int cmd_portforward(struct cli_ctx *ctx, int argc, char **argv);
/* yard notebook (cmd_notebook.c): a Jupyter notebook job behind the proxy. */
int cmd_notebook(struct cli_ctx *ctx, int argc, char **argv);
int cmd_metrics(struct cli_ctx *ctx, int argc, char **argv);
int cmd_cancel(struct cli_ctx *ctx, int argc, char **argv);
int cmd_wait(struct cli_ctx *ctx, int argc, char **argv);
int cmd_hold(struct cli_ctx *ctx, int argc, char **argv);
int cmd_release(struct cli_ctx *ctx, int argc, char **argv);
int cmd_update(struct cli_ctx *ctx, int argc, char **argv);
int cmd_rerun(struct cli_ctx *ctx, int argc, char **argv);
int cmd_nodes(struct cli_ctx *ctx, int argc, char **argv);
int cmd_queue(struct cli_ctx *ctx, int argc, char **argv);
int cmd_provisioners(struct cli_ctx *ctx, int argc, char **argv);
int cmd_images(struct cli_ctx *ctx, int argc, char **argv);
int cmd_usage(struct cli_ctx *ctx, int argc, char **argv);
/* yard token create|ls|revoke (cmd_token.c). */
int cmd_token(struct cli_ctx *ctx, int argc, char **argv);
int cmd_audit(struct cli_ctx *ctx, int argc, char **argv);
/* yard admin reload (cmd_admin.c; reached through src/admin.c) */
int cmd_admin_reload(struct cli_ctx *ctx, int argc, char **argv);
int cmd_sim(struct cli_ctx *ctx, int argc, char **argv);
/* cli_load_spec reads, overrides (--set) and validates the spec file:
 * 0, or an error in eb; *usage (OUT) tells a --set that is not PATH=VALUE
 * (a usage error) from the rest (cmd_submit.c). */
int cli_load_spec(const char *file, const struct cli_list *sets, const char *name,
		  json_t **doc, bool *usage, struct errbuf *eb);
/* cli_apply_git (--git URL[@REF]): doc's code becomes {git: URL, ref: REF}
 * (whatever code the file had), checked as the spec's; *usage as
 * cli_load_spec's. */
int cli_apply_git(json_t *doc, const char *arg, bool *usage, struct errbuf *eb);
/* cli_upload_code packs the directory that holds file and uploads it. */
int cli_upload_code(struct cli_ctx *ctx, const char *file, char **digest, struct errbuf *eb);

/* yard template create|ls|show|rm (cmd_template.c). */
int cmd_template(struct cli_ctx *ctx, int argc, char **argv);

/* yard exp ls|show (cmd_exp.c). */
int cmd_exp(struct cli_ctx *ctx, int argc, char **argv);
/* yard data push|ls|show|rm (cmd_data.c). */
int cmd_data(struct cli_ctx *ctx, int argc, char **argv);
int cmd_outputs(struct cli_ctx *ctx, int argc, char **argv);
int cmd_download(struct cli_ctx *ctx, int argc, char **argv);
/* cli_outputs_get: GET /v1/jobs/ID/outputs, filtered by task ("ROLE/INDEX")
 * and attempt (either may be NULL); *out the reply (caller decrefs). */
int cli_outputs_get(struct cli_ctx *ctx, uint64_t id, const char *task, const char *attempt,
		    json_t **out, struct errbuf *eb);
/* cli_outputs_manifest: the outputs of job id as one manifest, each
 * task's latest attempt (or attempt N) under ROLE-INDEX/, or the one task's
 * as they are, once none of them is stopping (up to 10 minutes);
 * YERR(NOT_FOUND) when none matched. */
int cli_outputs_manifest(struct cli_ctx *ctx, uint64_t id, const char *task, const char *attempt,
			 json_t **manifest, struct errbuf *eb);
/* Task-side helpers of the MPI launcher (cmd_mpi.c). */
int cmd_mpirun(struct cli_ctx *ctx, int argc, char **argv);
int cmd_mpi_rsh(struct cli_ctx *ctx, int argc, char **argv);
int cmd_mpi_worker(struct cli_ctx *ctx, int argc, char **argv);

#endif
