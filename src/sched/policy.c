#include "base/compat.h"
#include "sched/policy.h"

#include <assert.h>
#include <limits.h>

#include "base/xalloc.h"

static const char *const policy_names[] = {
	[SCHED_POLICY_GREEDY] = "greedy", [SCHED_POLICY_FIFO] = "fifo",
	[SCHED_POLICY_LAS] = "las",       [SCHED_POLICY_FAIR] = "fair",
	[SCHED_POLICY_SRTF] = "srtf",     [SCHED_POLICY_GLAS] = "glas",
};
static_assert(ARRAY_SIZE(policy_names) == SCHED_POLICY__COUNT, "a name for every policy");

static const char *const wait_names[] = {
	[SCHED_WAIT_GPUS] = "insufficient_gpus",
	[SCHED_WAIT_HEAD] = "behind_head",
	[SCHED_WAIT_QUOTA] = "team_quota",
	[SCHED_WAIT_TOO_BIG] = "too_big",
};
static_assert(ARRAY_SIZE(wait_names) == SCHED_WAIT__COUNT, "a name for every wait code");

/* The Tiresias thresholds (GPU-seconds): the peer simulator's defaults. */
static const uint64_t las_thresholds[] = { 3250, 7200, 18000 };

/* glas: geometric levels, the first threshold GLAS_BASE GPU-seconds, each next
 * one GLAS_RATIO times the last (64, 256, ..., 4,194,304: about 48 GPU-days). */
#define GLAS_BASE 64
#define GLAS_RATIO 4
#define GLAS_LEVELS 10

/* Ageing (conf age_pct): promote a waiting job once it has waited, below
 * level 0 since it last entered level 0, K times as long as it has run in
 * all. The K per policy from the vc11cb48 numbers (docs/scheduler.md,
 * Ageing): las within 3 % of the peer's dlas-gpu with K = 4; glas's short
 * first levels demote a promoted job again within seconds, so a small K
 * costs it (K = 8: 6 % of average JCT on 4x8) and K = 20 stays within 1 % of
 * ageing off while still bounding the wait. */
#define LAS_AGE_PCT 400
#define GLAS_AGE_PCT 2000

const char *sched_policy_name(enum sched_policy p)
{
	return (unsigned)p < SCHED_POLICY__COUNT ? policy_names[p] : "?";
}

int sched_policy_parse(const char *name)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(policy_names); i++)
		if (!strcmp(name, policy_names[i]))
			return (int)i;
	return -1;
}

const char *sched_wait_code_name(enum sched_wait_code c)
{
	return (unsigned)c < SCHED_WAIT__COUNT ? wait_names[c] : "?";
}

void sched_policy_conf_init(struct sched_policy_conf *conf, enum sched_policy p)
{
	memset(conf, 0, sizeof(*conf));
	conf->policy = p;
	if (p == SCHED_POLICY_LAS || p == SCHED_POLICY_FAIR) {
		memcpy(conf->thresholds, las_thresholds, sizeof(las_thresholds));
		conf->nthresholds = ARRAY_SIZE(las_thresholds);
		conf->age_pct = LAS_AGE_PCT;
	} else if (p == SCHED_POLICY_GLAS) {
		uint64_t t = GLAS_BASE;
		for (size_t i = 0; i < GLAS_LEVELS - 1; i++, t *= GLAS_RATIO)
			conf->thresholds[i] = t;
		conf->nthresholds = GLAS_LEVELS - 1;
		conf->age_pct = GLAS_AGE_PCT;
	}
}

static bool uses_levels(const struct sched_policy_conf *conf)
{
	return conf->policy == SCHED_POLICY_LAS || conf->policy == SCHED_POLICY_GLAS ||
	       conf->policy == SCHED_POLICY_FAIR;
}

void sched_policy_job_init(struct sched_pjob *j, uint64_t id, unsigned gpus, uint64_t now)
{
	memset(j, 0, sizeof(*j));
	j->id = id;
	j->priority = 1;
	j->submitted_at = now;
	j->gpus = gpus;
	j->preemptible = true;
	j->accounted_at = now;
	j->level_since = now;
}

/* The seconds of running from attained that take j to its next level's
 * threshold (0 when it is already there). */
static uint64_t to_next_level(const struct sched_policy_conf *conf, const struct sched_pjob *j)
{
	uint64_t thr = conf->thresholds[j->level] + j->level_base;
	return thr > j->attained ? (thr - j->attained + j->gpus - 1) / j->gpus : 0;
}

/* Whether j, running from `from`, is sure to reach its next level's
 * threshold only after from + d (to_next_level(conf, j) > d, and from plus
 * it does not overflow), told without a division where the numbers are
 * small enough (a replay asks it of every running job at every event):
 * false when it cannot tell. */
