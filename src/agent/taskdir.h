/*
 * The files of a task directory (docs/protocol.md, "Agent work dir"), shared
 * by the agent, the runtimes and the shim.
 */
#ifndef YARD_AGENT_TASKDIR_H
#define YARD_AGENT_TASKDIR_H

#include <jansson.h>
#include <stdbool.h>

#include "agent/cgroup.h"
#include "base/error.h"

/* How a task ended, as the shim writes it to exit.json. */
struct task_exit {
	bool has_code;      /* exit_code is meaningful (else null) */
	int exit_code;
	int signal;         /* 0: none */
	bool oom_killed;
	bool start_failed;  /* reason starts with "start_failed: " */
	char reason[1100];
	struct cgroup_usage usage; /* what its cgroup used (process runtime; else none known) */
};

enum taskdir_write_flags {
	/* fsync the file and the directory: it must survive a power loss (an
	 * exit status not yet reported). Without it the write is still atomic
	 * for crashes of processes, and costs no disk flush on the start path. */
	TASKDIR_DURABLE = 1 << 0,
};

/* taskdir_write_json writes doc to DIR/NAME atomically; YERR(IO) on failure. */
int taskdir_write_json(const char *dir, const char *name, const json_t *doc, unsigned flags,
		       struct errbuf *eb);
/* taskdir_read_json loads DIR/NAME into *out (new reference); YERR(NOT_FOUND)
 * when missing, YERR(IO) when unreadable or not JSON. */
int taskdir_read_json(const char *dir, const char *name, json_t **out, struct errbuf *eb);

int task_exit_write(const char *dir, const struct task_exit *e, struct errbuf *eb);
/* task_exit_json: e as the master takes it in a status report: {"exit_code",
 * "signal", "oom_killed", "message", "cpu_usec", "memory_peak"} (null where
 * not known). New reference. */
json_t *task_exit_json(const struct task_exit *e);
/* task_exit_read: 0 and *e filled; YERR(NOT_FOUND) while the task runs. */
int task_exit_read(const char *dir, struct task_exit *e, struct errbuf *eb);

#endif
