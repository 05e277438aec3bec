/*
 * The master's in-memory model: jobs, tasks, nodes and tokens, and struct
 * master itself. Private to src/master. Everything here is owned by the one
 * thread that runs the master's event loop; nothing is locked.
 *
 * Durability: every change to an entity is written to the store with
 * core_save_*() inside the batch transaction that master.c commits before the
 * loop sleeps. A reply that depends on a change is sent only after that
 * commit; if the commit fails the master reloads its model from the store.
 */
#ifndef YARD_MASTER_CORE_H
#define YARD_MASTER_CORE_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/error.h"
#include "common/spec.h"
#include "common/state.h"
#include "master/gpuidle.h"
#include "master/leader.h"
#include "master/prom.h"
#include "master/ratelimit.h"
#include "master/store.h"
#include "master/tls.h"
#include "sched/policy.h"

struct MHD_Daemon;
struct req;
struct conf;

enum role { ROLE_ADMIN, ROLE_USER, ROLE_AGENT, ROLE_JOIN, ROLE_JOB, ROLE__COUNT };
enum log_stream { LOG_STDOUT, LOG_STDERR, LOG_STREAM__COUNT };

/* A stored token (auth.h): its hash, never its text. Its public id is the
 * first TOKEN_ID_LEN hex digits of the hash. Times are wall clock
 * microseconds; 0 means never (or, for created_at, before tokens had dates). */
struct token {
	char hash[65];          /* sha256 hex of the token */
	char *user;             /* owned; "admin" for the admin token, node name for agents */
	enum role role;
	char *team;             /* owned or NULL */
	bool team_admin;        /* ROLE_USER of a team: an admin of that team (visibility.h) */
	uint64_t job_id;        /* ROLE_JOB: the job the token acts for */
	uint64_t created_at;
	uint64_t expires_at;    /* refused from then on */
	uint64_t revoked_at;    /* refused from then on */
	/* its last authenticated request, set in memory by auth_lookup;
	 * last_used_saved is what the store holds (auth_tick writes it at most
	 * once every AUTH_USED_SAVE_US) */
	uint64_t last_used, last_used_saved;
};

/* The files of a task's outputs that the job's outputs document lists
 * (docs/api.md, "Outputs"). */
#define OUTPUTS_FILES_MAX 256

struct task {
	uint64_t id;
	struct job *job;        /* borrowed back pointer */
	char *role;             /* owned */
	unsigned index;
	unsigned attempt;
	enum task_state state;
	bool stop;              /* desired state is stop */
	char *node;             /* owned node name or NULL before placement */
	unsigned *gpus;         /* owned, ngpus entries */
	unsigned ngpus;
	uint64_t cpus_milli, memory, pids;
	unsigned port;          /* reserved in its node's port range; 0: none */
	uint64_t grace_ms;      /* when stopped: SIGTERM .. SIGKILL (0: the agent's default) */
	bool preempted;         /* stopped to make room for another job */
	bool has_exit, has_signal;
	int exit_code, signal;
	char *reason_code, *reason_msg; /* owned or NULL */
	uint64_t started_at, finished_at;
	/* what its cgroup used, as its agent reported at its end (accounting:
	 * usage.h); each where has_*: not known for a container task, a lost one */
	bool has_cpu, has_memory_peak;
	uint64_t cpu_usec, memory_peak;
	/* wall us of its last checkpoint, as its agent's status reports say
	 * (a "@yard {\"checkpoint\": N}" line in its output); 0: none. In memory
	 * only: the agent reports it again after a master restart. */
	uint64_t checkpoint_at;
	char *outputs;          /* owned or NULL: "sha256:HEX" of its YARD_OUTPUT_DIR's tar.gz */
	uint64_t outputs_size;  /* bytes of that archive */
	json_t *outputs_files;  /* owned or NULL: {"files": [{"path", "size"}], "count": N}, the
	                         * first OUTPUTS_FILES_MAX files of its outputs' manifest */
	/* bytes held of each output stream: as the task was last saved until
	 * log_size_known, then as the store said and appends made it (logs.h) */
	uint64_t log_size[LOG_STREAM__COUNT];
	bool log_size_known[LOG_STREAM__COUNT]; /* in memory only */
	size_t live_slot;       /* 1 + index in master->live, 0 when not holding resources */
	struct node *live_node; /* borrowed: the node whose live list holds it (core_index_task), or NULL */
	size_t node_slot;       /* 1 + its index there, 0 when in none */
};