static bool level_after(const struct sched_policy_conf *conf, const struct sched_pjob *j,
			uint64_t from, uint64_t d)
{
	uint64_t thr = conf->thresholds[j->level] + j->level_base;

	/* thr - attained > d x gpus, which cannot overflow there, is
	 * ceil((thr - attained) / gpus) > d */
	return thr > j->attained && d <= UINT32_MAX && thr - j->attained <= UINT64_MAX >> 1 &&
	       from <= UINT64_MAX >> 2 && thr - j->attained > d * j->gpus;
}

/* Ageing: how long j may wait below level 0 (since it last entered level 0)
 * before it is promoted: K times all it has run; UINT64_MAX when it cannot
 * be. */
static uint64_t age_limit(const struct sched_policy_conf *conf, const struct sched_pjob *j)
{
	if (!conf->age_pct || !uses_levels(conf) || !j->level || !j->served)
		return UINT64_MAX;
	uint64_t lim = j->served * conf->age_pct / 100;
	return lim ? lim : 1;
}

/* The seconds waiting job j, accounted to its accounted_at, still has to
 * wait before it is promoted (0: at the next second); UINT64_MAX when it
 * cannot be. */
static uint64_t age_wait_left(const struct sched_policy_conf *conf, const struct sched_pjob *j)
{
	uint64_t lim = age_limit(conf, j);

	if (lim == UINT64_MAX)
		return UINT64_MAX;
	return lim > j->waited ? lim - j->waited : 0;
}

uint64_t sched_policy_promotion_at(const struct sched_policy_conf *conf, const struct sched_pjob *j)
{
	uint64_t after = age_wait_left(conf, j);

	if (j->running || after == UINT64_MAX)
		return UINT64_MAX;
	/* as sched_policy_plan's next_change counts it */
	return j->accounted_at + (after ? after : 1);
}

void sched_policy_account(const struct sched_policy_conf *conf, struct sched_pjob *j,
			  uint64_t now)
{
	if (now <= j->accounted_at) {
		j->accounted_at = now > j->accounted_at ? now : j->accounted_at;
		return;
	}
	if (j->running && j->gpus) {
		uint64_t from = j->accounted_at;
		/* level changes are dated at the second the threshold was crossed,
		 * so the order does not depend on when the caller looks */
		bool levels = uses_levels(conf);
		while (levels && j->level < conf->nthresholds) {
			uint64_t need;
			if (level_after(conf, j, from, now - from))
				break; /* as below, told without dividing */
			need = to_next_level(conf, j);
			if (from + need > now)
				break;
			j->attained += need * j->gpus;
			from += need;
			j->level++;
			j->level_since = from;
		}
		j->attained += (now - from) * j->gpus;
		j->served += now - j->accounted_at;
	} else if (!j->running && j->served) {
		uint64_t lim = age_limit(conf, j), dt = now - j->accounted_at;
		if (lim != UINT64_MAX && j->waited + dt >= lim) {
			/* promoted at the second the limit is reached; its levels
			 * count again from what it has now */
			uint64_t at = j->accounted_at + (lim > j->waited ? lim - j->waited : 0);
			j->level = 0;
			j->level_base = j->attained;
			j->level_since = at;
			j->waited = 0;
			j->promotions++;
		} else if (j->level) {
			j->waited += dt; /* below level 0: starving */
		}
	}
	j->accounted_at = now;
}

void sched_policy_started(struct sched_pjob *j, uint64_t now)
{
	j->running = true;
	j->started_at = now;
}

void sched_policy_requeue(struct sched_pjob *j, uint64_t now)
{
	j->running = false;
	j->level_since = now;
}

/* Whether conf protects running work at all (struct sched_policy_conf). */
static bool protects(const struct sched_policy_conf *conf)
{
	return conf->min_run_s || conf->max_lost_s || conf->need_checkpoint;
}

uint64_t sched_policy_lost_s(const struct sched_pjob *j, uint64_t now)
{
	uint64_t from = j->checkpointed_at > j->started_at ? j->checkpointed_at : j->started_at;
	return now > from ? now - from : 0;
}

bool sched_policy_protected(const struct sched_policy_conf *conf, const struct sched_pjob *j,
			    uint64_t now)
{
	if (!j->running || !j->preemptible)
		return false;
	if (conf->min_run_s && now < j->started_at + conf->min_run_s)
		return true;
	if (conf->need_checkpoint && (!j->checkpointed_at || j->checkpointed_at < j->started_at))
		return true;
	return conf->max_lost_s && sched_policy_lost_s(j, now) > conf->max_lost_s;
}

/* When running job j's protection may next begin or end with nothing else
 * changing (its minimum run ends, its work since its checkpoint passes
 * max_lost_s); UINT64_MAX when never. */
static uint64_t protection_change(const struct sched_policy_conf *conf, const struct sched_pjob *j,
				  uint64_t now)
{
	uint64_t at = UINT64_MAX;

	if (!j->running || !j->preemptible)
		return at;
	if (conf->min_run_s && now < j->started_at + conf->min_run_s)
		at = j->started_at + conf->min_run_s;
	if (conf->max_lost_s && sched_policy_lost_s(j, now) <= conf->max_lost_s) {
		uint64_t from = j->checkpointed_at > j->started_at ? j->checkpointed_at : j->started_at;
		uint64_t t = from + conf->max_lost_s + 1;
		at = t < at ? t : at;
	}
	return at;
}

