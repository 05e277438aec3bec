/*
 * Per-task control groups: cpu (CFS quota), memory (limit), pids, devices.
 * Two backends behind one table, chosen at run time: cgroup v1 (one
 * hierarchy per controller under ROOT/{cpu,memory,pids,devices}) and cgroup
 * v2 (one unified hierarchy at ROOT; devices by a BPF_PROG_TYPE_CGROUP_DEVICE
 * program attached with BPF_CGROUP_DEVICE, built from raw instructions as
 * runc does). A task's group is REL = "yard/AGENT/task-ID" under each
 * hierarchy, so two agents on one host never collide.
 */
#ifndef YARD_AGENT_CGROUP_H
#define YARD_AGENT_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define CGROUP_ANY (-1)

/* One allowed character device (block devices are never allowed). */
struct cgroup_dev {
	int major; /* or CGROUP_ANY */
	int minor; /* or CGROUP_ANY */
};

struct cgroup_limits {
	uint64_t cpus_milli;   /* 0: no cpu limit; 1000 = one CPU */
	uint64_t memory;       /* bytes; 0: no limit */
	uint64_t pids;         /* 0: no limit */
	int devices;           /* non-zero: allow only devs[] */
	const struct cgroup_dev *devs;
	size_t ndevs;
};

/* What the group's tasks used, for accounting: each part where the
 * kernel tells it. */
struct cgroup_usage {
	bool has_cpu, has_memory;
	uint64_t cpu_usec;     /* CPU time of all its processes, user and system */
	uint64_t memory_peak;  /* bytes: the most it held at once */
};

struct cgroup;

/* A backend. Each function fills eb on failure and returns a YERR code. */
struct cgroup_ops {
	const char *name; /* "v1", "v2" */
	/* create makes the groups and applies the limits */
	int (*create)(struct cgroup *cg, const struct cgroup_limits *lim, struct errbuf *eb);
	/* oom_kills: the count of OOM kills inside the group so far (0 if unknown) */
	uint64_t (*oom_kills)(struct cgroup *cg);
	/* usage fills what it can read of u (zeroed) */
	void (*usage)(struct cgroup *cg, struct cgroup_usage *u);
};

extern const struct cgroup_ops cgroup_v1_ops;
extern const struct cgroup_ops cgroup_v2_ops;

struct cgroup {
	const struct cgroup_ops *ops;
	char *root;        /* owned: "/sys/fs/cgroup" or the v2 mount */
	char *rel;         /* owned: "yard/n1/task-41" */
	char *dirs[6];     /* owned, NULL-terminated: each group directory */
	char *procs[6];    /* owned, NULL-terminated: each group's cgroup.procs */
	/* owned, NULL-terminated: the file a fresh single-threaded child writes
	 * "0" to, to join each group. On v1 that is "tasks": moving one thread
	 * (the caller itself) skips the kernel's threadgroup lock and the RCU
	 * grace period it waits for, 1 ms for four hierarchies where
	 * cgroup.procs takes about 10. On v2, cgroup.procs. */
	char *join[6];
	const char *memory_dir; /* points into dirs[]: the group with the memory controller, or NULL */
};

/* cgroup_detect: the backend for the layout at root (NULL: "/sys/fs/cgroup"):
 * v2 when root holds cgroup.controllers, v1 when root/memory or root/devices
 * is a hierarchy; NULL when neither. */
const struct cgroup_ops *cgroup_detect(const char *root);

/* cgroup_init fills cg for rel under root (paths only, nothing created). */
void cgroup_init(struct cgroup *cg, const struct cgroup_ops *ops, const char *root, const char *rel);
/* cgroup_create makes the groups and applies lim; on failure whatever was
 * made is removed again. */
int cgroup_create(struct cgroup *cg, const struct cgroup_limits *lim, struct errbuf *eb);
/* cgroup_signal_all sends sig to every process in the groups; returns how
 * many were signalled (0: the groups are empty or missing). */
int cgroup_signal_all(struct cgroup *cg, int sig);
/* cgroup_kill_all SIGKILLs everything in the groups, again and again until
 * they are empty or timeout_ms passes; reap, when set, is called between
 * rounds (to wait for children). Returns 0 when empty, -1 otherwise. */
int cgroup_kill_all(struct cgroup *cg, unsigned timeout_ms, void (*reap)(void));
uint64_t cgroup_oom_kills(struct cgroup *cg);
/* cgroup_usage: what the group used so far (before cgroup_destroy). */
void cgroup_usage(struct cgroup *cg, struct cgroup_usage *u);
/* cgroup_destroy removes the groups (missing is fine); YERR(IO) if one is busy. */
int cgroup_destroy(struct cgroup *cg, struct errbuf *eb);
void cgroup_release(struct cgroup *cg);

/* cgroup_default_devs fills out (at most max entries) with the devices every
 * task may use: null, zero, full, random, urandom, tty, ptmx, pts/N. */
size_t cgroup_default_devs(struct cgroup_dev *out, size_t max);

#endif
