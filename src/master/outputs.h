/*
 * The retention of tasks' outputs (docs/api.md, "Outputs"): with
 * `yard master --outputs-retention DURATION`, the outputs of a job that has
 * been final that long are freed: the task forgets its archive's digest,
 * and the archive leaves the store unless something else still holds it
 * (the code or checkpoint of any job, the outputs of a job not yet
 * expired: archives are content-addressed, so equal dirs share one).
 * Outputs of a job that is not final are never freed, nor those that a job
 * not final yet reads as data (yard-job://, jobsource.h): they wait until
 * it is.
 */
#ifndef YARD_MASTER_OUTPUTS_H
#define YARD_MASTER_OUTPUTS_H

#include <stdint.h>

struct master;

/* outputs_expire frees the outputs expired at now (wall us), in the open
 * batch (opening one); nothing when m's retention is 0. */
void outputs_expire(struct master *m, uint64_t now);

#endif
