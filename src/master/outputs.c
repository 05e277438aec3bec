/* The retention of tasks' outputs (outputs.h). */
#include "base/compat.h"
#include "master/outputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/state.h"
#include "master/codeindex.h"
#include "master/core.h"
#include "master/jobsource.h"
#include "master/store.h"

static bool same(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* Whether job j's outputs are past m's retention at now. */
static bool expired(const struct master *m, const struct job *j, uint64_t now)
{
	return job_state_is_final(j->state) && j->finished_at &&
	       j->finished_at + m->outputs_retention_ms * 1000 <= now;
}

/* Whether anything but expired outputs holds digest. */
static bool held(struct master *m, const char *digest, uint64_t now)
{
	size_t n;
	const uint64_t *ids = codeindex_find(m->code_index, digest, &n);

	for (size_t i = 0; i < n; i++) {
		const struct job *j = core_job(m, ids[i]);
		if (!j)
			continue;
		if (same(j->code, digest) || same(j->checkpoint, digest))
			return true;
		if (expired(m, j, now))
			continue;
		for (size_t k = 0; k < j->ntasks; k++)
			if (same(j->tasks[k]->outputs, digest))
				return true;
	}
	return false;
}

/* Whether a job not final yet reads digest as data (jobsource.h): the
 * outputs it reads wait until it is final. */
static bool read_by_live_job(struct master *m, const char *digest)
{
	size_t n;
	const uint64_t *ids = codeindex_find(m->code_index, digest, &n);

	for (size_t i = 0; i < n; i++) {
		const struct job *j = core_job(m, ids[i]);
		if (j && !job_state_is_final(j->state) && jobsource_has(j, digest))
			return true;
	}
	return false;
}

/* Frees the outputs of task t (of an expired job) at now. */
static void expire_task(struct master *m, struct task *t, uint64_t now)
{
	struct errbuf eb = ERRBUF_INIT;
	char name[CODE_NAME_MAX];
	char *digest = t->outputs;

	t->outputs = NULL;
	t->outputs_size = 0;
	json_decref(t->outputs_files);
	t->outputs_files = NULL;
	core_save_task(m, t);
	if (!held(m, digest, now) && !strncmp(digest, "sha256:", 7)) {
		code_blob_name(name, digest + 7);
		if (m->sops->blob_delete(m->store, name, &eb))
			fprintf(stderr, "yard master: cannot free outputs '%s': %s\n", digest, eb.msg);
	}
	free(digest);
}

void outputs_expire(struct master *m, uint64_t now)
{
	bool opened = false;

	if (!m->outputs_retention_ms)
		return;
	for (size_t i = 1; i <= m->ntasks; i++) {
		struct task *t = m->tasks[i - 1];
		if (!t || !t->outputs || !expired(m, t->job, now) || read_by_live_job(m, t->outputs))
			continue;
		if (!opened && core_batch_open(m))
			return; /* the store is not answering: the next tick tries again */
		opened = true;
		expire_task(m, t, now);
	}
}