/* The sort key of one job: compared field by field, smaller first; the
 * job's id comes last (but for a 0 that pads the shorter keys), so that no
 * two jobs' keys are equal. */
#define KEY_FIELDS 4

struct sched_policy_key_ {
	int64_t k[KEY_FIELDS];
	/* the job's index, and the key's place as order_keys laid it out
	 * (sort_keys sorts by key, then place: a stable sort); 32 bits keep
	 * a key in 40 bytes, and a plan over 2^32 jobs would need hundreds
	 * of gigabytes of them */
	uint32_t idx, pos;
};

static void make_key(const struct sched_policy_conf *conf, const struct sched_pjob *j,
		     size_t idx, struct sched_policy_key_ *out)
{
	out->idx = (uint32_t)idx;
	out->k[0] = -(int64_t)j->priority;
	switch (conf->policy) {
	case SCHED_POLICY_LAS:
	case SCHED_POLICY_GLAS:
	case SCHED_POLICY_FAIR:
		/* the level, then running jobs before waiting ones */
		out->k[1] = (int64_t)j->level * 2 + (j->running ? 0 : 1);
		out->k[2] = (int64_t)j->level_since;
		out->k[3] = (int64_t)j->id;
		break;
	case SCHED_POLICY_SRTF:
		out->k[1] = (int64_t)j->remaining;
		out->k[2] = (int64_t)j->submitted_at;
		out->k[3] = (int64_t)j->id;
		break;
	default:
		out->k[1] = (int64_t)j->submitted_at;
		out->k[2] = (int64_t)j->id;
		out->k[3] = 0;
		break;
	}
}

static bool key_less(const struct sched_policy_key_ *x, const struct sched_policy_key_ *y)
{
	for (size_t i = 0; i < KEY_FIELDS; i++)
		if (x->k[i] != y->k[i])
			return x->k[i] < y->k[i];
	return false;
}

/* key_less, then the place: the order of a stable sort. */
static bool key_pos_less(const struct sched_policy_key_ *x, const struct sched_policy_key_ *y)
{
	for (size_t i = 0; i < KEY_FIELDS; i++)
		if (x->k[i] != y->k[i])
			return x->k[i] < y->k[i];
	return x->pos < y->pos;
}

/* The end of the run of keys in order (key_pos_less) from keys[from]. */
static size_t run_end(const struct sched_policy_key_ *keys, size_t from, size_t n)
{
	size_t e = from + 1;

	while (e < n && key_pos_less(&keys[e - 1], &keys[e]))
		e++;
	return e;
}

/* Merges the sorted keys[0..m) and keys[m..e) into tmp[0..e). */
static void merge_keys(const struct sched_policy_key_ *keys, size_t m, size_t e,
		       struct sched_policy_key_ *tmp)
{
	size_t a = 0, b = m, o = 0;

	while (a < m && b < e)
		tmp[o++] = key_pos_less(&keys[b], &keys[a]) ? keys[b++] : keys[a++];
	while (a < m)
		tmp[o++] = keys[a++];
	while (b < e)
		tmp[o++] = keys[b++];
}

/* A natural merge sort of keys[0..n) by key and place (tmp: room for n
 * more), which merges the runs already in order. */
static void merge_sort_keys(struct sched_policy_key_ *keys, size_t n,
			    struct sched_policy_key_ *tmp)
{
	for (;;) {
		size_t i = 0, runs = 0;

		while (i < n) {
			size_t m = run_end(keys, i, n), e = m < n ? run_end(keys, m, n) : n;
			merge_keys(keys + i, m - i, e - i, tmp + i);
			runs++;
			i = e;
		}
		memcpy(keys, tmp, n * sizeof(*keys));
		if (runs == 1)
			return;
	}
}

/* Keys set aside that sort_keys sorts by insertion; more are merge sorted. */
#define SORT_INSERTION 32

/*
 * Sorts keys[0..n) by key and place (pos, their order here: a stable sort;
 * keys are unique anyway, the job id being the last field), tmp: room for n
 * more. Keys nearly in order (order_keys lays them out so: the simulator's
 * plans differ from the last by a job or two) cost a pass: the keys in
 * order are kept where they are, and each that orders before the last kept
 * is set aside with that one (which leaves the kept ones in order, however
 * far one key is out of place); the few set aside are sorted and merged
 * back in.
 */
