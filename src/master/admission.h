#ifndef YARD_MASTER_ADMISSION_H
#define YARD_MASTER_ADMISSION_H
/*
 * Admission: whether any state of the cluster could run a job (docs/
 * design-notes.md, "Admission: refuse what no cluster state could run").
 */
#include "master/core.h"
#include "sched/sched.h"

/* Admission (sched_check_feasible) over every node the master knows and
 * what its provisioned pools could add (elastic_admission_nodes), its
 * answer kept for the job's shape until a node changes (m->nodes_gen): a
 * check walks every node, and 10,000 of them for each submission was most
 * of what a submission cost. With provisioned pools nothing is kept: what
 * they could add changes with their requests, not with m->nodes_gen.
 * 0 when sj could run, else nonzero with field and msg saying why. */
int admission_check(struct master *m, const struct sched_job *sj, char *field, size_t field_len,
		    char *msg, size_t msg_len);

#endif
