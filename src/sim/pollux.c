#include "base/compat.h"
#include "sim/pollux.h"

#include <dirent.h>
#include <math.h>

#include "base/parse.h"
#include "base/xalloc.h"
#include "sim/csv.h"

/* What the artifact sets per application beyond its files
 * (simulator/applications.py); every other setting comes from the files. */
static const struct {
	const char *name;
	double max_local_bsz;
} app_settings[] = {
	{ "yolov3", 8 },
};

void pollux_profiles_init(struct pollux_profiles *p, const char *dir)
{
	memset(p, 0, sizeof(*p));
	p->dir = xstrdup(dir);
}

static void app_free(struct pollux_app *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->ncurves; i++) {
		free(a->curves[i].iterations);
		free(a->curves[i].progress);
		free(a->curves[i].grad_sqr);
		free(a->curves[i].grad_var);
	}
	free(a->curves);
	free(a->steps);
	free(a->name);
	free(a);
}

void pollux_profiles_release(struct pollux_profiles *p)
{
	for (size_t i = 0; i < p->napps; i++)
		app_free(p->apps[i]);
	free(p->apps);
	free(p->dir);
	memset(p, 0, sizeof(*p));
}

/* A decimal number: optional '-', digits with an optional fraction and
 * exponent, nothing else, finite. */
static int parse_real(const char *s, double *out)
{
	const char *p = s;
	char *end;
	bool digits = false;

	if (*p == '-')
		p++;
	while (*p >= '0' && *p <= '9')
		p++, digits = true;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			digits = true;
	if (!digits)
		return -1;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '-' || *p == '+')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return -1;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p)
		return -1;
	*out = strtod(s, &end);
	return end == p && isfinite(*out) ? 0 : -1;
}

/* Field col of the current row as a number >= min; negative with eb naming
 * the file, line and field otherwise. */
static int reader_real(struct csv_reader *r, char **cols, int col, double min, double *out,
		       struct errbuf *eb)
{
	if (parse_real(cols[col], out) < 0)
		return error(eb, YERR(BAD_REQUEST), "'%s' line %zu: field '%s': '%s' is not a number",
			     r->path, r->lineno, r->names[col], cols[col]);
	if (*out < min)
		return error(eb, YERR(BAD_REQUEST), "'%s' line %zu: field '%s': %s is below %g",
			     r->path, r->lineno, r->names[col], cols[col], min);
	return 0;
}

/* Field col as a whole number in [1, max]. */
static int reader_count(struct csv_reader *r, char **cols, int col, uint64_t max, unsigned *out,
			struct errbuf *eb)
{
	uint64_t v;

	if (parse_u64_str(cols[col], &v) < 0 || !v || v > max)
		return error(eb, YERR(BAD_REQUEST),
			     "'%s' line %zu: field '%s': '%s' is not a whole number from 1 to %" PRIu64,
			     r->path, r->lineno, r->names[col], cols[col], max);
	*out = (unsigned)v;
	return 0;
}

/* The step time and sync time columns, checked: 0 <= sync <= step, step > 0. */
static int reader_times(struct csv_reader *r, char **cols, int c_step, int c_sync,
			struct pollux_step *s, struct errbuf *eb)
{
	int rc;

	if ((rc = reader_real(r, cols, c_step, 0, &s->step_time, eb)) < 0 ||
	    (rc = reader_real(r, cols, c_sync, 0, &s->sync_time, eb)) < 0)
		return rc;
	if (s->step_time <= 0 || s->sync_time > s->step_time)
		return error(eb, YERR(BAD_REQUEST),
			     "'%s' line %zu: field '%s': %s must be above 0 and at least sync_time (%s)",
			     r->path, r->lineno, r->names[c_step], cols[c_step], cols[c_sync]);
	return 0;
}

/* placements.csv: a row per (placement, local_bsz). */
static int read_placements(struct pollux_app *a, const char *path, size_t *alloc,
			   struct errbuf *eb)
{
	struct csv_reader r;
	char *cols[CSV_MAX_COLS];
	int c_pl, c_bsz, c_step, c_sync, rc;