static void sort_keys(struct sched_policy_key_ *keys, size_t n, struct sched_policy_key_ *tmp)
{
	size_t a = 0, b = 0;

	for (size_t k = 0; k < n; k++) {
		if (!a || !key_less(&keys[k], &keys[a - 1])) {
			if (a != k)
				keys[a] = keys[k];
			a++;
		} else {
			tmp[b++] = keys[--a];
			tmp[b++] = keys[k];
		}
	}
	if (!b)
		return;
	if (b <= SORT_INSERTION) {
		for (size_t k = 1; k < b; k++) {
			struct sched_policy_key_ x = tmp[k];
			size_t m = k;
			for (; m && key_pos_less(&x, &tmp[m - 1]); m--)
				tmp[m] = tmp[m - 1];
			tmp[m] = x;
		}
	} else {
		merge_sort_keys(tmp, b, keys + a); /* as many free there */
	}
	/* merged from the end (keys[a..n) is free): each set aside, the last
	 * first, goes after the kept ones before it, which move up by block */
	for (size_t o = n; b;) {
		const struct sched_policy_key_ *x = &tmp[--b];
		size_t lo = 0, hi = a;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (key_pos_less(x, &keys[mid]))
				hi = mid;
			else
				lo = mid + 1;
		}
		o -= a - lo;
		memmove(&keys[o], &keys[lo], (a - lo) * sizeof(*keys));
		keys[--o] = *x;
		a = lo;
	}
}

/* -1, 0 or 1 as x is less than, equal to or more than y. */
#define CMP3(x, y) ((x) < (y) ? -1 : (x) > (y))

int sched_policy_cmp(const struct sched_policy_conf *conf, const struct sched_pjob *a,
		     const struct sched_pjob *b)
{
	/* make_key's fields, compared in turn without building the keys (the
	 * simulator compares at every insert into its sorted queues) */
	int c = CMP3(-(int64_t)a->priority, -(int64_t)b->priority);

	if (c)
		return c;
	switch (conf->policy) {
	case SCHED_POLICY_LAS:
	case SCHED_POLICY_GLAS:
	case SCHED_POLICY_FAIR:
		if ((c = CMP3(a->level, b->level)) || (c = CMP3(!a->running, !b->running)) ||
		    (c = CMP3((int64_t)a->level_since, (int64_t)b->level_since)))
			return c;
		break;
	case SCHED_POLICY_SRTF:
		if ((c = CMP3((int64_t)a->remaining, (int64_t)b->remaining)) ||
		    (c = CMP3((int64_t)a->submitted_at, (int64_t)b->submitted_at)))
			return c;
		break;
	default:
		if ((c = CMP3((int64_t)a->submitted_at, (int64_t)b->submitted_at)))
			return c;
		break;
	}
	return CMP3((int64_t)a->id, (int64_t)b->id);
}
#undef CMP3

unsigned sched_policy_wait_blocks(const struct sched_policy_conf *conf,
				  const struct sched_pjob *jobs, size_t njobs,
				  const struct sched_policy_wait *w)
{
	const struct sched_pjob *j = &jobs[w->job];

	if (w->code == SCHED_WAIT_TOO_BIG)
		return j->gpus; /* a larger job is too big as well */
	switch (conf->policy) {
	case SCHED_POLICY_GREEDY:
	case SCHED_POLICY_LAS:
	case SCHED_POLICY_GLAS:
	case SCHED_POLICY_SRTF:
		/* plan_scan's free GPUs only shrink along the key order, so a
		 * later job as large does not fit either */
		return w->code == SCHED_WAIT_GPUS ? j->gpus : UINT_MAX;
	case SCHED_POLICY_FIFO:
		/* the head and those behind it: a running job without a bound
		 * makes the reservation unknown, and then nothing backfills */
		if (w->code != SCHED_WAIT_GPUS && w->code != SCHED_WAIT_HEAD)
			return UINT_MAX;
		for (size_t i = 0; i < njobs; i++)
			if (jobs[i].running && !jobs[i].bound)
				return 0;
		return UINT_MAX;
	default:
		/* fair fills teams by share, not in one order: no such bound */
		return UINT_MAX;
	}
}

static void add_start(struct sched_policy_plan *p, size_t i)
{
	ALLOC_GROW(p->starts, p->nstarts + 1, p->alloc_starts_);
	p->starts[p->nstarts++] = i;
}

static void add_preempt(struct sched_policy_plan *p, size_t i)
{
	ALLOC_GROW(p->preempts, p->npreempts + 1, p->alloc_preempts_);
	p->preempts[p->npreempts++] = i;
}

static void add_wait(struct sched_policy_plan *p, size_t i, enum sched_wait_code code)
{
	ALLOC_GROW(p->waits, p->nwaits + 1, p->alloc_waits_);
	p->waits[p->nwaits].job = i;
	p->waits[p->nwaits].position = (unsigned)p->nwaits + 1;
	p->waits[p->nwaits].code = code;
	p->nwaits++;
}

/* The running jobs' indexes into out (*n of them), by the end of their
 * bound (started_at + bound), earliest first; false when one has no bound. */
