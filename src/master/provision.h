/*
 * Provisioners: what makes and removes the nodes of an elastic pool
 * (docs/elastic.md), as a table of operations chosen per pool by
 * `--provisioner POOL=KIND:ARG`, like struct store_ops and struct
 * runtime_ops:
 *
 *  - command (provision_command.c): an admin's script, `SCRIPT up POOL
 *    COUNT` printing the names of the nodes it asked for, one a line, and
 *    `SCRIPT down NODE`; how cloud VMs plug in;
 *  - slurm (provision_slurm.c): an allocation of a Slurm partition through
 *    sbatch, scancel and squeue, each of its nodes running `yard agent
 *    --ephemeral`.
 *
 * Every operation blocks (it runs programs) and is called on a worker
 * thread, never on the master's loop: it gets copies of what it needs in a
 * struct prov_env and touches nothing of the master. What it answers is
 * applied by master/elastic.c on the loop.
 */
#ifndef YARD_MASTER_PROVISION_H
#define YARD_MASTER_PROVISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct strbuf;

/* How long one run of a provisioner's program may take before it is
 * killed (with its process group) and the operation fails. */
#define PROV_RUN_TIMEOUT_MS (120 * 1000)

/* The most nodes one up may say it made. */
#define PROV_NAMES_MAX 1024

/* What every call of a backend is given. Strings are borrowed from the
 * caller (the worker's own copies), valid for the call. */
struct prov_env {
	const char *arg;             /* command: the script's path; slurm: the partition */
	const char *pool;
	const char *tag;             /* the request's name at the provisioner, unique to this
	                              * master's store: "yard-CLUSTER-ID" */
	uint64_t request;            /* the request's id */
	const char *master_url;      /* where the new nodes' agents reach the master */
	const char *master_pin;      /* its TLS pin, or NULL */
	const char *join_token_file; /* the master's join token, for the new agents */
	/* slurm */
	uint64_t time_ms;            /* --time of the allocation; 0: the partition's */
	const char *account, *qos;   /* or NULL */
	const char *work_dir;        /* the ephemeral agents' work dirs are under it */
	const char *yard;            /* the yard binary on the Slurm nodes */
	const char *const *agent_args; /* more arguments of the ephemeral agents */
	size_t nagent_args;
	const volatile int *cancel;  /* non-zero: stop now (the master is stopping) */
};

/* What an up made: the nodes that will register, each with its id at the
 * provisioner (NULL when it has none), and the request's own id there. */
struct prov_made {
	char **names;                /* owned */
	char **ids;                  /* owned; entries may be NULL */
	size_t n;
	char *external;              /* owned or NULL: "4411" (a Slurm job) */
};

void prov_made_release(struct prov_made *m);

struct provisioner_ops {
	const char *name;            /* "command", "slurm": the KIND of --provisioner */
	/* check: whether arg is one this backend takes; what names the option
	 * and the value ("--provisioner 'gpu=slurm:x y'"): "%s: ..." */
	int (*check)(const char *what, const char *arg, struct errbuf *eb);
	/* up asks for count nodes of env->pool; OUT made: the nodes it made
	 * (at least one on success). On failure made may still name nodes (a
	 * script that printed some, then failed): they exist, and the master
	 * tracks them so that they are released. */
	int (*up)(const struct prov_env *env, unsigned count, struct prov_made *made,
		  struct errbuf *eb);
	/* down removes node name (id: its id at the provisioner, or NULL);
	 * removing what is gone already is a success */
	int (*down)(const struct prov_env *env, const char *name, const char *id,
		    struct errbuf *eb);
	/* recover: after a master stopped while an up of env->request was under
	 * way, what that up made (*found false: nothing), for count nodes; NULL
	 * when the backend cannot tell (the nodes' registrations will) */
	int (*recover)(const struct prov_env *env, unsigned count, struct prov_made *made,
		       bool *found, struct errbuf *eb);
	/* describe: how a reason names this provisioner of arg, with the
	 * request's external id (or NULL): "slurm partition gpu (job 4411)" */
	void (*describe)(const char *arg, const char *external, struct strbuf *sb);
};

extern const struct provisioner_ops provision_command_ops;
extern const struct provisioner_ops provision_slurm_ops;

/* provisioner_find: the backend named kind (its first len bytes), or NULL. */
const struct provisioner_ops *provisioner_find(const char *kind, size_t len);

/* prov_parse_names: the node names of a provisioner's output (one a line;
 * blank lines skipped), each a valid node name; at most max of them. OUT
 * *names (caller frees each and the array), *n. YERR(BAD_REQUEST) naming
 * the first bad line. */
int prov_parse_names(const char *text, size_t max, char ***names, size_t *n, struct errbuf *eb);

/* prov_shell_quote appends s to sb as one word of sh: in single quotes. */
void prov_shell_quote(struct strbuf *sb, const char *s);

#endif
