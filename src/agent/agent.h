/*
 * The agent: one per node. Registers the node's resources with the master,
 * long-polls for its desired tasks, runs each through a shim and a runtime,
 * reports status and ships logs.
 */
#ifndef YARD_AGENT_H
#define YARD_AGENT_H

#include <signal.h>
#include <stdbool.h>

#include "base/conf.h"
#include "base/error.h"

struct runas;

/* How long an ephemeral agent without a task waits before it leaves on its
 * own (--idle's default): a backstop for a master that never tells it. */
#define AGENT_EPHEMERAL_IDLE_MS (30 * 60 * 1000)
/* How long a stopped ephemeral agent gives its tasks to stop. */
#define AGENT_EPHEMERAL_STOP_MS 10000

struct agent_config {
	const char *master_url;
	const char *master_ca;       /* --ca FILE: how an https master is verified, or NULL */
	const char *master_pin;      /* --pin sha256//...: its public key's pin, or NULL */
	const char *name;
	const char *work_dir;
	const char *gpus;            /* "auto", "none", "sim:N" or "sim:N:MODEL" */
	const char *advertise_addr;  /* NULL: the address used to reach the master */
	const char *join_token;
	const char *dev_dir;         /* where GPU device nodes live; default "/dev" */
	const char *self_exe;        /* the yard binary, to start shims; default /proc/self/exe */
	unsigned port_lo, port_hi;   /* task ports (--ports LO-HI); 0: 30000-32000 */
	const char *pool;            /* --pool; NULL: "default" */
	const char *const *labels;   /* --label KEY=VALUE, each checked by spec_label_valid */
	size_t nlabels;
	bool docker;                 /* --runtime lists docker: run container tasks */
	const char *docker_socket;   /* --docker-socket; NULL: /var/run/docker.sock */
	uint64_t cache_size;         /* --cache-size: the data cache's cap; 0: 50GiB */
	const char *s3_endpoint;     /* --s3-endpoint URL; NULL: no S3 store */
	const char *s3_region;       /* --s3-region; NULL: us-east-1 */
	const char *s3_key, *s3_secret; /* from --s3-credentials FILE */
	/* --run-as (runas.h): the user tasks run as; the agent takes and gives
	 * back uids of a range in it. Borrowed; NULL: tasks run as root. */
	struct runas *run_as;
	/* the master runs in this process (yard up): it is gone whenever the
	 * agent is, and gives the node a whole lease when it is back, so the
	 * shims need not fence (heartbeat.h) */
	bool master_in_process;
	/* --ephemeral (docs/elastic.md): the node is an elastic pool's; the agent
	 * leaves for good when the master tells it to, when it has had no task
	 * for idle_ms (0: only when told), or when it is stopped (its tasks
	 * first), and tells the master it left */
	bool ephemeral;
	uint64_t idle_ms;
};

/* agent_run registers and serves until *stop becomes non-zero. */
int agent_run(const struct agent_config *cfg, volatile sig_atomic_t *stop, struct errbuf *eb);

/* The agent's options as text, as its table (agent_conf_options) writes
 * them from the command line and the config file; cmd_agent turns them
 * into a struct agent_config. */
struct agent_options {
	const char *master, *name, *work_dir, *gpus, *advertise_addr, *join_token_file, *dev_dir;
	const char *ports, *pool, *runtime, *docker_socket, *cache_size;
	const char *s3_endpoint, *s3_region, *s3_credentials, *ca, *pin, *run_as;
	struct conf_list labels;
	bool ephemeral;
	const char *idle;
};

/* agent_conf_options: the table of the agent's options (n OUT), each a
 * flag and a key of the config file (agent_main.c). */
const struct conf_option *agent_conf_options(size_t *n);

/* `yard agent [--config FILE] --master URL --work-dir DIR [...]` */
int cmd_agent(int argc, char **argv);
/* `yard shim --dir TASKDIR`: internal, started by the agent (the process
 * shim; the yard binary's `shim` is cmd_shim_any, shim_docker.h). */
int cmd_shim(int argc, char **argv);

#endif
