/*
 * yard attach ID [--task ROLE/INDEX]: the terminal of an interactive job's
 * running task (yard shell's), here, over an attach session
 * (docs/protocol.md, "Sessions"). Several attachers share the terminal;
 * the last few KiB it showed come first.
 *
 * stdin must be a terminal: it is put in raw mode (cli/termsess.h) and
 * restored on every way out. "~." at the start of a line detaches, and so
 * does a closed terminal (SIGHUP) or connection: the job runs on, and is
 * cancelled once nobody has been attached for its idle timeout. When the
 * task ends, the exit status is its own (128+N for signal N), 1 when the
 * session was cut off; 0 after a detach; 2 for a usage error.
 */
#include "base/compat.h"

#include "base/parse.h"
#include "cli/cmd.h"
#include "cli/termsess.h"

int cli_attach(struct cli_ctx *ctx, uint64_t id, const char *task, const char *who)
{
	struct termsess_opts to = { .who = who, .send_stdin = true, .raw = true, .escape = true };
	struct errbuf eb = ERRBUF_INIT;
	struct httpc_stream st;
	unsigned cols, rows;
	int rc;

	termsess_size(&cols, &rows);
	if (client_attach_open(&ctx->client, id, task, cols, rows, &st, &eb))
		return cli_fail(ctx, &eb);
	rc = termsess_run(&st, &to, &eb);
	httpc_stream_close(&st);
	if (rc == TERMSESS_DETACHED) {
		fprintf(stderr, "\n%s: detached from job %" PRIu64 ", which runs on: yard attach %" PRIu64
			" comes back (it is cancelled once nobody has been attached for its idle timeout)\n",
			who, id, id);
		return EXIT_OK;
	}
	return rc < 0 ? cli_fail(ctx, &eb) : rc;
}

int cmd_attach(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *task = NULL;
	const struct cli_option opts[] = {
		{ "task", 0, CLI_OPT_STRING, &task, "ROLE/INDEX", "the task (default: the job's task)" },
	};
	uint64_t id;
	int rc;

	rc = cli_parse_job(ctx, "attach ID [--task ROLE/INDEX]", opts, ARRAY_SIZE(opts), argc, argv, &id);
	if (rc >= 0)
		return rc;
	if (!isatty(STDIN_FILENO))
		return cli_usage_error(ctx, "yard attach needs a terminal on stdin (yard exec ID -- CMD runs "
				       "a command without one)");
	return cli_attach(ctx, id, task, "yard attach");
}