	if ((rc = csv_open(&r, path, eb)) < 0)
		return rc;
	if ((rc = c_pl = csv_col(&r, "placement", eb)) < 0 ||
	    (rc = c_bsz = csv_col(&r, "local_bsz", eb)) < 0 ||
	    (rc = c_step = csv_col(&r, "step_time", eb)) < 0 ||
	    (rc = c_sync = csv_col(&r, "sync_time", eb)) < 0)
		goto out;
	while ((rc = csv_next(&r, cols, eb)) > 0) {
		struct pollux_step s;
		const char *pl = cols[c_pl];
		size_t len = strlen(pl);

		memset(&s, 0, sizeof(s));
		if (!len || len >= sizeof(s.placement) || strspn(pl, "123456789") != len) {
			rc = error(eb, YERR(BAD_REQUEST),
				   "'%s' line %zu: field 'placement': '%s' is not 1 to %zu digits "
				   "from 1 to 9 (GPUs on each node)",
				   path, r.lineno, pl, sizeof(s.placement) - 1);
			goto out;
		}
		memcpy(s.placement, pl, len + 1);
		s.nodes = (unsigned)len;
		for (size_t i = 0; i < len; i++)
			s.replicas += (unsigned)(pl[i] - '0');
		if ((rc = reader_real(&r, cols, c_bsz, 1, &s.local_bsz, eb)) < 0 ||
		    (rc = reader_times(&r, cols, c_step, c_sync, &s, eb)) < 0)
			goto out;
		ALLOC_GROW(a->steps, a->nsteps + 1, *alloc);
		a->steps[a->nsteps++] = s;
	}
	if (rc < 0)
		goto out;
	if (!a->nsteps) {
		rc = error(eb, YERR(BAD_REQUEST), "'%s': no rows", path);
		goto out;
	}
	rc = 0;
out:
	csv_close(&r);
	return rc;
}

/* scalability.csv: a row per (num_nodes, num_replicas, local_bsz). */
static int read_scalability(struct pollux_app *a, const char *path, size_t *alloc,
			    struct errbuf *eb)
{
	struct csv_reader r;
	char *cols[CSV_MAX_COLS];
	int c_nodes, c_reps, c_bsz, c_step, c_sync, rc;

	if ((rc = csv_open(&r, path, eb)) < 0)
		return rc;
	if ((rc = c_nodes = csv_col(&r, "num_nodes", eb)) < 0 ||
	    (rc = c_reps = csv_col(&r, "num_replicas", eb)) < 0 ||
	    (rc = c_bsz = csv_col(&r, "local_bsz", eb)) < 0 ||
	    (rc = c_step = csv_col(&r, "step_time", eb)) < 0 ||
	    (rc = c_sync = csv_col(&r, "sync_time", eb)) < 0)
		goto out;
	while ((rc = csv_next(&r, cols, eb)) > 0) {
		struct pollux_step s;

		memset(&s, 0, sizeof(s));
		if ((rc = reader_count(&r, cols, c_nodes, 1000000, &s.nodes, eb)) < 0 ||
		    (rc = reader_count(&r, cols, c_reps, 100000000, &s.replicas, eb)) < 0 ||
		    (rc = reader_real(&r, cols, c_bsz, 1, &s.local_bsz, eb)) < 0 ||
		    (rc = reader_times(&r, cols, c_step, c_sync, &s, eb)) < 0)
			goto out;
		if (s.replicas < s.nodes) {
			rc = error(eb, YERR(BAD_REQUEST),
				   "'%s' line %zu: field 'num_replicas': %u is fewer than the %u nodes",
				   path, r.lineno, s.replicas, s.nodes);
			goto out;
		}
		ALLOC_GROW(a->steps, a->nsteps + 1, *alloc);
		a->steps[a->nsteps++] = s;
	}
	rc = rc < 0 ? rc : 0;
out:
	csv_close(&r);
	return rc;
}

/* Field col as a number >= 0 and not below the row before's (prev, NULL
 * on the first row). */
static int reader_rising(struct csv_reader *r, char **cols, int col, const double *prev,
			 double *out, struct errbuf *eb)
{
	int rc;

	if ((rc = reader_real(r, cols, col, 0, out, eb)) < 0)
		return rc;
	if (prev && *out < *prev)
		return error(eb, YERR(BAD_REQUEST),
			     "'%s' line %zu: field '%s': %s is below the row before's %g", r->path,
			     r->lineno, r->names[col], cols[col], *prev);
	return 0;
}

