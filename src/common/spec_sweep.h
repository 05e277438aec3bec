/*
 * The spec's `sweep` section: a hyperparameter search, submitted as an
 * experiment whose trials are jobs (docs/experiments.md).
 *
 *   sweep:
 *     method: grid | random
 *     params:                     swept parameters; each sets params.NAME
 *       lr: [0.01, 0.1]           a list: every value (grid) or one at random
 *       wd: {log_uniform: [1e-5, 1e-2]}   random only: uniform, log_uniform,
 *       layers: {int: [2, 6]}             int (both ends included), choice
 *     trials: 20                  random: required; grid: the product of the
 *                                 lists, and no other number
 *     max_parallel: 2             trials queued or running at once (default 4)
 *     seed: 7                     random: the sampler's seed (default: the
 *                                 experiment's id)
 *     objective: {metric: test_acc, mode: max}
 *     early_stop:                 optional
 *       method: asha | median
 *       resource: epoch           the series that measures progress (default:
 *                                 the metric's step)
 *       min_resource: 1           nothing is stopped before it (default 1)
 *       max_resource: 10          asha: the rungs end below it (default: 1000
 *                                 x min_resource)
 *       reduction_factor: 3       asha: 1 in this many goes on at each rung
 *       min_trials: 3             median: the other trials a median needs
 *       pause: false              asha: the promotion form (earlystop.h): a
 *                                 trial not promoted at a rung is paused, and
 *                                 resumed from its checkpoint if it is later
 *                                 promoted
 *
 * A swept parameter missing from params is added to it, so that "{params.K}"
 * placeholders may name it; every trial's params are the spec's with the
 * trial's values set (exported as YARD_PARAMS and YARD_PARAM_K as any).
 * Pure: no I/O, no clocks.
 */
#ifndef YARD_COMMON_SPEC_SWEEP_H
#define YARD_COMMON_SPEC_SWEEP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

#define SWEEP_TRIALS_MAX 10000
#define SWEEP_PARAMS_MAX 32
#define SWEEP_PARALLEL_DEFAULT 4

enum sweep_method { SWEEP_GRID, SWEEP_RANDOM };
enum sweep_domain { SWEEP_LIST, SWEEP_UNIFORM, SWEEP_LOG_UNIFORM, SWEEP_INT };
enum sweep_stop { SWEEP_STOP_NONE, SWEEP_STOP_ASHA, SWEEP_STOP_MEDIAN };

struct sweep_param {
	char *name;              /* owned */
	enum sweep_domain domain;
	json_t *values;          /* owned array (SWEEP_LIST), else NULL */
	double lo, hi;           /* the other domains' bounds, lo <= hi (> 0 for log) */
};

struct spec_sweep {
	enum sweep_method method;
	struct sweep_param *params; /* owned, in the spec's order */
	size_t nparams;
	unsigned trials;         /* how many trials in all (>= 1) */
	unsigned max_parallel;   /* >= 1 */
	bool has_seed;
	uint64_t seed;
	char *metric;            /* owned: the objective's series */
	bool maximize;           /* mode: max */
	enum sweep_stop stop;
	char *resource;          /* owned or NULL: the step */
	double min_resource, max_resource; /* max_resource 0: min_resource x 1000 */
	double reduction_factor; /* asha, > 1 */
	unsigned min_trials;     /* median, >= 1 */
	bool pause;              /* asha: the promotion form */
};

/* spec_sweep_parse validates v (NULL or null: no sweep, *out NULL) into a
 * new *out (spec_sweep_free), adding swept names that params (an object)
 * lacks to it. Errors are YERR(INVALID_SPEC) naming the field:
 * "sweep.params.lr: grid needs a list of values, got {"uniform": [0, 1]}". */
int spec_sweep_parse(const json_t *v, json_t *params, struct spec_sweep **out, struct errbuf *eb);
/* spec_sweep_to_json: the canonical form (every default filled in but the
 * seed's). */
json_t *spec_sweep_to_json(const struct spec_sweep *s);
void spec_sweep_free(struct spec_sweep *s);

/* spec_sweep_trial_params: a new object of trial's values (0 <= trial <
 * s->trials), the same for the same trial and seed: grid in the order of
 * the lists, the last one varying fastest; random drawn from seed and
 * trial alone. */
json_t *spec_sweep_trial_params(const struct spec_sweep *s, unsigned trial, uint64_t seed);

#endif