static bool running_by_end(const struct sched_pjob *jobs, size_t njobs, size_t *out, size_t *n)
{
	*n = 0;
	for (size_t i = 0; i < njobs; i++) {
		if (!jobs[i].running)
			continue;
		if (!jobs[i].bound)
			return false;
		out[(*n)++] = i;
	}
	/* insertion sort: running sets are small */
	for (size_t a = 1; a < *n; a++) {
		size_t v = out[a], b = a;
		uint64_t ev = jobs[v].started_at + jobs[v].bound;
		while (b > 0 && jobs[out[b - 1]].started_at + jobs[out[b - 1]].bound > ev) {
			out[b] = out[b - 1];
			b--;
		}
		out[b] = v;
	}
	return true;
}

/*
 * EASY backfill for fifo. head is the first waiting job that did not fit;
 * free the GPUs free now. The head's reservation (shadow time) is when,
 * with every running job ending at its bound, enough GPUs are free for it;
 * `extra` is what is left over then. A later job may start now if it fits
 * and either ends (by its bound) before the shadow time or uses only extra
 * GPUs. A running job without a bound makes the shadow time unknown, and a
 * job without a bound never ends "before" it.
 */
struct easy {
	bool known;              /* the shadow time is known */
	uint64_t shadow;
	unsigned extra;
};

static void easy_reserve(const struct sched_pjob *jobs, size_t njobs, const struct sched_pjob *head,
			 unsigned free_now, uint64_t now, size_t *scratch, struct easy *e)
{
	size_t n;
	unsigned avail = free_now;

	e->known = false;
	e->shadow = UINT64_MAX;
	e->extra = 0;
	if (!running_by_end(jobs, njobs, scratch, &n))
		return;
	for (size_t a = 0; a < n && avail < head->gpus; a++) {
		const struct sched_pjob *r = &jobs[scratch[a]];
		uint64_t end = r->started_at + r->bound;
		avail += r->gpus;
		e->shadow = end > now ? end : now;
	}
	if (avail < head->gpus)
		return;
	e->known = true;
	e->extra = avail - head->gpus;
}

static void plan_fifo(const struct sched_policy_conf *conf, const struct sched_pjob *jobs,
		      size_t njobs, const struct sched_policy_key_ *keys, unsigned total, uint64_t now,
		      struct sched_policy_plan *out)
{
	unsigned free_gpus = total;
	const struct sched_pjob *head = NULL;
	struct easy e = { false, UINT64_MAX, 0 };

	for (size_t i = 0; i < njobs; i++)
		if (jobs[i].running)
			free_gpus -= jobs[i].gpus <= free_gpus ? jobs[i].gpus : free_gpus;
	for (size_t k = 0; k < njobs; k++) {
		size_t i = keys[k].idx;
		const struct sched_pjob *j = &jobs[i];

		if (j->running)
			continue;
		if (j->gpus > total) {
			add_wait(out, i, SCHED_WAIT_TOO_BIG);
			continue;
		}
		if (!head) {
			if (j->gpus <= free_gpus) {
				free_gpus -= j->gpus;
				add_start(out, i);
				continue;
			}
			head = j;
			easy_reserve(jobs, njobs, head, free_gpus, now, out->order_, &e);
			add_wait(out, i, SCHED_WAIT_GPUS);
			continue;
		}
		/* behind the head: backfill only without delaying it */
		if (e.known && j->gpus <= free_gpus) {
			bool ends_before = j->bound && now + j->bound <= e.shadow;
			if (ends_before || j->gpus <= e.extra) {
				if (!ends_before)
					e.extra -= j->gpus;
				free_gpus -= j->gpus;
				add_start(out, i);
				continue;
			}
		}
		add_wait(out, i, SCHED_WAIT_HEAD);
	}
	(void)conf;
}

/* fifo's reservation by placement: with every running job ending at its
 * bound, the first end by which the head would be placed. ended (OUT)
 * lists the running jobs that end by then (*nended of them). False when a
 * running job has no bound or the head is not placed even with all gone. */
static bool fit_reserve(const struct sched_pjob *jobs, size_t njobs, size_t head, uint64_t now,
			const struct sched_fit *fit, size_t *ended, size_t *nended,
			uint64_t *shadow)
{
	size_t n;

	*nended = 0;
	if (!running_by_end(jobs, njobs, ended, &n))
		return false;
	for (size_t a = 0; a < n; a++) {
		const struct sched_pjob *r = &jobs[ended[a]];
		uint64_t end = r->started_at + r->bound;
		/* jobs ending at the same second go together */
		if (a + 1 < n && jobs[ended[a + 1]].started_at + jobs[ended[a + 1]].bound == end)
			continue;
		if (fit->fits_after(fit->ctx, head, ended, a + 1)) {
			*nended = a + 1;
			*shadow = end > now ? end : now;
			return true;
		}
	}
	return false;
}

