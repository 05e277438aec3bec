#ifndef YARD_AGENT_EPHEMERAL_H
#define YARD_AGENT_EPHEMERAL_H
/*
 * An ephemeral agent (yard agent --ephemeral, docs/elastic.md): it leaves
 * for good when the master tells it to (a scale-down), when it has had no
 * task for its --idle, or when it is stopped (Slurm ending its
 * allocation), stopping its tasks first. This is when and why; the agent
 * stops the tasks and ends its loop, then says it left.
 */
#include <stdbool.h>
#include <stdint.h>

#include "common/httpc.h"

struct ephemeral {
	uint64_t idle_ms;           /* --idle: 0 never */
	bool told;                  /* the master's work reply said leave */
	char why[96];               /* "" while it stays */
	uint64_t deadline_ms;       /* mono: until when its tasks may stop */
	uint64_t idle_since_ms;     /* mono: since when it has had no task */
};

void ephemeral_init(struct ephemeral *e, uint64_t idle_ms, uint64_t now_ms);

/* A tick: whether it leaves now that it is stopping (the agent's stop
 * flag) or has tasks. *stop_tasks: the agent stops every task now (once,
 * as it starts leaving). True when its loop is to end: leaving, and no
 * task left or their time to stop is up. */
bool ephemeral_tick(struct ephemeral *e, bool stopping, bool has_tasks, uint64_t now_ms, bool *stop_tasks);

/* The Slurm job the agent runs in ("4411_0": an array task's own id
 * first), from its environment, or NULL (caller frees). */
char *ephemeral_slurm_job(void);

/* The last status report: node id left, and why; its node ends at once.
 * Best effort: a master that does not answer finds the node lost when its
 * lease lapses. */
void ephemeral_say_left(const char *master_url, const struct httpc_tls *tls, const char *node, const char *id,
			const char *token, const char *why);

#endif
