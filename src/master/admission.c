#include "base/compat.h"
#include "master/admission.h"

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "master/elastic.h"
#include "master/nodeview.h"

/* What sched_check_feasible reads of a job, as text: jobs of one shape get
 * one answer while the nodes stay as they are. */
static char *admit_shape(const struct sched_job *sj)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_addf(&sb, "%s\n%s\n%s\n%" PRIu64 "\n%u\n", sj->pool ? sj->pool : "\1",
		    sj->image ? sj->image : "\1", sj->gpu_model ? sj->gpu_model : "\1", sj->gpu_memory,
		    sj->max_nodes);
	for (size_t i = 0; i < sj->nlabels; i++)
		strbuf_addf(&sb, "%s=%s\n", sj->labels[i].key, sj->labels[i].value);
	for (size_t i = 0; i < sj->ntasks; i++)
		strbuf_addf(&sb, "%s:%u:%" PRIu64 ":%" PRIu64 ":%s\n", sj->tasks[i].role, sj->tasks[i].gpus,
			    sj->tasks[i].cpus_milli, sj->tasks[i].memory,
			    sj->task_pools && sj->task_pools[i] ? sj->task_pools[i] : "\1");
	return strbuf_detach(&sb, NULL);
}

int admission_check(struct master *m, const struct sched_job *sj, char *field, size_t field_len,
		    char *msg, size_t msg_len)
{
	char *shape = admit_shape(sj);
	struct nodeview snap;
	struct admit_memo *a;
	int bad;

	bool memo = !elastic_any_pool(m);
	size_t nsn = m->nnodes, nvirt;

	for (size_t i = 0; memo && i < ADMIT_MEMO_MAX; i++) {
		a = &m->admit[i];
		if (a->shape && a->gen == m->nodes_gen && !strcmp(a->shape, shape)) {
			free(shape);
			snprintf(field, field_len, "%s", a->field);
			snprintf(msg, msg_len, "%s", a->msg);
			return a->bad ? -1 : 0;
		}
	}
	nodeview_take(m, &snap);
	nvirt = elastic_admission_nodes(m, &snap.sn, &nsn, &snap.gp);
	field[0] = msg[0] = '\0';
	bad = sched_check_feasible(snap.sn, nsn, sj, field, field_len, msg, msg_len);
	for (size_t i = nsn - nvirt; i < nsn; i++)
		free(snap.gp[i]); /* the provisioned pools' GPUs; the rest are the snapshot's */
	nodeview_release(&snap);
	if (!memo) {
		free(shape);
		return bad;
	}
	a = &m->admit[m->admit_next++ % ADMIT_MEMO_MAX];
	free(a->shape);
	a->shape = shape;
	a->gen = m->nodes_gen;
	a->bad = bad != 0;
	snprintf(a->field, sizeof(a->field), "%s", field);
	snprintf(a->msg, sizeof(a->msg), "%s", msg);
	return bad;
}