struct job {
	uint64_t id;
	char *name, *user, *team, *code; /* owned; team and code may be NULL */
	char *checkpoint;       /* owned or NULL: "sha256:HEX" of the latest checkpoint */
	char *pool;             /* owned: its spec's pool, kept once the spec is dropped (usage.h) */
	struct gpu_series *util; /* owned or NULL: its GPUs' utilisation (gpuidle.h); in memory */
	char *submit_key;       /* owned or NULL: the submission's idempotency_key (jobs.h) */
	char *spec_text;        /* owned canonical spec, compact JSON */
	struct job_spec *spec;  /* owned parsed spec, only while the job is not final */
	enum job_state state;
	enum spec_priority priority;
	char *reason_code, *reason_msg;
	bool has_exit;
	int exit_code;
	unsigned attempt;
	unsigned preemptions;   /* times it gave its resources back */
	/* Its scheduling policy's state (attained service, level, ageing), kept
	 * between plans in memory only: a restarted master rebuilds it from the
	 * task records, and the ageing clocks start again. */
	struct sched_pjob pol;
	bool pol_valid;
	uint64_t checkpoint_at;  /* the latest of its tasks' checkpoint_at, any attempt; 0: none */
	uint64_t submitted_at, started_at, running_at, finished_at;
	struct task **tasks;    /* borrowed (owned by master->tasks), every attempt */
	size_t ntasks, atasks;
	unsigned queue_position; /* 0 when not waiting */
	char wait_code[32];
	char *wait_msg;         /* owned or NULL */
	char *held_by;          /* owned or NULL: the user who held it (control.h); persisted */
	uint64_t experiment;    /* the experiment it is a trial of, 0: none; persisted */
	unsigned trial;         /* its trial number there (experiments.h) */
	bool blocked;           /* not given to the scheduler: held or waiting for a job of its
	                         * after (control.h); wait_code/wait_msg say which; in memory */
	size_t queue_slot;      /* 1 + index in master->queue, 0 when not queued */
	/* owned or NULL: the job's history, oldest first, the last
	 * JOB_EVENTS_MAX: [{"at": us, "state": NAME, "attempt": N, "reason":
	 * {code, message}|absent}]; persisted with the job */
	json_t *events;
	json_t *image_built;    /* owned or NULL: the image built from its code it ran in (images.h) */
	json_t *data;           /* owned or NULL: the resolved data entries (docs/datasets.md),
	                         * yard versions pinned at submit; persisted with the job */
	/* owned or NULL: the job's API documents (jobs_job_json) as compact
	 * JSON text, [0] as shown to those who may not see it whole
	 * (visibility.h), [1] whole; kept for listings until something they
	 * show changes (core_job_changed drops them); in memory only */
	char *doc[2];
	size_t doc_len[2];
	/* what its spec asks for, as a summary listing shows it
	 * (jobs_job_summary_json), read once: a final job's parsed spec is
	 * dropped, and its text never changes; in memory only */
	bool asked_known, asked_interactive;
	uint64_t asked_gpus;
	/* An interactive job's sessions (interactive.h), in memory only: how
	 * many are open, and when (wall us) the last one closed, 0: never */
	unsigned sessions;
	uint64_t detached_at;
};

struct gpu_info {
	unsigned index;
	char *model, *uuid;     /* owned */
	uint64_t memory;
	unsigned island;        /* NVLink/PCIe island id as the agent reported it
	                         * (its index when it did not) */
	bool has_util;          /* the agent reported util (NVML GPUs only) */
	unsigned util;          /* percent busy, last reported; in memory only */
};

/* The runtimes an agent runs tasks with (its --runtime), as bits of
 * node.runtimes; bit i is named by the i-th of core.c's runtime names. */