/* fifo judged by placement (sched_policy_plan_fit). */
static void plan_fifo_fit(const struct sched_pjob *jobs, size_t njobs, const struct sched_policy_key_ *keys,
			  uint64_t now, const struct sched_fit *fit, struct sched_policy_plan *out)
{
	size_t *ended = xcalloc(njobs + 1, sizeof(*ended)), nended = 0, head = SIZE_MAX;
	size_t *all = xcalloc(njobs + 1, sizeof(*all));
	bool known = false;
	uint64_t shadow = UINT64_MAX;

	for (size_t k = 0; k < njobs; k++) {
		size_t i = keys[k].idx, nall = 0;
		const struct sched_pjob *j = &jobs[i];

		if (j->running)
			continue;
		if (head == SIZE_MAX) {
			if (fit->fits(fit->ctx, i, true)) {
				add_start(out, i);
				continue;
			}
			/* a job that would not fit with every job gone blocks nobody */
			for (size_t x = 0; x < njobs; x++)
				if (jobs[x].running)
					all[nall++] = x;
			for (size_t x = 0; x < out->nstarts; x++)
				all[nall++] = out->starts[x];
			if (!fit->fits_after(fit->ctx, i, all, nall)) {
				add_wait(out, i, SCHED_WAIT_TOO_BIG);
				continue;
			}
			head = i;
			known = fit_reserve(jobs, njobs, head, now, fit, ended, &nended, &shadow);
			add_wait(out, i, SCHED_WAIT_GPUS);
			continue;
		}
		/* behind the head: backfill only where the head is still placed
		 * at its reservation */
		if (known && fit->fits(fit->ctx, i, true)) {
			if (j->bound && now + j->bound <= shadow) {
				ended[nended++] = i; /* gone again before the head starts */
				add_start(out, i);
				continue;
			}
			if (fit->fits_after(fit->ctx, head, ended, nended)) {
				add_start(out, i);
				continue;
			}
			fit->give_back(fit->ctx, i);
		}
		add_wait(out, i, SCHED_WAIT_HEAD);
	}
	free(ended);
	free(all);
}

/* Gives the protected running jobs of priority prio (sched_policy_protected)
 * their GPUs while there are enough free (OUT: *free_gpus, selected); one
 * that no longer fits is left to the caller's scan, which preempts it. */
static void reserve_protected(const struct sched_policy_conf *conf, const struct sched_pjob *jobs,
			      size_t njobs, int prio, uint64_t now, unsigned *free_gpus,
			      bool *selected)
{
	for (size_t x = 0; x < njobs; x++)
		if (!selected[x] && jobs[x].priority == prio &&
		    sched_policy_protected(conf, &jobs[x], now) && jobs[x].gpus <= *free_gpus) {
			*free_gpus -= jobs[x].gpus;
			selected[x] = true;
		}
}

/* Greedy scan in key order: every job that fits runs; running jobs that no
 * longer fit are preempted. Non-preemptible running jobs hold their GPUs
 * before the scan (all running jobs for the greedy policy); protected ones
 * hold theirs from the first job of their priority on, so that only a job
 * of a higher priority can displace them. */
static void plan_scan(const struct sched_policy_conf *conf, const struct sched_pjob *jobs,
		      size_t njobs, const struct sched_policy_key_ *keys, unsigned total, uint64_t now,
		      struct sched_policy_plan *out, bool *selected)
{
	unsigned free_gpus = total;
	bool never_preempt = conf->policy == SCHED_POLICY_GREEDY;
	bool protect = !never_preempt && protects(conf);

	for (size_t i = 0; i < njobs; i++)
		if (jobs[i].running && (never_preempt || !jobs[i].preemptible)) {
			free_gpus -= jobs[i].gpus <= free_gpus ? jobs[i].gpus : free_gpus;
			selected[i] = true;
		}
	for (size_t k = 0; k < njobs; k++) {
		size_t i = keys[k].idx;
		const struct sched_pjob *j = &jobs[i];

		/* keys order by priority first: a new priority group starts */
		if (protect && (!k || j->priority != jobs[keys[k - 1].idx].priority))
			reserve_protected(conf, jobs, njobs, j->priority, now, &free_gpus, selected);
		if (selected[i])
			continue;
		if (j->gpus <= free_gpus) {
			free_gpus -= j->gpus;
			selected[i] = true;
			if (!j->running)
				add_start(out, i);
		} else if (j->running) {
			add_preempt(out, i);
		} else {
			add_wait(out, i, j->gpus > total ? SCHED_WAIT_TOO_BIG : SCHED_WAIT_GPUS);
		}
	}
}

/* fair: progressive filling across teams (lowest GPUs held over weight next),
 * las order within a team, quotas as hard caps. Non-preemptible running jobs
 * hold their GPUs before the filling, and so do protected ones unless a job
 * of a higher priority than theirs waits (then they take their turn). */
