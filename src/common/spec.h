/*
 * The job spec: parsing YAML or JSON text, validating every field, and the
 * canonical JSON form that the master stores and the API returns.
 *
 * Validation names the field path, the value and the reason:
 *   tasks.worker.gpus: expected an integer >= 0, got "two"
 * in errbuf (code YERR(INVALID_SPEC), field "tasks.worker.gpus"); the message
 * always starts with the field path and ": ". Elements of arrays are named
 * "command[1]". The first error is reported, in the order of this list, and
 * an unknown field of an object before its known fields ("tasks.worker.gpu:
 * unknown field (did you mean 'gpus'?)").
 *
 * Fields (see docs/architecture.md "Job spec"); all but command and tasks are optional
 * (command too in an interactive job), and an optional field that is null
 * counts as absent:
 *   name        string, [a-z0-9][a-z0-9_.-]{0,62}   (default "job")
 *   framework   command (default), pytorch, tensorflow, mxnet, mpi, horovod, jax or
 *               caffe; what each demands of the roles is checked by launch_validate
 *   command     non-empty array of strings (argv; never a shell), at most 1024;
 *               "{params.K}" expands; every K must be in params
 *   image       a Docker image reference, [HOST[:PORT]/]PATH[:TAG][@sha256:HEX],
 *               or {build: {dockerfile, args}}: built from the job's code
 *               (common/spec_image.h)
 *               (PATH: components of lowercase letters and digits separated by
 *               one '.', one or two '_' or any number of '-', joined by '/';
 *               TAG: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; HEX: 64 lowercase hex
 *               digits), at most 255 characters: the tasks run in it, on a node
 *               with a container runtime; absent or null: the process runtime
 *   params      object of scalars (string, number, bool; not null); keys
 *               [A-Za-z_][A-Za-z0-9_]{0,63}
 *   env         object of string -> scalar; names [A-Za-z_][A-Za-z0-9_]{0,63},
 *               not YARD_*; numbers and bools are stored as their text
 *   tasks       object ROLE -> {replicas 1..1024 (default 1), gpus 0..64 (0),
 *               cpus 0 < x <= 1024 (number, default 1, kept in milli-CPUs),
 *               memory (size string or integer bytes, >= 4MiB, optional),
 *               pids 16..1000000 (default 4096), command (optional argv override)}
 *               ROLE is [a-z][a-z0-9_-]{0,31}; at most 64 roles, 4096 tasks in all;
 *               a role that is null takes every default
 *   data        refused for now (datasets are not built yet); null or [] pass
 *   placement   {gpu_model: string ("*" any), max_nodes: integer 1..4096,
 *               wait_for_nodes: bool (queue even if no node can ever hold a task),
 *               gpu_memory: size (string or integer bytes, >= 1MiB): the least
 *               memory each GPU of the job must have,
 *               labels: object KEY -> VALUE that a node must all carry (its
 *               agent's --label KEY=VALUE); at most 32; KEY and VALUE as in
 *               spec_label_valid; numbers and bools are taken as their text}
 *   pool        name like name: the pool of nodes the job runs in (an agent's
 *               --pool; default "default")
 *   priority    low | normal | high   (default normal)
 *   team        string like name
 *   restart     {max: integer 0..100}
 *   timeout     duration ("2h", "90m", "3600s", "1h30m", integer seconds) > 0;
 *               absent = none
 *   preemption  {grace: duration 0..1h (default 30s): SIGTERM, then this long
 *               to checkpoint, then SIGKILL; preemptible: bool (default true)}
 *   on_disconnect  stop | keep (default stop): an agent cut off from the master
 *               stops the job's tasks before its lease ends, so the job, started
 *               elsewhere, never runs twice; keep: they run on, and the master
 *               waits for the node instead of starting the job elsewhere
 *   after       [ID, ...] or {any: [ID, ...]}: the jobs it starts after
 *               (common/spec_after.h, docs/pipelines.md)
 *   interactive {idle_timeout: duration > 0 (absent or null: the master's
 *               --interactive-idle-timeout)}: the job's one task runs on a
 *               terminal that users attach to (yard shell, yard attach), and
 *               is cancelled once no session has been attached for the idle
 *               timeout. Its tasks must add up to one, its framework be
 *               command, and it is no sweep; command may be left out (the
 *               login shell of the task's user). Absent or null: a batch job.
 *               In the canonical form only when set.
 *   code        {git: URL, ref: REF, path: SUBDIR, sha: SHA}: the job's code
 *               from a git repository (common/spec_code.h); absent or null:
 *               the uploaded directory. In the canonical form only when set.
 * Every string is at most 4096 bytes and holds no NUL.
 */
