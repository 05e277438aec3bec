/*
 * yard exec ID [--task ROLE/INDEX] [-i] [-t] -- CMD ARGS: a command run in
 * a running task of a job, its output here, over an exec session
 * (docs/protocol.md, "Sessions"; the WebSocket client end, yard.exec.v1).
 *
 * -t asks for a terminal: stdin must be one; with -i it is put in raw mode
 * (every key goes to the task's terminal, ^C and ^\ too) and restored on
 * every way out, also when SIGTERM or SIGHUP stops us. Window size changes
 * (SIGWINCH) go as resize messages. Without a raw terminal, SIGINT and
 * SIGQUIT go as signal messages. -i sends stdin, and its end as an empty
 * stdin message. The terminal end is cli/termsess.h's, shared with yard
 * attach and yard shell.
 *
 * The exit status is the command's, 128+N when a signal N killed it, 1
 * when the session was cut off (the message says why) or ended without a
 * status, 2 for a usage error.
 */
#include "base/compat.h"

#include "base/parse.h"
#include "base/xalloc.h"
#include "cli/cmd.h"
#include "cli/termsess.h"

/* -it and -ti as -i -t (options before "--" only). */
static char **split_flags(int argc, char **argv, int *out_argc)
{
	char **out = xcalloc((size_t)argc * 2 + 1, sizeof(*out));
	int n = 0;
	bool args = false;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--"))
			args = true;
		if (!args && i > 0 && a[0] == '-' && a[1] && a[1] != '-' && a[2] &&
		    strspn(a + 1, "it") == strlen(a + 1)) {
			for (const char *p = a + 1; *p; p++)
				out[n++] = *p == 'i' ? "-i" : "-t";
			continue;
		}
		out[n++] = argv[i];
	}
	*out_argc = n;
	return out;
}

int cmd_exec(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *task = NULL;
	int interactive = 0, tty = 0;
	const struct cli_option opts[] = {
		{ "task", 0, CLI_OPT_STRING, &task, "ROLE/INDEX",
		  "the task to run in (default: the job's first task)" },
		{ "interactive", 'i', CLI_OPT_FLAG, &interactive, NULL, "send stdin to the command" },
		{ "tty", 't', CLI_OPT_FLAG, &tty, NULL,
		  "run the command on a terminal (stdin must be one; with -i it is put in raw mode)" },
	};
	struct termsess_opts to = { .who = "yard exec" };
	struct httpc_stream st;
	struct errbuf eb = ERRBUF_INIT;
	struct client_exec_req req = { 0 };
	uint64_t id;
	int npos, rc, nargc;
	char **nargv = split_flags(argc, argv, &nargc);

	rc = cli_parse(ctx, "exec ID [--task ROLE/INDEX] [-i] [-t] -- CMD [ARG...]", opts, ARRAY_SIZE(opts),
		       nargc, nargv, &npos);
	if (rc >= 0)
		goto out;
	if (npos < 2) {
		rc = cli_usage_error(ctx, "expected a job id and a command (yard exec ID -- CMD ARGS)");
		goto out;
	}
	if (parse_u64_str(nargv[1], &id) < 0 || !id) {
		rc = cli_usage_error(ctx, "'%s' is not a job id", nargv[1]);
		goto out;
	}
	if (tty && !isatty(STDIN_FILENO)) {
		rc = cli_usage_error(ctx, "-t needs a terminal on stdin (leave -t out to run without one)");
		goto out;
	}
	nargv[npos + 1] = NULL; /* the command ends with the positional arguments */
	req.task = task;
	req.argv = nargv + 2;
	req.tty = tty;
	req.stdin_open = interactive;
	if (tty)
		termsess_size(&req.cols, &req.rows);
	if (client_exec_open(&ctx->client, id, &req, &st, &eb)) {
		rc = cli_fail(ctx, &eb);
		goto out;
	}
	to.send_stdin = interactive;
	to.raw = tty && interactive;
	rc = termsess_run(&st, &to, &eb);
	if (rc == -1)
		rc = cli_fail(ctx, &eb);
	else if (rc == TERMSESS_DETACHED)
		rc = EXIT_FAIL; /* our terminal hung up: the command was hung up on too */
	httpc_stream_close(&st);
out:
	free(nargv);
	return rc;
}