/* validation-B.csv: the iteration column (and progress, grad_sqr, grad_var
 * where the file has all three), a row an epoch; iteration and progress
 * never decrease. */
static int read_curve(struct pollux_curve *c, const char *path, struct errbuf *eb)
{
	struct csv_reader r;
	char *cols[CSV_MAX_COLS];
	size_t alloc = 0;
	int c_it, c_prog, c_sqr, c_var, rc;
	bool stats;

	if ((rc = csv_open(&r, path, eb)) < 0)
		return rc;
	if ((rc = c_it = csv_col(&r, "iteration", eb)) < 0)
		goto out;
	c_prog = csv_find_col(r.names, r.nnames, "progress");
	c_sqr = csv_find_col(r.names, r.nnames, "grad_sqr");
	c_var = csv_find_col(r.names, r.nnames, "grad_var");
	stats = c_prog >= 0 && c_sqr >= 0 && c_var >= 0;
	while ((rc = csv_next(&r, cols, eb)) > 0) {
		size_t n = c->n;
		const bool first = !n;

		if (n == alloc) { /* the columns grow together */
			alloc = alloc ? 2 * alloc : 16;
			c->iterations = xrealloc(c->iterations, alloc * sizeof(double));
			if (stats) {
				c->progress = xrealloc(c->progress, alloc * sizeof(double));
				c->grad_sqr = xrealloc(c->grad_sqr, alloc * sizeof(double));
				c->grad_var = xrealloc(c->grad_var, alloc * sizeof(double));
			}
		}
		if ((rc = reader_rising(&r, cols, c_it, first ? NULL : &c->iterations[n - 1],
					&c->iterations[n], eb)) < 0)
			goto out;
		if (stats) {
			if ((rc = reader_rising(&r, cols, c_prog, first ? NULL : &c->progress[n - 1],
						&c->progress[n], eb)) < 0 ||
			    (rc = reader_real(&r, cols, c_sqr, 0, &c->grad_sqr[n], eb)) < 0 ||
			    (rc = reader_real(&r, cols, c_var, 0, &c->grad_var[n], eb)) < 0)
				goto out;
		}
		c->n++;
	}
	if (rc < 0)
		goto out;
	if (!c->n) {
		rc = error(eb, YERR(BAD_REQUEST), "'%s': no rows", path);
		goto out;
	}
	rc = 0;
out:
	csv_close(&r);
	return rc;
}

static int cmp_curve(const void *a, const void *b)
{
	const struct pollux_curve *x = a, *y = b;
	return x->batch_size < y->batch_size ? -1 : x->batch_size > y->batch_size;
}

/* Every validation-B.csv in dir, sorted by B. */
static int read_curves(struct pollux_app *a, const char *dir, struct errbuf *eb)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t alloc = 0;
	int rc = 0;

	if (!d)
		return error(eb, YERR(IO), "cannot open '%s': %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		const char *p = e->d_name;
		uint64_t bsz;
		char *path;

		if (strncmp(p, "validation-", 11))
			continue;
		p += 11;
		if (parse_u64(&p, &bsz) < 0 || strcmp(p, ".csv"))
			continue;
		if (!bsz) {
			rc = error(eb, YERR(BAD_REQUEST), "'%s/%s': batch size 0", dir, e->d_name);
			break;
		}
		ALLOC_GROW(a->curves, a->ncurves + 1, alloc);
		memset(&a->curves[a->ncurves], 0, sizeof(a->curves[0]));
		a->curves[a->ncurves].batch_size = bsz;
		path = xasprintf("%s/%s", dir, e->d_name);
		rc = read_curve(&a->curves[a->ncurves], path, eb);
		free(path);
		a->ncurves++;
		if (rc < 0)
			break;
	}
	closedir(d);
	if (rc < 0)
		return rc;
	if (!a->ncurves)
		return error(eb, YERR(BAD_REQUEST), "'%s': no validation-BATCHSIZE.csv files", dir);
	sort_array(a->curves, a->ncurves, sizeof(*a->curves), cmp_curve);
	for (size_t i = 1; i < a->ncurves; i++)
		if (a->curves[i].batch_size == a->curves[i - 1].batch_size)
			return error(eb, YERR(BAD_REQUEST), "'%s': two validation files for batch size %" PRIu64,
				     dir, a->curves[i].batch_size);
	return 0;
}

