#include "base/compat.h"
#include "master/earlystop.h"

#include <math.h>
#include <stdlib.h>

#include "base/xalloc.h"

void es_trial_add(struct es_trial *t, double res, double score)
{
	if (t->n == t->a) {
		t->a = t->a ? 2 * t->a : 16;
		t->res = xrealloc(t->res, t->a * sizeof(*t->res));
		t->score = xrealloc(t->score, t->a * sizeof(*t->score));
	}
	t->res[t->n] = res;
	t->score[t->n++] = score;
}

void es_trial_release(struct es_trial *t)
{
	free(t->res);
	free(t->score);
	memset(t, 0, sizeof(*t));
}

size_t earlystop_rungs(const struct spec_sweep *s, double out[ES_RUNGS_MAX])
{
	double max = s->max_resource ? s->max_resource : s->min_resource * 1000;
	size_t n = 0;

	for (double r = s->min_resource; r < max && n < ES_RUNGS_MAX; r *= s->reduction_factor)
		out[n++] = r;
	return n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The q quantile (0..1) of v[0..n), n >= 1, interpolated linearly between
 * the closest ranks (numpy's default); sorts v. */
static double quantile(double *v, size_t n, double q)
{
	double pos, frac;
	size_t lo;

	sort_array(v, n, sizeof(*v), cmp_double);
	pos = q * (double)(n - 1);
	lo = (size_t)floor(pos);
	frac = pos - (double)lo;
	return lo + 1 < n ? v[lo] + frac * (v[lo + 1] - v[lo]) : v[lo];
}

static const char *res_name(const struct spec_sweep *s)
{
	return s->resource ? s->resource : "step";
}

/* A score as the objective's value again, for messages. */
static double value_of(const struct spec_sweep *s, double score)
{
	return s->maximize ? score : -score;
}

static bool judge_asha(const struct spec_sweep *s, struct es_trial *const *trials, size_t n,
		       size_t me, char *why, size_t size)
{
	struct es_trial *t = trials[me];
	double rungs[ES_RUNGS_MAX], res = t->res[t->n - 1], score = t->score[t->n - 1];
	size_t nr = earlystop_rungs(s, rungs);

	for (size_t k = nr; k-- > 0;) {
		double *others, cutoff;
		size_t no = 0;
		if (res < rungs[k])
			continue;
		if (t->recorded & (1u << k))
			return false;
		others = xcalloc(n + 1, sizeof(*others));
		for (size_t i = 0; i < n; i++)
			if (i != me && trials[i] && (trials[i]->recorded & (1u << k)))
				others[no++] = trials[i]->rung_score[k];
		t->recorded |= 1u << k;
		t->rung_score[k] = score;
		if (!no) {
			free(others);
			return false;
		}
		cutoff = quantile(others, no, 1.0 - 1.0 / s->reduction_factor);
		free(others);
		if (score >= cutoff)
			return false;
		snprintf(why, size, "asha: %s %g at %s %g is %s the cutoff %g of rung %g (%zu trial%s "
			 "there before it, 1 in %g goes on)", s->metric, value_of(s, score), res_name(s),
			 res, s->maximize ? "below" : "above", value_of(s, cutoff), rungs[k], no,
			 no == 1 ? "" : "s", s->reduction_factor);
		return true;
	}
	return false;
}

static bool judge_median(const struct spec_sweep *s, struct es_trial *const *trials, size_t n,
			 size_t me, char *why, size_t size)
{
	struct es_trial *t = trials[me];
	double res = t->res[t->n - 1], best = -INFINITY, median, *avgs;
	size_t na = 0;

	if (res < s->min_resource)
		return false;
	for (size_t i = 0; i < t->n; i++)
		best = fmax(best, t->score[i]);
	avgs = xcalloc(n + 1, sizeof(*avgs));
	for (size_t i = 0; i < n; i++) {
		const struct es_trial *o = trials[i];
		double sum = 0, far = -INFINITY;
		size_t cnt = 0;
		if (i == me || !o)
			continue;
		for (size_t k = 0; k < o->n; k++) {
			far = fmax(far, o->res[k]);
			if (o->res[k] <= res)
				sum += o->score[k], cnt++;
		}
		if (cnt && far >= res)
			avgs[na++] = sum / (double)cnt;
	}
	if (na < s->min_trials) {
		free(avgs);
		return false;
	}
	median = quantile(avgs, na, 0.5);
	free(avgs);
	if (best >= median)
		return false;
	snprintf(why, size, "median: the best %s %g by %s %g is %s the median %g of %zu other "
		 "trials' running averages there", s->metric, value_of(s, best), res_name(s), res,
		 s->maximize ? "below" : "above", value_of(s, median), na);
	return true;
}

/* ---- ASHA's promotion form ---- */

/* The highest rung t is recorded at, or -1. */
static int top_rung(const struct es_trial *t)
{
	for (int k = ES_RUNGS_MAX; k-- > 0;)
		if (t->recorded & (1u << k))
			return k;
	return -1;
}

/* How many trials are recorded at rung k (*n), and how many of them rank
 * above trials[me] there (higher score; equal scores: the lower index). */
static size_t rank_at(struct es_trial *const *trials, size_t n_trials, size_t me, int k, size_t *n)
{
	double mine = trials[me]->rung_score[k];
	size_t above = 0;

	*n = 0;
	for (size_t i = 0; i < n_trials; i++) {
		const struct es_trial *o = trials[i];
		if (!o || !(o->recorded & (1u << k)))
			continue;
		(*n)++;
		if (i != me && (o->rung_score[k] > mine || (o->rung_score[k] == mine && i < me)))
			above++;
	}
	return above;
}

/* Whether trials[me] is among the best floor(n/eta) of rung k. */
static bool in_top(const struct spec_sweep *s, struct es_trial *const *trials, size_t n_trials, size_t me,
		   int k)
{
	size_t n, above = rank_at(trials, n_trials, me, k, &n);
	return (double)above < floor((double)n / s->reduction_factor);
}

enum es_verdict earlystop_arrive(const struct spec_sweep *s, struct es_trial *const *trials, size_t n,
				 size_t me, char *why, size_t size)
{
	struct es_trial *t = trials[me];
	double rungs[ES_RUNGS_MAX], res;
	size_t nr = earlystop_rungs(s, rungs), there;
	int k;

	if (!t || !t->n)
		return ES_NONE;
	res = t->res[t->n - 1];
	for (k = (int)nr - 1; k >= 0 && res < rungs[k]; k--)
		;
	if (k < 0 || (t->recorded & (1u << k)))
		return ES_NONE;
	t->recorded |= 1u << k;
	t->rung_score[k] = t->score[t->n - 1];
	if (in_top(s, trials, n, me, k)) {
		t->promoted |= 1u << k;
		return ES_GO;
	}
	size_t above = rank_at(trials, n, me, k, &there);
	snprintf(why, size, "asha: %s %g at %s %g ranks %zu of %zu at rung %g, where %g go on: paused "
		 "until it is promoted", s->metric, value_of(s, t->score[t->n - 1]), res_name(s), res,
		 above + 1, there, rungs[k], floor((double)there / s->reduction_factor));
	return ES_PAUSE;
}

long earlystop_promotion(const struct spec_sweep *s, struct es_trial *const *trials, size_t n,
			 const bool *paused, bool force)
{
	long best = -1;
	int best_rung = -1;

	for (int k = ES_RUNGS_MAX; k-- > 0;)
		for (size_t i = 0; i < n; i++) {
			struct es_trial *t = trials[i];
			if (!t || !paused[i] || top_rung(t) != k || (t->promoted & (1u << k)))
				continue;
			if (in_top(s, trials, n, i, k)) {
				t->promoted |= 1u << k;
				return (long)i;
			}
			if (force && (best < 0 || (k == best_rung && t->rung_score[k] > trials[best]->rung_score[k]))) {
				if (best < 0)
					best_rung = k;
				if (k == best_rung)
					best = (long)i;
			}
		}
	if (best >= 0)
		trials[best]->promoted |= 1u << best_rung;
	return best;
}

bool earlystop_judge(const struct spec_sweep *s, struct es_trial *const *trials, size_t n, size_t me,
		     char *why, size_t size)
{
	if (!trials[me] || !trials[me]->n)
		return false;
	switch (s->stop) {
	case SWEEP_STOP_ASHA:
		return judge_asha(s, trials, n, me, why, size);
	case SWEEP_STOP_MEDIAN:
		return judge_median(s, trials, n, me, why, size);
	default:
		return false;
	}
}
