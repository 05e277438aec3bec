/*
 * The job spec: parsing YAML or JSON text, validating every field, and the
 * canonical JSON form that the master stores and the API returns.
 *
 * Validation names the field path, the value and the reason:
 *   tasks.worker.gpus: expected an integer >= 0, got "two"
 * in errbuf (code YERR(INVALID_SPEC), field "tasks.worker.gpus").
 *
 * Fields (see DESIGN.md "Job spec"); all but command and tasks are optional:
 *   name        string, [a-z0-9][a-z0-9_.-]{0,62}   (default "job")
 *   framework   "command" (other frameworks are refused until their launcher exists)
 *   command     non-empty array of strings (argv; never a shell); "{params.K}" expands
 *   image       must be absent or null (container runtimes are not built yet)
 *   params      object of scalars (string, number, bool)
 *   env         object of string -> scalar; names [A-Za-z_][A-Za-z0-9_]*, not YARD_*
 *   tasks       object ROLE -> {replicas >= 1 (default 1), gpus >= 0 (0), cpus > 0
 *               (number, default 1), memory (size string or integer bytes, optional),
 *               pids >= 16 (default 4096), command (optional argv override)}
 *               ROLE is [a-z][a-z0-9_-]{0,31}; at most 64 roles, 4096 tasks in all
 *   data        refused for now (datasets are not built yet)
 *   placement   {gpu_model: string ("*" any), max_nodes: integer >= 1,
 *               wait_for_nodes: bool (queue even if no node can ever hold a task)}
 *   priority    low | normal | high
 *   team        string like name
 *   restart     {max: integer 0..100}
 *   timeout     duration ("2h", "90m", "3600s", integer seconds); absent = none
 */
#ifndef YARD_SPEC_H
#define YARD_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

enum spec_priority { PRIO_LOW = 0, PRIO_NORMAL = 1, PRIO_HIGH = 2 };

struct spec_role {
	char *name;            /* owned */
	unsigned replicas;
	unsigned gpus;
	uint64_t cpus_milli;   /* 1000 = one CPU */
	uint64_t memory;       /* bytes; 0 = no limit */
	uint64_t pids;         /* max processes of each task */
	char **command;        /* owned NULL-terminated argv, or NULL: the job's */
};

struct job_spec {
	char *name;            /* owned */
	char *framework;       /* owned; "command" */
	char **command;        /* owned NULL-terminated argv, unexpanded */
	json_t *params;        /* owned object, never NULL after parsing */
	json_t *env;           /* owned object of strings, never NULL after parsing */
	struct spec_role *roles; /* owned, in the order they appear in the spec */
	size_t nroles;
	char *gpu_model;       /* owned or NULL (any) */
	unsigned max_nodes;    /* 0 = no limit */
	bool wait_for_nodes;
	enum spec_priority priority;
	char *team;            /* owned or NULL */
	unsigned restart_max;
	uint64_t timeout_ms;   /* 0 = none */
};

/* spec_load_text parses YAML or JSON text (JSON is YAML) into a JSON document
 * (scalars typed as YAML 1.2 core schema: plain 3 is an integer, "3" a string).
 * Caller owns *out. Depth and size are bounded; errors name the line. */
int spec_load_text(const char *text, size_t len, json_t **out, struct errbuf *eb);

/* spec_set applies one "--set path=value" override (such as params.lr=0.1 or
 * tasks.worker.replicas=4) to the document; the value is typed as YAML would. */
int spec_set(json_t *doc, const char *assignment, struct errbuf *eb);

/* spec_from_json validates doc and fills spec (caller releases it with
 * spec_release, also after an error). doc is not modified or kept. */
int spec_from_json(const json_t *doc, struct job_spec *spec, struct errbuf *eb);

/* spec_to_json: the canonical form, every default filled in (new reference). */
json_t *spec_to_json(const struct job_spec *spec);

void spec_release(struct job_spec *spec);

/* spec_total_tasks: the sum of replicas over roles. */
unsigned spec_total_tasks(const struct job_spec *spec);

/* spec_expand_argv: argv with each "{params.K}" replaced by the parameter's
 * value (strings as they are, numbers in JSON form), "{{" and "}}" as braces.
 * Returns a NULL-terminated array the caller frees with argv_free, or NULL
 * with eb set when a placeholder names a missing parameter. */
char **spec_expand_argv(char *const *argv, const json_t *params, struct errbuf *eb);
void argv_free(char **argv);
size_t argv_len(char *const *argv);

#endif