enum node_runtime_flags {
	NODE_RT_PROCESS = 1 << 0, /* "process": process trees in cgroups */
	NODE_RT_DOCKER = 1 << 1,  /* "docker": the Docker Engine API (or Podman's); runs images */
};
#define NODE_RT__COUNT 2

/* A node label, KEY=VALUE, from the agent's --label. */
struct node_label {
	char *key, *value;      /* owned */
};

struct node {
	size_t slot;            /* its index in master->nodes (and in a plan's snapshot) */
	char *name, *addr;      /* owned */
	char *iface;            /* owned or NULL: the interface that holds addr */
	unsigned port_lo, port_hi; /* the range task ports come from */
	enum node_state state;  /* changed only by nodes_apply_event (jobs.h) */
	/* The drain, while node_state_is_drained(state): why and by whom, as an
	 * admin said; kept with the node in the store until it is resumed. */
	char *drain_reason;     /* owned or NULL: none given */
	char *drain_by;         /* owned or NULL: the user who drained it */
	uint64_t drain_at;      /* wall clock, microseconds; 0 when not drained */
	uint64_t cpus_milli, memory;
	struct gpu_info *gpus;  /* owned */
	size_t ngpus;
	uint64_t last_seen;     /* wall clock, microseconds */
	uint64_t lease_until;   /* mono_ms deadline */
	uint64_t rev;           /* revision of the node's desired state */
	char *pool;             /* owned; never NULL once registered or loaded ("default") */
	struct node_label *labels; /* owned */
	size_t nlabels;
	unsigned runtimes;      /* NODE_RT_* bits; never 0 once registered or loaded */
	char *engine;           /* owned or NULL: what answers on the agent's docker
	                         * socket, as it says ("Docker 20.10.24") */
	char **cache;           /* owned: the content keys of the node's data cache
	                         * ("yard-HEX"), as last reported; in memory only */
	size_t ncache;
	bool awaited;           /* stored before this master started, not heard from since */
	bool bumped;            /* in master->bumped */
	/* borrowed: the tasks that hold its resources (master->live's on this
	 * node), kept by core_index_task, so that a node's work, its free
	 * resources and its GPUs' jobs cost its tasks, not every live one */
	struct task **live;
	size_t nlive, alive;
	/* its agent is ephemeral (agent --ephemeral): it leaves when told, or
	 * idle, and its node ends then (docs/elastic.md) */
	bool ephemeral;
	char *slurm_job;        /* owned or NULL: the Slurm job its agent runs in ("4411_0") */
};

/* One version of a dataset (datasets.h); its manifest is the file
 * DATA_DIR/manifests/HEX.json, its chunks DATA_DIR/blobs/HEX. */
struct dataset_version {
	unsigned version;       /* 1, 2, ...; never reused */
	char digest[72];        /* "sha256:HEX" of the manifest */
	uint64_t size;          /* bytes of its files */
	unsigned files;
	uint64_t created_at;    /* wall clock, microseconds */
};

struct dataset {
	char *name;             /* owned */
	char *team;             /* owned or NULL: whose quota it counts against */
	char *owner;            /* owned or NULL: the user who made it (NULL: made before
	                         * makers were kept); whose it is when it has no team */
	struct dataset_version *v; /* owned, ascending versions */
	size_t nv, av;
	unsigned last_version;  /* the highest version ever made (versions are never reused) */
};

/* A team's limit on the unique chunk bytes of its datasets (--data-quota). */
struct data_quota {
	char *team;             /* owned */
	uint64_t bytes;
};

struct pool_policy {
	char *pool;             /* owned */
	struct sched_policy_conf conf;
};

struct team_share {
	char *team;             /* owned */
	double weight;
	unsigned quota;         /* GPUs; 0 = none */
};

struct shared_body;
struct codeindex;
struct elastic;

/* An admission answer (jobs_submit) for one shape of job: what the check
 * reads of a spec, as text; valid while the nodes' generation is gen. */
struct admit_memo {
	char *shape;            /* owned or NULL: an empty slot */
	uint64_t gen;
	bool bad;
	char field[160], msg[512];
};
#define ADMIT_MEMO_MAX 16