#ifndef YARD_SPEC_H
#define YARD_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

enum spec_priority { PRIO_LOW = 0, PRIO_NORMAL = 1, PRIO_HIGH = 2 };

#define SPEC_MAX_LABELS 32

/* A placement label, KEY=VALUE. */
struct spec_label {
	char *key;             /* owned */
	char *value;           /* owned */
};

struct spec_role {
	char *name;            /* owned */
	unsigned replicas;
	unsigned gpus;
	uint64_t cpus_milli;   /* 1000 = one CPU */
	uint64_t memory;       /* bytes; 0 = no limit */
	uint64_t pids;         /* max processes of each task */
	char **command;        /* owned NULL-terminated argv, or NULL: the job's */
	/* owned or NULL: the pool this role's tasks run in when not the job's
	 * (tasks.ROLE.pool): parameter servers on a CPU pool, workers on GPUs */
	char *pool;
};

/* The kinds of data source (docs/datasets.md). */
enum spec_data_kind { DATA_YARD, DATA_S3, DATA_HTTPS, DATA_FILE, DATA_JOB, DATA_KIND__COUNT };

#define SPEC_MAX_DATA 64

/* One entry of data: a source staged by the agent under YARD_DATA_DIR/mount. */
struct spec_data {
	enum spec_data_kind kind;
	char *source;          /* owned, as written (a yard source is pinned to
	                        * yard://NAME@N by the master at submit) */
	char *mount;           /* owned; its default filled in */
	char *sha256;          /* owned 64 hex digits (https), else NULL */
	char *name;            /* owned dataset name (yard), else NULL */
	unsigned version;      /* yard: the version, 0 = the latest */
	uint64_t job;          /* job: the job whose outputs or checkpoint it reads */
	bool checkpoint;       /* job: yard-job://ID/checkpoint, not /outputs */
};

struct spec_image_build;

struct job_spec {
	char *name;            /* owned */
	char *framework;       /* owned; "command" */
	char **command;        /* owned NULL-terminated argv, unexpanded; NULL only in an
	                        * interactive job: the login shell of the task's user */
	char *image;           /* owned container image reference, or NULL: the
	                        * process runtime (or an image built: image_build) */
	struct spec_image_build *image_build; /* owned, or NULL: image: {build: ...} */
	json_t *params;        /* owned object, never NULL after parsing */
	json_t *env;           /* owned object of strings, never NULL after parsing */
	struct spec_role *roles; /* owned, in the order they appear in the spec */
	size_t nroles;
	char *gpu_model;       /* owned or NULL (any) */
	unsigned max_nodes;    /* 0 = no limit */
	bool wait_for_nodes;
	uint64_t gpu_memory;   /* least bytes per GPU; 0 = any */
	struct spec_label *labels; /* owned, in document order */
	size_t nlabels;
	char *pool;            /* owned or NULL ("default") */
	enum spec_priority priority;
	char *team;            /* owned or NULL */
	unsigned restart_max;
	uint64_t timeout_ms;   /* 0 = none */
	uint64_t preempt_grace_ms; /* SIGTERM .. SIGKILL when preempted (default 30 s) */
	bool preemptible;      /* may be preempted for a higher priority (default true) */
	bool keep_on_disconnect; /* on_disconnect: keep (default stop) */
	struct spec_data *data; /* owned, in document order */
	size_t ndata;
	uint64_t *after;       /* owned: the job ids of `after` (spec_after.h) */
	size_t nafter;
	bool after_any;        /* after: {any: ...}: any outcome will do, not only success */
	struct spec_sweep *sweep; /* owned or NULL: a sweep's search (spec_sweep.h) */
	bool interactive;      /* interactive: one task on a terminal */
	uint64_t idle_timeout_ms; /* interactive.idle_timeout; 0: the master's default */
	struct spec_code *code; /* owned or NULL: the code from git (spec_code.h), else uploaded */
};

/* spec_load_text parses YAML or JSON text (JSON is YAML) into a JSON document
 * (scalars typed as YAML 1.2 core schema: plain 3 is an integer, "3" a string,
 * empty/~/null is null, true/false bools, 1.5 and 1e3 reals; hex stays a
 * string). Caller owns *out (NULL on error). Refused with YERR(INVALID_SPEC)
 * and a message that names the line ("line 7: duplicate key 'gpus'"): anchors
 * and aliases, duplicate keys, keys that are not scalars, tags other than
 * !!str/!!map/!!seq, more than one document, an empty text, nesting deeper
 * than 32, integers beyond int64, .inf/.nan, NUL characters, and text over
 * 1 MiB. Only the document's shape is checked here: spec_from_json validates. */
