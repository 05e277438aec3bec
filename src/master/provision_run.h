/*
 * How provisioners run their programs (provision.c): one helper, so that
 * the script of the command provisioner and Slurm's tools are run, timed
 * out and reported alike.
 */
#ifndef YARD_MASTER_PROVISION_RUN_H
#define YARD_MASTER_PROVISION_RUN_H

#include "base/error.h"
#include "base/spawn.h"

/* prov_run runs argv (argv[0] looked up in PATH) with the master's
 * environment plus vars ("KEY=VALUE", NULL-terminated; they replace the
 * same keys), input as its stdin (NULL: none), for at most
 * PROV_RUN_TIMEOUT_MS, stopping early once *cancel is set. 0 when it
 * exited 0; else YERR(UNAVAILABLE) naming the command line, how it ended
 * and the end of what it said (stderr, else stdout). *res holds what it
 * printed whenever it ran (release it), also when it failed; it is empty
 * when it could not be started. */
int prov_run(char *const *argv, const char *const *vars, const char *input, const volatile int *cancel,
	     struct spawn_result *res, struct errbuf *eb);

#endif
