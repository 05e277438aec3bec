/*
 * yard-shim: the shim as a small executable of its own, so that starting a
 * task does not pay for loading the whole yard binary (see shim.h). It takes
 * the same arguments as `yard shim`, including the role word, so that the
 * agent recognises it after a restart from its command line.
 */
#include "base/compat.h"

#include "agent/agent.h"

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "shim")) {
		fprintf(stderr, "usage: yard-shim shim --dir TASKDIR\n");
		return 2;
	}
	return cmd_shim(argc - 1, argv + 1);
}
