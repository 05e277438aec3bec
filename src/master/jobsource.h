/*
 * Data from an earlier job (docs/datasets.md, "A job's outputs as data"):
 * a spec's `data: [{source: yard-job://ID/outputs}]` (or /checkpoint) reads
 * what job ID left behind. The entry is pinned once that job is final, to
 * one manifest of chunks the store holds (datasets.h): for outputs, each
 * task's latest attempt that left any, under MOUNT/ROLE-INDEX; for a
 * checkpoint, the job's latest, at MOUNT. The pinned entry is
 *
 *   {kind: "job", source, mount, job: ID, digest: "sha256:HEX", size}
 *
 * which the agents stage as they stage a dataset version. The manifest is
 * then the reading job's as much as its code is: its viewers and its
 * node's agent may read it (visibility.c), and its chunks stay while the
 * reading job is not final, whatever the outputs' retention frees.
 *
 * A job that is not final yet must be listed in the spec's `after`: the
 * entry is pinned when the dependency is met (control.c), and a source job
 * that left nothing to read fails the reading job with that reason.
 */
#ifndef YARD_MASTER_JOBSOURCE_H
#define YARD_MASTER_JOBSOURCE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

struct master;
struct caller;
struct job;
struct job_spec;

/* jobsource_resolve, at submit, completes e, the resolved entry of
 * spec->data[i] (a yard-job source): YERR(INVALID_SPEC) naming
 * data[i].source for a job that c may not see whole (as if there were
 * none), for one that is not final and not in spec's after, or for a settled
 * one with nothing to read (one that is final with tasks still stopping
 * is pinned once they have stopped: jobsource_pin). */
int jobsource_resolve(struct master *m, const struct caller *c, const struct job_spec *spec, size_t i,
		      json_t *e, struct errbuf *eb);

/* jobsource_pin pins j's entries whose source job has settled
 * (core_job_settled; saving j when one changed); -1 with msg (size bytes)
 * naming the entry when a source job left nothing to read, 1 with msg when
 * one is still to settle, else 0. */
int jobsource_pin(struct master *m, struct job *j, char *msg, size_t size);

/* jobsource_has: whether digest is a manifest that j's data pins. */
bool jobsource_has(const struct job *j, const char *digest);

/* jobsource_index lists j under each manifest its data pins in m's code
 * index (core_load, and each pin). */
void jobsource_index(struct master *m, const struct job *j);

/* jobsource_release, as j becomes final: the manifests its data pins are
 * no longer held by it (datasets_drop_manifest: they go once the batch is
 * committed, unless something else holds them). */
void jobsource_release(struct master *m, const struct job *j);

#endif
