/*
 * yard-agent: the node agent on its own, which the front yard execs for
 * `yard agent` (src/front.c). It links what a node needs (libuv, jansson,
 * libyaml, libevent, nettle) and none of the master's libraries (SQLite,
 * libpq, libmicrohttpd, GnuTLS, libgit2); it talks to its master over
 * libevent's evhttp (common/httpc_ev.c) and loads libcurl (Docker's
 * socket, S3, staging, sessions), libxml2 (S3 listings), libarchive (code)
 * and OpenSSL (https) at their first use. An idle agent is then as small
 * as slurmd (docs/design-notes.md, "An agent as small as slurmd").
 *
 * It also runs `shim`, the task supervisor the agent starts through
 * /proc/self/exe where yard-shim is not installed, and a container task's
 * shim; anything else is yard-core's (src/main.c), exec'd as the front
 * does, so a task that runs "yard ..." reaches every command.
 */
#include "base/compat.h"

#include "agent/agent.h"
#include "agent/shim_docker.h"
#include "base/fsutil.h"
#include "cli/cli.h"
#include "common/httpc.h"

int main(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) {
		printf("yard %s\n", YARD_VERSION);
		return cli_finish(0);
	}
	if (argc > 1 && !strcmp(argv[1], "agent")) {
		httpc_global_init(&httpc_ev);
		return cli_finish(cmd_agent(argc - 1, argv + 1));
	}
	if (argc > 1 && !strcmp(argv[1], "shim"))
		return cli_finish(cmd_shim_any(argc - 1, argv + 1));
	return exec_sibling("yard-core", argv);
}
