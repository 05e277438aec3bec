/*
 * yard: one binary for every role, git-style. The daemons (master, agent,
 * shim, up) are dispatched here; everything else is a CLI command.
 */
#include "base/compat.h"

#include "admin.h"
#include "agent/agent.h"
#include "agent/shim_docker.h"
#include "cli/cli.h"
#include "common/httpc.h"
#include "master/gitworker.h"
#include "master/master.h"
#include "up.h"

static const struct role {
	const char *name;
	int (*fn)(int argc, char **argv);
} roles[] = {
	{ "master", cmd_master },
	{ "agent", cmd_agent },
	{ "shim", cmd_shim_any },
	{ "up", cmd_up },
	{ "admin", cmd_admin },
	/* hidden: the master's git work of one submission (master/gitworker.h) */
	{ GITWORKER_CMD, cmd_git_worker },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: yard <command> [options]\n\n"
		     "daemons:\n"
		     "  master   run the control plane\n"
		     "  agent    run a node agent\n"
		     "  up       master and a local agent in one process\n"
		     "  admin    back up and restore a master's state; reload its config (yard admin --help)\n\n");
	cli_usage(out);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "help") && cli_has_command(argv[2])) {
		char *help_argv[] = { argv[2], (char *)"--help", NULL };
		return cli_finish(cli_main(2, help_argv));
	}
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return cli_finish(argc < 2 ? 2 : 0);
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("yard %s\n", YARD_VERSION);
		return cli_finish(0);
	}
	for (size_t i = 0; i < ARRAY_SIZE(roles); i++)
		if (!strcmp(argv[1], roles[i].name)) {
			if (strcmp(argv[1], "shim"))
				httpc_global_init(&httpc_curl);
			return cli_finish(roles[i].fn(argc - 1, argv + 1));
		}
	if (cli_has_command(argv[1])) {
		httpc_global_init(&httpc_curl);
		return cli_finish(cli_main(argc - 1, argv + 1));
	}
	fprintf(stderr, "yard: '%s' is not a yard command\n\n", argv[1]);
	usage(stderr);
	return cli_finish(2);
}