static void plan_fair(const struct sched_policy_conf *conf, const struct sched_pjob *jobs,
		      size_t njobs, const struct sched_policy_key_ *keys, unsigned total, uint64_t now,
		      const struct sched_fit *fit, struct sched_policy_plan *out, bool *selected)
{
	size_t nteams = conf->nteams ? conf->nteams : 1;
	unsigned *held = xcalloc(nteams, sizeof(*held));
	size_t *next = xcalloc(nteams, sizeof(*next)); /* cursor into keys per team */
	unsigned free_gpus = total;

#define TEAM_OF(j) ((j)->team < nteams ? (j)->team : 0)
	bool waiting = false;
	int top_waiting = 0; /* the highest priority of a waiting job */
	for (size_t i = 0; i < njobs; i++)
		if (!jobs[i].running && (!waiting || jobs[i].priority > top_waiting)) {
			waiting = true;
			top_waiting = jobs[i].priority;
		}
	for (size_t i = 0; i < njobs; i++)
		if (jobs[i].running &&
		    (!jobs[i].preemptible || (sched_policy_protected(conf, &jobs[i], now) &&
					      (!waiting || jobs[i].priority >= top_waiting)))) {
			free_gpus -= jobs[i].gpus <= free_gpus ? jobs[i].gpus : free_gpus;
			held[TEAM_OF(&jobs[i])] += jobs[i].gpus;
			selected[i] = true;
		}
	for (;;) {
		size_t best = SIZE_MAX;
		double best_share = 0;

		for (size_t t = 0; t < nteams; t++) {
			while (next[t] < njobs) {
				const struct sched_pjob *j = &jobs[keys[next[t]].idx];
				if (TEAM_OF(j) == t && !selected[keys[next[t]].idx])
					break;
				next[t]++;
			}
			if (next[t] >= njobs)
				continue;
			double w = t < conf->nteams && conf->teams[t].weight > 0 ? conf->teams[t].weight
										 : 1.0;
			double share = held[t] / w;
			if (best == SIZE_MAX || share < best_share) {
				best = t;
				best_share = share;
			}
		}
		if (best == SIZE_MAX)
			break;
		size_t i = keys[next[best]].idx;
		const struct sched_pjob *j = &jobs[i];
		unsigned quota = best < conf->nteams ? conf->teams[best].quota : 0;
		next[best]++;
		if (j->gpus <= free_gpus && (!quota || held[best] + j->gpus <= quota) && !j->running &&
		    fit && !fit->fits(fit->ctx, i, true)) {
			/* room by count (maybe once victims stop) but not placed now:
			 * the count keeps it for the preemptions; the quota does not */
			free_gpus -= j->gpus;
			add_wait(out, i, SCHED_WAIT_GPUS);
		} else if (j->gpus <= free_gpus && (!quota || held[best] + j->gpus <= quota)) {
			free_gpus -= j->gpus;
			held[best] += j->gpus;
			selected[i] = true;
			if (!j->running)
				add_start(out, i);
		} else if (j->running) {
			add_preempt(out, i);
		} else {
			enum sched_wait_code c = j->gpus > total		? SCHED_WAIT_TOO_BIG
						 : j->gpus <= free_gpus ? SCHED_WAIT_QUOTA
									: SCHED_WAIT_GPUS;
			add_wait(out, i, c);
		}
	}
#undef TEAM_OF
	free(held);
	free(next);
}

/*
 * The keys of jobs[0..njobs) in policy order (keys: room for 2 x njobs;
 * mark: njobs false flags, left false). The keys are laid out first in the
 * order of the last plan made with out, for the jobs still at the same index
 * (a caller that keeps a job at its index from one plan to the next, as the
 * simulator does its running jobs, then gives them nearly in order), the
 * others after in index order, and sorted from there (sort_keys): about a
 * pass when few are out of place, instead of a full sort. The order is
 * exact either way.
 */
static void order_keys(const struct sched_policy_conf *conf, const struct sched_pjob *jobs,
		       size_t njobs, struct sched_policy_key_ *keys, bool *mark,
		       struct sched_policy_plan *out)
{
	size_t n = 0;

	for (size_t k = 0; k < out->nlast_; k++) {
		size_t i = out->last_[k];
		if (i < njobs && !mark[i] && jobs[i].id == out->last_id_[k]) {
			mark[i] = true;
			make_key(conf, &jobs[i], i, &keys[n]);
			keys[n].pos = (uint32_t)n;
			n++;
		}
	}
	for (size_t i = 0; i < njobs; i++) {
		if (!mark[i]) {
			make_key(conf, &jobs[i], i, &keys[n]);
			keys[n].pos = (uint32_t)n;
			n++;
		}
		mark[i] = false;
	}
	sort_keys(keys, njobs, keys + njobs);
	ALLOC_GROW(out->last_, njobs + 1, out->alloc_last_);
	ALLOC_GROW(out->last_id_, njobs + 1, out->alloc_last_id_);
	for (size_t k = 0; k < njobs; k++) {
		out->last_[k] = keys[k].idx;
		out->last_id_[k] = jobs[keys[k].idx].id;
	}
	out->nlast_ = njobs;
}

static bool has_quota(const struct sched_policy_conf *conf)
{
	if (conf->policy != SCHED_POLICY_FAIR)
		return false;
	for (size_t t = 0; t < conf->nteams; t++)
		if (conf->teams[t].quota)
			return true;
	return false;
}