/* How many state changes a job keeps in its history. */
#define JOB_EVENTS_MAX 200

struct master {
	char *data_dir, *url, *web_dir;
	char *registry;            /* --registry, or NULL (docs/images.md) */
	bool store_images;         /* --store-images (docs/images.md) */
	char *registry_auth;       /* its X-Registry-Auth (images.h), or NULL */
	int data_dir_lock;      /* the flock of data_dir held for the master's life (backup.h), or -1 */
	/* what MHD serves over TLS; all NULL: plain http (master/tls.h) */
	struct tls_identity tls;
	char *job_key;          /* owned: the HMAC key of job tokens (auth.h) */
	struct token job_token; /* auth_lookup's answer for a job token; user borrowed */
	unsigned lease_ms;
	uint64_t store_retry_ms; /* how long a failed commit's store is read again before stopping */
	struct conf *conf;      /* borrowed or NULL: the options it started with (settings.h) */
	uint64_t outputs_retention_ms; /* outputs.h; 0: outputs are kept as long as their job */
	uint64_t interactive_idle_ms; /* --interactive-idle-timeout (interactive.h); 0: none */
	char *git_hook_secret;  /* owned or NULL: pushes are not taken (githook.h) */
	size_t nawaited;        /* nodes with awaited set */
	uint64_t started_ms;    /* mono_ms when this master started serving */
	uint64_t started_wall_us; /* wall_us when it was opened */
	struct prom prom;       /* the histograms of GET /metrics (prom.h) */
	struct gpuidle_policy gpuidle; /* --idle-gpu-* (gpuidle.h) */
	struct gpu_series cluster_util, cluster_alloc; /* in memory (gpuidle.h) */
	struct sched_policy_conf policy; /* how the queue is ordered, who is preempted */
	struct pool_policy *pool_policies; /* owned: pools with a policy of their own */
	size_t npool_policies, apool_policies;
	struct team_share *teams; /* owned: fair shares and quotas by team name */
	size_t nteams, ateams;
	const struct store_ops *sops;
	struct store *store;
	struct leadership leadership; /* this master's role among those of the store (leader.h) */
	bool txn_open;          /* a batch transaction is open */
	int batch_err;          /* first write error of the batch */
	bool store_lost;        /* the store could not be read again after a failed commit:
				 * the loop stops and master_run fails */
	struct errbuf batch_eb;
	bool sched_needed;      /* a full plan is due: capacity or the queue changed */
	bool positions_stale;   /* fresh jobs wait without a queue position yet */
	uint64_t sched_passes;  /* scheduling passes so far: what the queue's order is of */
	/* GET /v1/queue's last answer (owned or NULL), made when sched_passes
	 * was queue_cache_pass */
	struct shared_body *queue_cache;
	uint64_t queue_cache_pass;
	/* GET /v1/jobs's last answer (owned or NULL) and its query; sent again
	 * while jobs_gen is still jobs_list_gen */
	struct shared_body *jobs_list;
	int jobs_list_state;    /* the state asked for, -1: any */
	char *jobs_list_user;   /* owned or NULL: the user asked for */
	char *jobs_list_viewer; /* owned or NULL: whose jobs it shows whole (api.c's viewer_key) */
	uint64_t jobs_list_limit;
	uint64_t jobs_list_gen;
	uint64_t jobs_gen;      /* bumped on every change a job listing shows (core_job_changed) */
	uint64_t last_full_plan_ms; /* mono_ms of the last full plan */
	unsigned ticks;         /* of the 200 ms housekeeping timer */

	/* Indexes kept by core_index_job()/core_index_task() on every state
	 * change, so that scheduling costs what is live, not what is stored. */
	struct job **queue;     /* borrowed: the jobs in state queued, unordered */
	size_t nqueue, aqueue;
	struct task **live;     /* borrowed: tasks that hold their node's resources */
	size_t nlive, alive;
	struct job **fresh;     /* borrowed: jobs submitted since the last plan */
	size_t nfresh, afresh;

