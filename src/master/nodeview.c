#include "base/compat.h"
#include "master/nodeview.h"

#include "base/xalloc.h"

/* sn describes n whole, every GPU free; nodeview_account_use subtracts what runs.
 * gpus and labels have room for n's. */
static void fill_sched_node(const struct node *n, struct sched_node *sn, struct sched_gpu *gpus,
			    struct sched_label *labels)
{
	for (size_t i = 0; i < n->nlabels; i++)
		labels[i] = (struct sched_label){ n->labels[i].key, n->labels[i].value };
	sn->labels = labels;
	sn->nlabels = n->nlabels;
	sn->pool = n->pool;
	sn->containers = (n->runtimes & NODE_RT_DOCKER) != 0;
	sn->cache = (const char *const *)n->cache;
	sn->ncache = n->ncache;
	sn->name = n->name;
	sn->schedulable = n->state == NODE_READY;
	sn->drained = node_state_is_drained(n->state);
	sn->drain_reason = n->drain_reason;
	sn->gpus = gpus;
	sn->ngpus = n->ngpus;
	sn->cpus_milli = n->cpus_milli;
	sn->memory = n->memory;
	sn->free_cpus_milli = n->cpus_milli;
	sn->free_memory = n->memory;
	for (size_t g = 0; g < n->ngpus; g++) {
		gpus[g].index = n->gpus[g].index;
		gpus[g].model = n->gpus[g].model;
		gpus[g].free = true;
		gpus[g].island = n->gpus[g].island;
		gpus[g].memory = n->gpus[g].memory;
	}
}

void nodeview_take(struct master *m, struct nodeview *s)
{
	size_t ngpus = 0, nlabels = 0;

	for (size_t i = 0; i < m->nnodes; i++) {
		ngpus += m->nodes[i]->ngpus;
		nlabels += m->nodes[i]->nlabels;
	}
	s->sn = xcalloc(m->nnodes + 1, sizeof(*s->sn));
	s->gp = xcalloc(m->nnodes + 1, sizeof(*s->gp));
	s->gpus = xcalloc(ngpus + 1, sizeof(*s->gpus));
	s->labels = xcalloc(nlabels + 1, sizeof(*s->labels));
	ngpus = nlabels = 0;
	for (size_t i = 0; i < m->nnodes; i++) {
		s->gp[i] = s->gpus + ngpus;
		fill_sched_node(m->nodes[i], &s->sn[i], s->gpus + ngpus, s->labels + nlabels);
		ngpus += m->nodes[i]->ngpus;
		nlabels += m->nodes[i]->nlabels;
	}
}

void nodeview_release(struct nodeview *s)
{
	free(s->sn);
	free(s->gp);
	free(s->gpus);
	free(s->labels);
}

void nodeview_account_use(struct master *m, struct sched_node *sn, struct sched_gpu **gp)
{
	for (size_t i = 0; i < m->nlive; i++) {
		const struct task *t = m->live[i];
		const struct node *n = core_node(m, t->node);
		if (n) {
			size_t k = n->slot; /* the snapshot is in m->nodes order */
			sn[k].free_cpus_milli -= t->cpus_milli < sn[k].free_cpus_milli ? t->cpus_milli
										: sn[k].free_cpus_milli;
			sn[k].free_memory -= t->memory < sn[k].free_memory ? t->memory : sn[k].free_memory;
			for (unsigned g = 0; g < t->ngpus; g++)
				for (size_t x = 0; x < sn[k].ngpus; x++)
					if (gp[k][x].index == t->gpus[g])
						gp[k][x].free = false;
		}
	}
}