void sched_policy_plan(const struct sched_policy_conf *conf, const struct sched_pjob *jobs,
		       size_t njobs, unsigned total_gpus, uint64_t now,
		       struct sched_policy_plan *out)
{
	sched_policy_plan_fit(conf, jobs, njobs, total_gpus, now, NULL, out);
}

void sched_policy_plan_fit(const struct sched_policy_conf *conf, const struct sched_pjob *jobs,
			   size_t njobs, unsigned total_gpus, uint64_t now,
			   const struct sched_fit *fit, struct sched_policy_plan *out)
{
	uint64_t demand = 0;
	struct sched_policy_key_ *keys;
	bool *selected;

	out->nstarts = out->npreempts = out->nwaits = 0;
	out->next_change = UINT64_MAX;
	ALLOC_GROW(out->order_, njobs + 1, out->alloc_order_);
	for (size_t i = 0; i < njobs; i++)
		demand += jobs[i].gpus;

	/* only fifo and fair ask the oracle */
	if (conf->policy != SCHED_POLICY_FIFO && conf->policy != SCHED_POLICY_FAIR)
		fit = NULL;
	/* Everything fits by count: every policy runs every job, in arrival
	 * order (an oracle may still say no). */
	if (demand <= total_gpus && !has_quota(conf) && !fit) {
		for (size_t i = 0; i < njobs; i++)
			if (!jobs[i].running)
				add_start(out, i);
		return;
	}

	ALLOC_GROW(out->keys_, 2 * njobs + 1, out->alloc_keys_);
	ALLOC_GROW(out->selected_, njobs + 1, out->alloc_selected_);
	keys = out->keys_;
	selected = out->selected_;
	memset(selected, 0, (njobs + 1) * sizeof(*selected));
	order_keys(conf, jobs, njobs, keys, selected, out);

	if (conf->policy == SCHED_POLICY_FIFO && fit)
		plan_fifo_fit(jobs, njobs, keys, now, fit, out);
	else if (conf->policy == SCHED_POLICY_FIFO)
		plan_fifo(conf, jobs, njobs, keys, total_gpus, now, out);
	else if (conf->policy == SCHED_POLICY_FAIR)
		plan_fair(conf, jobs, njobs, keys, total_gpus, now, fit, out, selected);
	else
		plan_scan(conf, jobs, njobs, keys, total_gpus, now, out, selected);

	/* the next las demotion among the jobs that will run, and the next
	 * promotion among those that will wait */
	if (uses_levels(conf)) {
		for (size_t i = 0; i < njobs; i++) {
			const struct sched_pjob *j = &jobs[i];
			uint64_t after;
			if (selected[i]) {
				if (!j->gpus || j->level >= conf->nthresholds)
					continue;
				/* no earlier than the earliest so far: at would be
				 * now + to_next_level(), which is more than
				 * next_change - now - 1 */
				if (out->next_change != UINT64_MAX && out->next_change > now &&
				    level_after(conf, j, now, out->next_change - now - 1))
					continue;
				after = to_next_level(conf, j);
			} else if ((after = age_wait_left(conf, j)) == UINT64_MAX) {
				continue;
			}
			uint64_t at = now + (after ? after : 1);
			if (at < out->next_change)
				out->next_change = at;
		}
	}
	/* a running job's protection beginning or ending */
	if (protects(conf) && conf->policy != SCHED_POLICY_GREEDY && conf->policy != SCHED_POLICY_FIFO)
		for (size_t i = 0; i < njobs; i++) {
			uint64_t at = protection_change(conf, &jobs[i], now);
			if (at < out->next_change)
				out->next_change = at > now ? at : now + 1;
		}
}

uint64_t sched_policy_next_change_of(const struct sched_policy_conf *conf,
				     const struct sched_pjob *j, uint64_t now)
{
	uint64_t next = UINT64_MAX, after = UINT64_MAX;

	/* sched_policy_plan_fit's terms for one job */
	if (uses_levels(conf)) {
		if (j->running) {
			if (j->gpus && j->level < conf->nthresholds)
				after = to_next_level(conf, j);
		} else {
			after = age_wait_left(conf, j);
		}
		if (after != UINT64_MAX)
			next = now + (after ? after : 1);
	}
	if (protects(conf) && conf->policy != SCHED_POLICY_GREEDY && conf->policy != SCHED_POLICY_FIFO) {
		uint64_t at = protection_change(conf, j, now);
		if (at != UINT64_MAX && at < next)
			next = at > now ? at : now + 1;
	}
	return next;
}

void sched_policy_plan_release(struct sched_policy_plan *plan)
{
	free(plan->starts);
	free(plan->preempts);
	free(plan->waits);
	free(plan->order_);
	free(plan->last_);
	free(plan->last_id_);
	free(plan->keys_);
	free(plan->selected_);
	memset(plan, 0, sizeof(*plan));
}
