/*
 * The retention of tasks' outputs (docs/api.md, "Outputs"): with
 * `yard master --outputs-retention DURATION`, the outputs of a job that has
 * been final that long are freed: the task forgets its manifest, and the
 * chunks leave the store unless something else still holds them (a dataset
 * version, another task's outputs, a job's checkpoint, or a job not final
 * yet that reads them as data, yard-job:// in jobsource.h: chunks are held
 * once by digest, so all of these share them). Outputs of a job that is
 * not final are never freed.
 */
#ifndef YARD_MASTER_OUTPUTS_H
#define YARD_MASTER_OUTPUTS_H

#include <stdint.h>

struct master;

/* outputs_expire frees the outputs expired at now (wall us), in the open
 * batch (opening one); nothing when m's retention is 0. */
void outputs_expire(struct master *m, uint64_t now);

#endif
