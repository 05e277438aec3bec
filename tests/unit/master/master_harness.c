/* A stand-alone `yard master` for tests while the full binary cannot link. */
#include "base/compat.h"

#include <curl/curl.h>

#include "master/master.h"

int main(int argc, char **argv)
{
	return cmd_master(argc, argv);
}
