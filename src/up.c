#include "base/compat.h"
#include "up.h"

int cmd_up(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "yard up: not built yet\n");
	return 2;
}
