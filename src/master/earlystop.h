/*
 * Early stopping of a sweep's trials (docs/experiments.md): the rules
 * alone, pure functions of the trials' objective points. The experiment
 * controller (experiments.h) feeds them each new point of the objective
 * series and stops the trial they name.
 *
 * A point is (resource, value): the value of the objective at that much
 * progress (the sweep's early_stop.resource series, or the step). Scores
 * are values signed so that higher is better (mode min: -value).
 *
 * ASHA (Li et al., "A System for Massively Parallel Hyperparameter
 * Tuning", 2020), in its stopping form: rungs at min_resource x eta^k
 * below max_resource. A trial whose progress first reaches a rung (the
 * highest it reached, if it passed several at once) is recorded there with
 * its score, and stopped when that score is below the (1 - 1/eta)
 * quantile of the scores recorded there before it: only about one in eta
 * goes on. The first trial at a rung always goes on.
 *
 * ASHA's promotion form (early_stop.pause: true), as in the paper: a trial
 * that reaches a rung is recorded there and goes on only if it is among
 * the best floor(n/eta) of the n recorded there, itself included (it is
 * then promoted from that rung); otherwise it is paused. Whenever a trial
 * may start, the controller first asks for a promotion: from the highest
 * rung down, a paused trial that is among the best floor(n/eta) of its
 * rung and was not promoted from it. So no trial goes on only because it
 * came first. When no trial is left to start and none runs, and none has
 * finished, the best paused trial of the highest rung is promoted anyway,
 * so that one trial runs to the end.
 *
 * Median (Golovin et al., "Google Vizier", 2017): a trial whose progress
 * is at least min_resource is stopped when its best score so far is below
 * the median of the running averages, up to the same progress, of the
 * other trials that got that far, once min_trials of them did.
 */
#ifndef YARD_MASTER_EARLYSTOP_H
#define YARD_MASTER_EARLYSTOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/spec_sweep.h"

#define ES_RUNGS_MAX 32

/* One trial as the rules see it. */
struct es_trial {
	double *res, *score;     /* owned: its points, in arrival order */
	size_t n, a;
	uint32_t recorded;       /* asha: bit k once recorded at rung k */
	uint32_t promoted;       /* asha's promotion form: bit k once promoted from rung k */
	double rung_score[ES_RUNGS_MAX];
};

/* es_trial_add appends a point (score: higher is better). */
void es_trial_add(struct es_trial *t, double res, double score);
void es_trial_release(struct es_trial *t);

/* earlystop_rungs: s's ASHA rungs, ascending, into out; their number. */
size_t earlystop_rungs(const struct spec_sweep *s, double out[ES_RUNGS_MAX]);

/* earlystop_judge: the verdict of s's rule on trials[me] at its newest
 * point (already added), among trials[0..n) (NULL entries are skipped).
 * ASHA records the trial at its rung (in trials[me]). true: stop it, and
 * why (at most size bytes) says why: "asha: test_acc 0.81 at epoch 3 is
 * below the rung's cutoff 0.9 (4 trials there)". */
bool earlystop_judge(const struct spec_sweep *s, struct es_trial *const *trials, size_t n, size_t me,
		     char *why, size_t size);

/* What the promotion form says of a trial's newest point. */
enum es_verdict { ES_NONE, ES_GO, ES_PAUSE };

/* earlystop_arrive: for the promotion form, trials[me]'s newest point
 * (added): ES_NONE when it reached no rung it was not recorded at; else it
 * is recorded at the highest it reached and ES_GO (promoted from there at
 * once) or ES_PAUSE, why (size bytes) saying why it pauses. */
enum es_verdict earlystop_arrive(const struct spec_sweep *s, struct es_trial *const *trials, size_t n,
				 size_t me, char *why, size_t size);

/* earlystop_promotion: the paused trial (paused[i]) that the promotion form
 * promotes now, marked promoted; -1 when none. force: no trial is left to
 * start, none runs and none finished: the best paused one of the highest
 * rung that has one goes on, whatever its rank. */
long earlystop_promotion(const struct spec_sweep *s, struct es_trial *const *trials, size_t n,
			 const bool *paused, bool force);

#endif
