/* The retention of tasks' outputs (outputs.h). */
#include "base/compat.h"
#include "master/outputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/state.h"
#include "master/core.h"
#include "master/datasets.h"

/* Whether job j's outputs are past m's retention at now. */
static bool expired(const struct master *m, const struct job *j, uint64_t now)
{
	return job_state_is_final(j->state) && j->finished_at &&
	       j->finished_at + m->outputs_retention_ms * 1000 <= now;
}

/* Frees the outputs of task t (of an expired job): its manifest, and the
 * chunks no one else holds, go once the batch is committed (datasets.h). */
static void expire_task(struct master *m, struct task *t)
{
	datasets_drop_manifest(m, t->outputs);
	free(t->outputs);
	t->outputs = NULL;
	t->outputs_size = 0;
	json_decref(t->outputs_files);
	t->outputs_files = NULL;
	core_save_task(m, t);
}

void outputs_expire(struct master *m, uint64_t now)
{
	bool opened = false;

	if (!m->outputs_retention_ms)
		return;
	for (size_t i = 1; i <= m->ntasks; i++) {
		struct task *t = m->tasks[i - 1];
		if (!t || !t->outputs || !expired(m, t->job, now))
			continue;
		if (!opened && core_batch_open(m))
			return; /* the store is not answering: the next tick tries again */
		opened = true;
		expire_task(m, t);
	}
}