	struct job **jobs;      /* owned, jobs[id - 1] */
	size_t njobs, ajobs;
	struct task **tasks;    /* owned, tasks[id - 1] */
	size_t ntasks, atasks;
	struct node **nodes;    /* owned */
	size_t nnodes, anodes;
	size_t *node_hash;      /* owned: open addressing by name, slot + 1 (0 empty) */
	/* bumped whenever what admission reads of the nodes may change: a node
	 * added, removed or registered again (its resources, pool, labels,
	 * runtimes) */
	uint64_t nodes_gen;
	struct admit_memo admit[ADMIT_MEMO_MAX]; /* admission.c: the last answers, by shape */
	unsigned admit_next;    /* the slot the next answer takes */
	size_t node_hash_cap;   /* a power of two, at least twice nnodes */
	bool visibility_open;   /* --visibility open: every user sees every job and dataset */
	struct codeindex *code_index; /* owned or NULL: jobs by code and checkpoint digest */
	struct codeindex *submit_keys; /* owned or NULL: jobs by "USER\nidempotency_key" */
	struct token *tokens;   /* owned */
	size_t *token_ix;       /* owned: tokens by id (auth.c), index + 1 */
	size_t token_ix_cap, token_ix_n; /* its size, the tokens in it */
	struct ratelimit ratelimit; /* requests per token (--rate-limit) */
	size_t ntokens, atokens;
	struct dataset **datasets; /* owned (datasets.h), unordered */
	json_t *gc_digests;     /* owned or NULL: manifests of versions deleted in the open
	                         * batch; their chunks go once it is committed */
	json_t *gc_pending;     /* owned or NULL: manifests dropped by committed batches whose
	                         * removal waits for a backup to end (backup.h) */
	bool gc_wait_said;      /* that wait is in the log already */
	size_t ndatasets, adatasets;
	struct data_quota *data_quotas; /* owned */
	size_t ndata_quotas, adata_quotas;
	struct experiment **exps; /* owned, exps[id - 1] (experiments.h) */
	size_t nexps, aexps;
	struct jtemplate **templates; /* owned (templates.h) */
	size_t ntemplates, atemplates;
	struct elastic *elastic; /* owned or NULL: the provisioned pools (elastic.h) */
	struct gitcode *gitcode; /* owned or NULL: code from git (gitcode.h) */
	struct session **sessions; /* owned, in memory only (sessions.h) */
	size_t nsessions, asessions;
	struct exec **execs;    /* owned, in memory only (execs.h) */
	size_t nexecs, aexecs;
	uint64_t next_exec_id;

	struct MHD_Daemon *mhd;
	uv_loop_t loop;
	uv_poll_t mhd_poll;
	uv_timer_t mhd_timer, tick, lease_tick;
	uv_timer_t sched_timer; /* wakes the loop when a deferred pass is due (master.c) */
	uv_timer_t release_timer; /* wakes the loop when deferred replies may go (http.c) */
	uint64_t sched_after_us; /* mono_us before which no pass runs (schedule_timed) */
	uv_prepare_t prepare;
	uv_async_t stop_async, reload_async;
	/* master_stop may come from the signal thread before master_run has
	 * made stop_async: it asks (stop_requested), and sends only once the
	 * loop runs (running); master_run looks at the request once it runs */
	atomic_int running, stop_requested;
	struct req *held;       /* suspended requests (intrusive list) */
	struct held_index *held_ix; /* owned by http.c: the held requests by what they wait for */
	/* borrowed: the nodes whose rev changed since http_wake last looked
	 * (core_node_bump), so that it wakes only their work polls */
	struct node **bumped;
	size_t nbumped, abumped;
	unsigned short port;
};

/* A job's submission key (struct job submit_key), per user: indexed at
 * load and submit, found by jobs_submit to answer a resent submission with
 * the job it made. */
void core_index_submit_key(struct master *m, const struct job *j);
struct job *core_find_submit_key(const struct master *m, const char *user, const char *key);

/* core_batch_open opens the batch transaction unless it is open. Returns 0
 * when the batch takes writes, else its first error: the commit will fail
 * and every reply that waits for it gets that error. A writer that fails
 * records its error in m->batch_err (and m->batch_eb). */
int core_batch_open(struct master *m);