static int app_load(const char *dir, const char *name, struct pollux_app **out,
		    struct errbuf *eb)
{
	struct pollux_app *a = xcalloc(1, sizeof(*a));
	char *adir = xasprintf("%s/%s", dir, name), *path;
	size_t alloc = 0;
	int rc;

	a->name = xstrdup(name);
	path = xasprintf("%s/placements.csv", adir);
	rc = read_placements(a, path, &alloc, eb);
	free(path);
	if (rc < 0)
		goto out;
	a->nplacements = a->nsteps;
	path = xasprintf("%s/scalability.csv", adir);
	rc = read_scalability(a, path, &alloc, eb);
	free(path);
	if (rc < 0 || (rc = read_curves(a, adir, eb)) < 0)
		goto out;

	a->init_batch_size = a->curves[0].batch_size;
	a->max_batch_size = a->curves[a->ncurves - 1].batch_size;
	a->max_epochs = a->curves[0].n;
	a->stats = true;
	for (size_t i = 0; i < a->ncurves; i++) {
		if (a->curves[i].n < a->max_epochs)
			a->max_epochs = a->curves[i].n;
		if (!a->curves[i].progress)
			a->stats = false;
	}
	a->min_local_bsz = a->max_local_bsz = a->steps[0].local_bsz;
	for (size_t i = 1; i < a->nplacements; i++) {
		if (a->steps[i].local_bsz < a->min_local_bsz)
			a->min_local_bsz = a->steps[i].local_bsz;
		if (a->steps[i].local_bsz > a->max_local_bsz)
			a->max_local_bsz = a->steps[i].local_bsz;
	}
	for (size_t i = 0; i < ARRAY_SIZE(app_settings); i++)
		if (!strcmp(app_settings[i].name, name))
			a->max_local_bsz = app_settings[i].max_local_bsz;
	rc = 0;
out:
	free(adir);
	if (rc < 0)
		app_free(a);
	else
		*out = a;
	return rc;
}

int pollux_profiles_app(struct pollux_profiles *p, const char *name,
			const struct pollux_app **out, struct errbuf *eb)
{
	struct pollux_app *a;
	int rc;

	for (size_t i = 0; i < p->napps; i++)
		if (!strcmp(p->apps[i]->name, name)) {
			*out = p->apps[i];
			return 0;
		}
	if (!*name || name[0] == '.' || strchr(name, '/'))
		return error(eb, YERR(BAD_REQUEST),
			     "application '%s' is not a folder name in '%s'", name, p->dir);
	if ((rc = app_load(p->dir, name, &a, eb)) < 0)
		return rc;
	ALLOC_GROW(p->apps, p->napps + 1, p->alloc);
	p->apps[p->napps++] = a;
	*out = a;
	return 0;
}

/* One profiled point: a local batch size and its times. */
struct point {
	double x, step, sync;
};

static int cmp_point(const void *a, const void *b)
{
	const struct point *x = a, *y = b;
	return x->x < y->x ? -1 : x->x > y->x;
}

/* The step and sync time at local batch size x, linear between the points
 * around it (points with the same x averaged). -1 when x is outside them. */
static int interpolate(struct point *pts, size_t n, double x, double *step, double *sync)
{
	size_t m = 0;

	sort_array(pts, n, sizeof(*pts), cmp_point);
	for (size_t i = 0; i < n;) {
		size_t j = i, k;
		struct point sum = { pts[i].x, 0, 0 };
		for (; j < n && pts[j].x == pts[i].x; j++) {
			sum.step += pts[j].step;
			sum.sync += pts[j].sync;
		}
		k = j - i;
		sum.step /= (double)k;
		sum.sync /= (double)k;
		pts[m++] = sum;
		i = j;
	}
	if (!m || x < pts[0].x || x > pts[m - 1].x)
		return -1;
	for (size_t i = 0; i < m; i++) {
		if (pts[i].x == x) {
			*step = pts[i].step;
			*sync = pts[i].sync;
			return 0;
		}
		if (pts[i].x > x) {
			double f = (x - pts[i - 1].x) / (pts[i].x - pts[i - 1].x);
			*step = pts[i - 1].step + f * (pts[i].step - pts[i - 1].step);
			*sync = pts[i - 1].sync + f * (pts[i].sync - pts[i - 1].sync);
			return 0;
		}
	}
	return -1;
}

