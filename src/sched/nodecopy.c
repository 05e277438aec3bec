/* Working copies of a snapshot's nodes (nodecopy.h). */
#include "base/compat.h"
#include "sched/nodecopy.h"

#include "base/xalloc.h"
#include "sched/place.h"

void sched_nodecopy_init(struct sched_nodecopy *c, const struct sched_node *nodes, size_t n)
{
	c->nnodes = n;
	c->nodes = xcalloc(n + 1, sizeof(*c->nodes));
	c->gpus = xcalloc(n + 1, sizeof(*c->gpus));
	for (size_t i = 0; i < n; i++) {
		c->nodes[i] = nodes[i];
		c->gpus[i] = xcalloc(nodes[i].ngpus + 1, sizeof(**c->gpus));
		memcpy(c->gpus[i], nodes[i].gpus, nodes[i].ngpus * sizeof(**c->gpus));
		c->nodes[i].gpus = c->gpus[i];
	}
}

void sched_nodecopy_set(struct sched_nodecopy *dst, const struct sched_nodecopy *src)
{
	for (size_t i = 0; i < src->nnodes && i < dst->nnodes; i++) {
		memcpy(dst->gpus[i], src->gpus[i], src->nodes[i].ngpus * sizeof(**dst->gpus));
		dst->nodes[i].free_cpus_milli = src->nodes[i].free_cpus_milli;
		dst->nodes[i].free_memory = src->nodes[i].free_memory;
	}
}

void sched_nodecopy_clear(struct sched_nodecopy *c)
{
	for (size_t i = 0; i < c->nnodes; i++) {
		for (size_t g = 0; g < c->nodes[i].ngpus; g++)
			c->gpus[i][g].free = true;
		c->nodes[i].free_cpus_milli = c->nodes[i].cpus_milli;
		c->nodes[i].free_memory = c->nodes[i].memory;
	}
}

void sched_nodecopy_release(struct sched_nodecopy *c)
{
	for (size_t i = 0; i < c->nnodes; i++)
		free(c->gpus[i]);
	free(c->gpus);
	free(c->nodes);
	memset(c, 0, sizeof(*c));
}

void sched_nodecopy_apply(struct sched_nodecopy *c, const struct sched_hold *holds, size_t nholds,
			  bool give)
{
	for (size_t h = 0; h < nholds; h++) {
		const struct sched_hold *hold = &holds[h];
		struct sched_node *n;

		if (hold->node >= c->nnodes)
			continue;
		n = &c->nodes[hold->node];
		for (unsigned g = 0; g < hold->ngpus; g++)
			for (size_t x = 0; x < n->ngpus; x++)
				if (c->gpus[hold->node][x].index == hold->gpus[g])
					c->gpus[hold->node][x].free = give;
		if (give) {
			n->free_cpus_milli += hold->cpus_milli;
			n->free_memory += hold->memory;
		} else {
			n->free_cpus_milli -= hold->cpus_milli < n->free_cpus_milli ? hold->cpus_milli
										 : n->free_cpus_milli;
			n->free_memory -= hold->memory < n->free_memory ? hold->memory : n->free_memory;
		}
	}
}

bool sched_place_holds(struct place_state *s, const struct sched_job *job,
		       struct sched_hold *took)
{
	struct sched_start *st = xcalloc(job->ntasks + 1, sizeof(*st));
	struct sched_wait why;
	bool ok = place_job(s, job, st, &why);

	for (size_t t = 0; ok && t < job->ntasks; t++) {
		const struct sched_task *task = &job->tasks[st[t].task];
		if (took)
			took[t] = (struct sched_hold){ .node = st[t].node, .gpus = st[t].gpus,
						       .ngpus = st[t].ngpus,
						       .cpus_milli = task->cpus_milli,
						       .memory = task->memory };
		else
			free(st[t].gpus);
	}
	free(st);
	return ok;
}

bool sched_nodecopy_place(const struct sched_nodecopy *c, const struct sched_job *job,
			  struct sched_hold *took)
{
	struct sched_input in = { .nodes = c->nodes, .nnodes = c->nnodes, .jobs = job, .njobs = 1 };
	struct place_state *s = place_state_new(&in);
	bool ok = sched_place_holds(s, job, took);

	place_state_free(s);
	return ok;
}
