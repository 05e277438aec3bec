/*
 * The command-line client: `yard submit`, `yard ls`, ... One file per
 * command; commands only call the API client (cli/client.h).
 */
#ifndef YARD_CLI_H
#define YARD_CLI_H

/* cli_has_command: whether name is a CLI command. */
int cli_has_command(const char *name);
/* cli_main runs argv[0] as a CLI command; returns the exit status
 * (0 success, 1 failure reported by the server, 2 usage error). */
int cli_main(int argc, char **argv);
/* cli_finish closes stdout and returns status, or 1 when status was 0
 * and what was written could not be (a full disk): a CLI whose output was
 * lost has failed. It says why unless the reader went away (EPIPE) or a
 * write before already failed (whose writer said why). */
int cli_finish(int status);
/* cli_usage prints the list of commands. */
void cli_usage(void *stream);

#endif