/* The step and sync time of local batch size bsz on placement pl (digits)
 * of nodes and replicas: from placements.csv's rows for pl if it has any,
 * else from every row of that many nodes and replicas in either file. */
static int step_time(const struct pollux_app *a, const char *pl, unsigned nodes,
		     unsigned replicas, double bsz, double *step, double *sync, struct errbuf *eb)
{
	struct point *pts = xcalloc(a->nsteps + 1, sizeof(*pts));
	size_t n = 0;
	int rc = 0;
	bool by_placement = false;

	for (size_t i = 0; *pl && i < a->nplacements; i++)
		if (!strcmp(a->steps[i].placement, pl))
			pts[n++] = (struct point){ a->steps[i].local_bsz, a->steps[i].step_time,
						   a->steps[i].sync_time };
	by_placement = n > 0;
	for (size_t i = 0; !by_placement && i < a->nsteps; i++)
		if (a->steps[i].nodes == nodes && a->steps[i].replicas == replicas)
			pts[n++] = (struct point){ a->steps[i].local_bsz, a->steps[i].step_time,
						   a->steps[i].sync_time };
	if (!n)
		rc = error(eb, YERR(BAD_REQUEST),
			   "application '%s': no step time profiled for placement '%s' nor for "
			   "%u nodes with %u GPUs in placements.csv or scalability.csv",
			   a->name, pl, nodes, replicas);
	else if (interpolate(pts, n, bsz, step, sync) < 0)
		rc = error(eb, YERR(BAD_REQUEST),
			   "application '%s': local batch size %g is outside the ones profiled for %s "
			   "'%s' (%g to %g)",
			   a->name, bsz, by_placement ? "placement" : "nodes x GPUs",
			   by_placement ? pl : "", pts[0].x, pts[n - 1].x);
	free(pts);
	return rc;
}

/* The validated batch sizes around bsz (*lo == *hi when it is one). */
static int bracket(const struct pollux_app *a, uint64_t bsz, const struct pollux_curve **lo,
		   const struct pollux_curve **hi, struct errbuf *eb)
{
	*lo = *hi = NULL;
	for (size_t i = 0; i < a->ncurves; i++) {
		if (a->curves[i].batch_size <= bsz)
			*lo = &a->curves[i];
		if (a->curves[i].batch_size >= bsz) {
			*hi = &a->curves[i];
			break;
		}
	}
	if (!*lo || !*hi)
		return error(eb, YERR(BAD_REQUEST),
			     "application '%s': batch size %" PRIu64 " is outside the validated ones "
			     "(%" PRIu64 " to %" PRIu64 ")",
			     a->name, bsz, a->init_batch_size, a->max_batch_size);
	return 0;
}

/* The value at bsz, linear between lo's v_lo and hi's v_hi. */
static double lerp(const struct pollux_curve *lo, const struct pollux_curve *hi, uint64_t bsz,
		   double v_lo, double v_hi)
{
	if (lo == hi)
		return v_lo;
	return ((double)(bsz - lo->batch_size) * v_hi + (double)(hi->batch_size - bsz) * v_lo) /
	       (double)(hi->batch_size - lo->batch_size);
}

/* The artifact's progress at the start of epoch e: the least any curve made
 * by the end of epoch e - 1. */
static double progress_at(const struct pollux_app *a, size_t e)
{
	double p = 0;

	for (size_t i = 0; e && i < a->ncurves; i++)
		if (i == 0 || a->curves[i].progress[e - 1] < p)
			p = a->curves[i].progress[e - 1];
	return p;
}

/* The work of the artifact's own stepping in iterations of out's length:
 * each epoch's progress divided by the statistical efficiency ("gain") of
 * out->batch_size in that epoch, from the gradient statistics linear
 * between the validated batch sizes. */
