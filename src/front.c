/*
 * yard, the front. The commands a researcher runs all day (submit, ls,
 * show, logs, wait, cancel) are served here, on a client that loads only
 * libevent, OpenSSL, jansson, libyaml and libarchive; `yard agent` is
 * yard-agent beside it (src/agent_prog.c), and every other command and
 * daemon yard-core (src/main.c), exec'd with the same arguments, so the
 * process, its pid and its output are the same.
 *
 * Why two binaries: a CLI call's cost is mostly the dynamic loader's work
 * on the libraries a program links, and Debian's libcurl alone maps some
 * forty (Kerberos, LDAP, SASL, RTMP, SSH, ...) with BIND_NOW, which costs
 * more CPU than a whole `sbatch`. The commands served here carry their
 * requests over libevent's evhttp instead (common/httpc_ev.c): the same
 * client (common/httpc.h) on another transport. docs/design-notes.md ("A
 * CLI as cheap as sbatch") has the measurements.
 */
#include "base/compat.h"

#include "base/fsutil.h"
#include "cli/cli.h"
#include "cli/cmd.h"
#include "common/httpc.h"

/* The commands the front serves itself: yard-core has the same ones
 * (src/cli/cli.c's table), so either answers alike. */
static const struct cli_command commands[] = {
	{ "submit", cmd_submit, NEED_MASTER, NULL },
	{ "ls", cmd_ls, NEED_MASTER, NULL },
	{ "show", cmd_show, NEED_MASTER, NULL },
	{ "logs", cmd_logs, NEED_MASTER, NULL },
	{ "wait", cmd_wait, NEED_MASTER, NULL },
	{ "cancel", cmd_cancel, NEED_MASTER, NULL },
};

/* The agent, which maps only what a node needs (src/agent_prog.c), and
 * the whole program, beside this one. */
#define AGENT_NAME "yard-agent"
#define CORE_NAME "yard-core"

int main(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) {
		printf("yard %s\n", YARD_VERSION);
		return cli_finish(0);
	}
	for (size_t i = 0; argc > 1 && i < ARRAY_SIZE(commands); i++)
		if (!strcmp(argv[1], commands[i].name)) {
			httpc_global_init(&httpc_ev);
			return cli_finish(cli_run(&commands[i], argc - 1, argv + 1));
		}
	if (argc > 1 && !strcmp(argv[1], "agent"))
		return exec_sibling(AGENT_NAME, argv);
	return exec_sibling(CORE_NAME, argv);
}