int spec_load_text(const char *text, size_t len, json_t **out, struct errbuf *eb);

/* spec_set applies one "--set path=value" override (such as params.lr=0.1 or
 * tasks.worker.replicas=4) to the document, creating the objects along the
 * dotted path.
 *
 * The path must name a field the spec has, as spec_from_json would take it
 * in the file, with the same error and suggestion ("tasks.worker.gpu: unknown
 * field (did you mean 'gpus'?)"); keys under params, env and
 * placement.labels are free (spec_from_json checks them), a field that takes
 * a value has no fields below it, and tasks.ROLE must be a role the document
 * already has: "tasks.wrker: no role 'wrker' in the spec (roles: worker); did
 * you mean 'worker'?" (a new role comes from the file, never from --set).
 *
 * The value is typed as the same text would be as a plain scalar in the
 * YAML file (the YAML 1.2 core schema: 3 and 007 are the integer, 0.1 and
 * 1e3 reals, true/false bools, empty, ~ and null are null, anything else a
 * string); one wrapped in matching '' or "" quotes is always the string
 * between them, as it is (no escapes): params.tag="007" is "007". A value
 * that opens a quote and does not close it is refused.
 *
 * Errors: YERR(BAD_REQUEST) "--set 'x': expected PATH=VALUE" when the
 * assignment is not PATH=VALUE (a usage error); YERR(INVALID_SPEC) with the
 * field's path in eb->field and a message that starts with it, for an
 * unknown field or role, a value that cannot be typed (not a finite number,
 * an integer beyond int64: "params.n: integer out of range, got
 * 99999999999999999999")
 * or a step of the path that holds something other than a mapping. The
 * result is not validated: call spec_from_json after the last --set. */
int spec_set(json_t *doc, const char *assignment, struct errbuf *eb);

/* spec_from_json validates doc and fills spec (caller releases it with
 * spec_release, also after an error). doc is not modified or kept. */
int spec_from_json(const json_t *doc, struct job_spec *spec, struct errbuf *eb);

/* spec_to_json: the canonical form, every default filled in (new reference):
 * every top-level field and every role field is present; absent values are
 * null (image, data, team, timeout, memory, max_nodes, a role's command);
 * cpus is an integer or a real, timeout integer seconds (or "1500ms" when not
 * whole seconds), gpu_model "*" for any. spec_from_json of it gives back an
 * equal spec. */
json_t *spec_to_json(const struct job_spec *spec);

/* spec_label_valid: whether key and value make a label, for the spec and
 * for an agent's --label: KEY is [A-Za-z0-9][A-Za-z0-9_.\/-]{0,62}, VALUE is
 * [A-Za-z0-9_.-]{0,63} (may be empty). */
bool spec_label_valid(const char *key, const char *value);
/* spec_data_kind_name: "yard", "s3", "https", "file" or "job". */
const char *spec_data_kind_name(enum spec_data_kind k);

/* spec_name_valid: whether s is a name as name, team and pool take:
 * [a-z0-9][a-z0-9_.-]{0,62}. */
bool spec_name_valid(const char *s);

/* spec_release frees what spec owns and leaves it empty (safe to call twice). */
void spec_release(struct job_spec *spec);

/* spec_total_tasks: the sum of replicas over roles. */
unsigned spec_total_tasks(const struct job_spec *spec);

/* spec_expand_argv: argv with each "{params.K}" replaced by the parameter's
 * value (spec_scalar_str), "{{" and "}}" as single braces; any other brace is
 * kept as it is ("{gpus}" stays for a launcher). Returns a NULL-terminated
 * array the caller frees with argv_free, or NULL with eb set (YERR(INVALID_SPEC),
 * field "command") when a placeholder names a missing parameter. */
char **spec_expand_argv(char *const *argv, const json_t *params, struct errbuf *eb);
/* spec_scalar_str: the text of a parameter as it is expanded and as it goes
 * into YARD_PARAM_<NAME>: strings as they are, integers and bools as JSON
 * writes them, reals in the shortest form that reads back exactly ("0.1",
 * "2.0"). Caller frees. */
char *spec_scalar_str(const json_t *v);
/* argv_free frees a NULL-terminated argv and its strings (NULL is fine). */
void argv_free(char **argv);
/* argv_len: the number of strings before the NULL (0 for NULL). */
size_t argv_len(char *const *argv);

#endif