/* The store writes of one entity into the open batch (opened on demand). */
void core_save_job(struct master *m, struct job *j);
void core_save_task(struct master *m, struct task *t);
void core_save_node(struct master *m, struct node *n);
/* core_remove_node deletes n's row from the store (in the open batch), takes
 * it out of m->nodes (the slots of the others may change) and frees it. */
void core_remove_node(struct master *m, struct node *n);
/* core_node_set_labels replaces n's labels by the object obj (KEY -> string
 * VALUE; other values and NULL give none); core_node_labels_json is the
 * object back (new reference). */
void core_node_set_labels(struct node *n, const json_t *obj);
json_t *core_node_labels_json(const struct node *n);
/* core_runtimes_from_json: the NODE_RT_* bits of an array of runtime names
 * ("process", "docker") into *out; absent or null is NODE_RT_PROCESS. Fails
 * with YERR(BAD_REQUEST), field "runtimes", when arr is not a non-empty array
 * of known names (*out is then NODE_RT_PROCESS). core_node_runtimes_json is
 * n's runtimes as such an array (new reference). */
int core_runtimes_from_json(const json_t *arr, unsigned *out, struct errbuf *eb);
json_t *core_node_runtimes_json(const struct node *n);
void core_save_token(struct master *m, const struct token *t);
void core_save_meta(struct master *m, const char *key, const char *value);
/* core_put_doc writes doc (taken) as the row of kind with key into the
 * open batch (opening it); a failure is the batch's. */
void core_put_doc(struct master *m, enum store_kind kind, const char *key, json_t *doc);
/* core_save_dataset writes a dataset (its versions, not their manifests);
 * core_delete_dataset removes its row; core_dataset_free frees one. */
void core_save_dataset(struct master *m, const struct dataset *ds);
void core_delete_dataset(struct master *m, const char *name);
/* core_delete_doc deletes the row of kind with key (in the open batch). */
void core_delete_doc(struct master *m, enum store_kind kind, const char *key);
void core_dataset_free(struct dataset *ds);

struct job *core_job(struct master *m, uint64_t id);
struct task *core_task(struct master *m, uint64_t id);
struct node *core_node(const struct master *m, const char *name);
/* core_node_bump: n's desired state changed (n->rev + 1); its held work
 * polls are answered at the next wake (http.h). */
void core_node_bump(struct master *m, struct node *n);
/* core_add_node appends n (owned by the model from now on) to m->nodes. */
void core_add_node(struct master *m, struct node *n);

/* core_index_job/core_index_task put an entity into, or take it out of, the
 * queue and live indexes to match its current state. Call after every state
 * change (and on creation). */
void core_index_job(struct master *m, struct job *j);
void core_index_task(struct master *m, struct task *t);

/* core_job_changed drops j's cached document (struct job's doc) and bumps
 * m->jobs_gen, so that no listing made before is sent again: call it
 * whenever something that jobs_job_json shows of j or of its tasks changes.
 * Saving a job or a task (core_save_*) and indexing one (core_index_*) call
 * it, so only changes that are neither saved nor indexed need to call it
 * themselves (the queue position and waiting reason, log sizes). */
void core_job_changed(struct master *m, struct job *j);

/* core_job_drop_spec frees j's parsed spec (a final job keeps its text). */
void core_job_drop_spec(struct job *j);

/* core_job_settled: j is final and every task of it has ended, so what it
 * leaves is in (a task's agent hands in its outputs and checkpoint before
 * it reports the end; a job cancelled, stopped early or failed is final
 * while the rest of its gang is still stopping). */
bool core_job_settled(const struct job *j);

/* core_set_checkpoint makes digest j's checkpoint (saving j), and lists j
 * under it in the code index. */
void core_set_checkpoint(struct master *m, struct job *j, const char *digest);

/* core_load fills an empty model from the store (and its indexes). */
int core_load(struct master *m, struct errbuf *eb);
/* core_clear frees the whole model (jobs, tasks, nodes, tokens). */
void core_clear(struct master *m);

const char *role_name(enum role r);
const char *log_stream_name(enum log_stream s);

#endif