static int progress_work(const struct pollux_app *a, const struct pollux_curve *lo,
			 const struct pollux_curve *hi, uint64_t bsz, double *out,
			 struct errbuf *eb)
{
	double scale = (double)bsz / (double)a->init_batch_size, work = 0;

	for (size_t e = 0; e < a->max_epochs; e++) {
		double sqr = lerp(lo, hi, bsz, lo->grad_sqr[e], hi->grad_sqr[e]);
		double var = lerp(lo, hi, bsz, lo->grad_var[e], hi->grad_var[e]);
		double gain;

		if (!(var / scale + sqr > 0))
			return error(eb, YERR(BAD_REQUEST),
				     "application '%s': grad_sqr and grad_var of epoch %zu are both 0",
				     a->name, e);
		gain = (var + sqr) / (var / scale + sqr);
		work += (progress_at(a, e + 1) - progress_at(a, e)) / gain;
	}
	*out = work;
	return 0;
}

/* ceil(x / y) for the artifact's float arithmetic (a hair below whole
 * numbers rounds down). */
static double ceil_div(double x, double y)
{
	return ceil(x / y - 1e-8);
}

/* The packed spread of replicas on nodes of gpn, as the smallest rotation
 * of its digits (the rest, then the full nodes): "" when it has more nodes
 * than digits fit or gpn > 9. */
static unsigned packed(unsigned replicas, unsigned gpn, char *pl, size_t size)
{
	unsigned full = replicas / gpn, rest = replicas % gpn, nodes = full + (rest > 0);
	size_t k = 0;

	pl[0] = '\0';
	if (gpn > 9 || nodes >= size)
		return nodes;
	if (rest)
		pl[k++] = (char)('0' + rest);
	for (unsigned i = 0; i < full; i++)
		pl[k++] = (char)('0' + gpn);
	pl[k] = '\0';
	return nodes;
}

int pollux_duration(const struct pollux_app *app, unsigned replicas, unsigned gpus_per_node,
		    uint64_t batch_size, struct pollux_run *out, struct errbuf *eb)
{
	const struct pollux_curve *lo, *hi;
	double local, accum, atomic, cap, step = 0, sync = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!replicas || !gpus_per_node || !batch_size)
		return error(eb, YERR(BAD_REQUEST), "application '%s': GPUs and batch size must be above 0",
			     app->name);
	/* The artifact's fixed-batch rule: the local batch split into as few
	 * accumulation steps as fit the largest profiled local batch (at least
	 * one more step on a single GPU above the smallest validated batch),
	 * the total never above the largest validated batch. */
	local = ceil_div((double)batch_size, replicas);
	accum = ceil_div(local, app->max_local_bsz) - 1;
	if (accum < 0)
		accum = 0;
	if (replicas == 1 && batch_size > app->init_batch_size && accum < 1)
		accum = 1;
	atomic = ceil_div(local, accum + 1);
	cap = floor((double)app->max_batch_size / (replicas * (accum + 1)));
	if (atomic > cap)
		atomic = cap;
	if (atomic < 1)
		return error(eb, YERR(BAD_REQUEST),
			     "application '%s': %u GPUs leave under one example each of the largest "
			     "validated batch size %" PRIu64,
			     app->name, replicas, app->max_batch_size);
	out->accum_steps = (unsigned)accum;
	out->atomic_bsz = (uint64_t)atomic;
	out->batch_size = (uint64_t)replicas * out->atomic_bsz * (out->accum_steps + 1);
	out->nodes = packed(replicas, gpus_per_node, out->placement, sizeof(out->placement));
	if ((rc = step_time(app, out->placement, out->nodes, replicas, atomic, &step, &sync, eb)) < 0)
		return rc;
	out->step_time = step + accum * (step - sync);
	if ((rc = bracket(app, out->batch_size, &lo, &hi, eb)) < 0)
		return rc;
	out->iterations = lerp(lo, hi, out->batch_size, lo->iterations[app->max_epochs - 1],
			       hi->iterations[app->max_epochs - 1]);
	out->seconds = out->iterations * out->step_time;
	if (app->stats) {
		if ((rc = progress_work(app, lo, hi, out->batch_size, &out->progress_iterations,
					eb)) < 0)
			return rc;
		out->progress_seconds = out->progress_iterations * out->step_time;
	}
	return 0;
}
