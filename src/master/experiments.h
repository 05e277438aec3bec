/*
 * Experiments: sweeps whose trials are jobs (docs/experiments.md).
 *
 * A spec with a `sweep` section (common/spec_sweep.h) submitted to POST
 * /v1/experiments makes an experiment: its first trial is submitted at
 * once, as a job of the caller's (so a spec that could not run is refused
 * with nothing made), and the controller (experiments_sweep, before each
 * scheduling pass) keeps max_parallel trials queued or running, never
 * more, until every trial is made and final. Trial k is a job whose spec
 * is the experiment's without `sweep`, with the trial's params set and
 * named NAME-tK; the job carries the experiment's id and k.
 *
 * Every new point of the objective series of a trial's first task (any
 * attempt) reaches experiments_observe (from metrics_post); the early
 * stopping rule (earlystop.h) may then end the trial, JOB_EV_EARLY_STOP:
 * stopped_early, its GPUs freed, its outputs kept as any ended job's. In
 * ASHA's promotion form (early_stop.pause) a trial not promoted at a rung
 * is paused instead (preempted and held: control_pause), and the
 * controller, before it starts a new trial, resumes a paused one that
 * earns a promotion (released: it goes on from its checkpoint); once no
 * trial is left to start and none runs, the paused ones end stopped_early.
 *
 * Persisted: the experiment document (spec, state, trials with their
 * params, rung records and stop reasons), STORE_EXPERIMENT. The points are
 * the metrics store's: a master that starts reads them again.
 */
#ifndef YARD_MASTER_EXPERIMENTS_H
#define YARD_MASTER_EXPERIMENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "common/state.h"
#include "master/core.h"
#include "master/earlystop.h"

struct caller;
struct store_metric;
struct task;

struct exp_trial {
	uint64_t job;            /* its job's id */
	json_t *params;          /* owned: the trial's swept values */
	char *reason;            /* owned or NULL: why early stopping ended it */
	struct es_trial es;      /* its objective points; asha's rung records */
	bool has_value;          /* an objective point was seen */
	double last, best;       /* the objective's latest (by step) and best values */
	int64_t step;            /* the step of last */
	bool has_res;            /* a point of the sweep's resource series was seen */
	double res;              /* its latest value */
	bool paused;             /* asha's promotion form: paused at its rung, held */
};

struct experiment {
	uint64_t id;
	char *name, *user, *team;  /* owned; team may be NULL */
	enum role role;            /* the submitter's, for the trials it submits */
	enum exp_state state;
	char *reason;              /* owned or NULL: why it failed */
	char *spec_text;           /* owned: the canonical spec, sweep included */
	struct job_spec *spec;     /* owned: spec_text parsed */
	char *code;                /* owned or NULL: the code digest of every trial */
	uint64_t seed;
	uint64_t created_at, finished_at; /* wall clock microseconds */
	struct exp_trial *trials;  /* owned: the trials made, trials[k] is trial k */
	size_t ntrials, atrials;
};

/* experiments_submit: body {"spec": {... "sweep": ...}, "code": DIGEST}
 * from c. Makes the experiment and submits its first trial (jobs_submit's
 * checks and errors; YERR(INVALID_SPEC), field sweep, when the spec has
 * none); on error nothing is made. OUT *out: the experiment. The body's
 * idempotency_key goes with the first trial: sent again with it, the
 * submission answers the experiment it made (*again true). */
int experiments_submit(struct master *m, const struct caller *c, const json_t *body,
		       struct experiment **out, bool *again, struct errbuf *eb);
/* experiments_sweep, before each scheduling pass: submits the trials that
 * fit max_parallel and ends the experiments that are done. */
void experiments_sweep(struct master *m);
/* experiments_observe: n new points of task t's stream, stored; for the
 * objective (and resource) series of a trial's first task. */
void experiments_observe(struct master *m, const struct task *t, const struct store_metric *pts,
			 size_t n);
/* experiments_cancel cancels e's live trials and makes no more;
 * YERR(CONFLICT) when e is not running. */
int experiments_cancel(struct master *m, struct experiment *e, struct errbuf *eb);
/* experiments_find: the experiment of id, or NULL. */
struct experiment *experiments_find(const struct master *m, uint64_t id);
/* experiments_json: e's API document (docs/api.md, "Experiments"), with
 * its trials sorted by the objective when with_trials. */
json_t *experiments_json(struct master *m, const struct experiment *e, bool with_trials);
/* experiments_load reads the stored experiments and their trials' points
 * (after the jobs and tasks: core_load); experiments_clear frees them. */
int experiments_load(struct master *m, struct errbuf *eb);
void experiments_clear(struct master *m);

#endif
