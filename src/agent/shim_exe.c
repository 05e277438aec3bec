/*
 * yard-shim: the shim as a small executable of its own, so that starting a
 * task does not pay for loading the whole yard binary (see shim.h). It takes
 * the same arguments as `yard shim`, including the role word, so that the
 * agent recognises it after a restart from its command line.
 */
#include "base/compat.h"

#include "agent/agent.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: yard-shim shim --dir TASKDIR [--exec ID]\n\n"
		     "The parent of one task's process: started by yard agent, never by hand.\n"
		     "It runs the task that TASKDIR describes, writes its output and its exit\n"
		     "status into TASKDIR, and outlives an agent restart.\n");
}

int main(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return fflush(stdout) ? 1 : 0;
	}
	if (argc == 2 && !strcmp(argv[1], "--version")) {
		printf("yard-shim %s\n", YARD_VERSION);
		return fflush(stdout) ? 1 : 0;
	}
	if (argc < 2 || strcmp(argv[1], "shim")) {
		usage(stderr);
		return 2;
	}
	return cmd_shim(argc - 1, argv + 1);
}
