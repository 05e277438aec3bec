/* Training metrics at the master: agent batches in, series out. */
#include "base/compat.h"
#include "master/metrics.h"

#include <math.h>

#include "base/clock.h"
#include "base/xalloc.h"
#include "common/metricparse.h"
#include "master/experiments.h"
#include "master/http.h"

/* ---- POST /v1/tasks/{id}/metrics ---- */

/* Per series of one batch: the largest step known so far. Open addressing
 * over the batch's names, so that a batch costs O(points). */
struct step_slot {
	const char *name;  /* borrowed from the batch, NULL: empty slot */
	int64_t last;      /* largest step of the series seen, -1: none */
	bool loaded;       /* last includes what the store held */
};

struct step_map {
	struct step_slot *slots;
	size_t cap;        /* a power of two, at least twice the points */
};

static struct step_slot *step_slot(struct step_map *map, const char *name)
{
	uint64_t h = 1469598103934665603ULL;

	for (const char *c = name; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ULL;
	for (size_t i = (size_t)h & (map->cap - 1);; i = (i + 1) & (map->cap - 1)) {
		struct step_slot *s = &map->slots[i];
		if (!s->name) {
			s->name = name;
			s->last = -1;
			return s;
		}
		if (!strcmp(s->name, name))
			return s;
	}
}

/* Checks points[i] of the body and fills pt (step -1 when it has none). */
static int check_point(const json_t *jp, size_t i, struct store_metric *pt, struct errbuf *eb)
{
	const json_t *name = json_object_get(jp, "name"), *step = json_object_get(jp, "step");
	const json_t *value = json_object_get(jp, "value"), *time = json_object_get(jp, "time");
	char field[48];

	snprintf(field, sizeof(field), "points[%zu]", i);
	if (!json_is_object(jp))
		return error_field(eb, YERR(BAD_REQUEST), field, "%s: expected an object", field);
	if (!json_is_string(name) || strlen(json_string_value(name)) != json_string_length(name) ||
	    !metric_name_valid(json_string_value(name), json_string_length(name)))
		return error_field(eb, YERR(BAD_REQUEST), field, "%s.name: expected 1..%d bytes without "
				   "control characters", field, METRIC_NAME_MAX);
	if (step && !json_is_null(step) && !(json_is_integer(step) && json_integer_value(step) >= 0))
		return error_field(eb, YERR(BAD_REQUEST), field, "%s.step: expected an integer >= 0 or null",
				   field);
	if (!json_is_number(value) || !isfinite(json_number_value(value)))
		return error_field(eb, YERR(BAD_REQUEST), field, "%s.value: expected a number", field);
	if (time && !(json_is_integer(time) && json_integer_value(time) >= 0))
		return error_field(eb, YERR(BAD_REQUEST), field, "%s.time: expected an integer >= 0", field);
	pt->name = json_string_value(name);
	pt->step = json_is_integer(step) ? (int64_t)json_integer_value(step) : -1;
	pt->value = json_number_value(value);
	pt->time = time ? (int64_t)json_integer_value(time) : (int64_t)wall_us();
	return 0;
}

/* Gives each point without a step its series' largest step + 1. */
static int assign_steps(struct master *m, uint64_t task_id, struct store_metric *pts, size_t n,
			struct errbuf *eb)
{
	struct step_map map = { NULL, 16 };
	int ret = 0;

	while (map.cap < 2 * n)
		map.cap *= 2;
	map.slots = xcalloc(map.cap, sizeof(*map.slots));
	for (size_t i = 0; i < n; i++) {
		struct step_slot *s = step_slot(&map, pts[i].name);
		if (pts[i].step < 0) {
			if (!s->loaded) {
				int64_t stored;
				ret = m->sops->metrics_last_step(m->store, task_id, pts[i].name, &stored, eb);
				if (ret)
					break;
				if (stored > s->last)
					s->last = stored;
				s->loaded = true;
			}
			pts[i].step = s->last == INT64_MAX ? INT64_MAX : s->last + 1;
		}
		if (pts[i].step > s->last)
			s->last = pts[i].step;
	}
	free(map.slots);
	return ret;
}

int metrics_post(struct master *m, const struct task *t, enum log_stream s, uint64_t offset,
		 const json_t *body, uint64_t *stored, struct errbuf *eb)
{
	const json_t *jend = json_object_get(body, "end"), *jpts = json_object_get(body, "points");
	struct store_metric *pts = NULL;
	uint64_t end;
	size_t n;
	int ret;

	*stored = 0;
	if (!json_is_integer(jend) || json_integer_value(jend) < 0 ||
	    (uint64_t)json_integer_value(jend) <= offset)
		return error_field(eb, YERR(BAD_REQUEST), "end", "end: expected an integer > offset %" PRIu64,
				   offset);
	end = (uint64_t)json_integer_value(jend);
	if (!json_is_array(jpts))
		return error_field(eb, YERR(BAD_REQUEST), "points", "points: expected an array");
	n = json_array_size(jpts);
	if (n > METRICS_POST_MAX)
		return error_field(eb, YERR(BAD_REQUEST), "points", "points: at most %d in one request",
				   METRICS_POST_MAX);
	pts = xcalloc(n + 1, sizeof(*pts));
	for (size_t i = 0; i < n; i++) {
		ret = check_point(json_array_get(jpts, i), i, &pts[i], eb);
		if (ret)
			goto out;
	}
	ret = m->sops->metrics_cursor_get(m->store, t->id, (int)s, stored, eb);
	if (ret)
		goto out;
	if (offset != *stored) {
		/* a resend of what is stored is acknowledged; anything else is out of step */
		if (offset > *stored || end > *stored)
			ret = error(eb, YERR(CONFLICT), "metrics of task %" PRIu64 " %s: the batch [%" PRIu64
				    ", %" PRIu64 ") does not start at the stored offset %" PRIu64, t->id,
				    log_stream_name(s), offset, end, *stored);
		goto out;
	}
	ret = core_batch_open(m);
	if (ret) {
		*eb = m->batch_eb;
		goto out;
	}
	ret = assign_steps(m, t->id, pts, n, eb);
	if (!ret)
		ret = m->sops->metrics_append(m->store, t->id, pts, n, eb);
	if (!ret)
		ret = m->sops->metrics_cursor_set(m->store, t->id, (int)s, end, eb);
	if (ret) {
		/* the batch is spoilt: its commit fails and rolls all of it back */
		m->batch_err = ret;
		m->batch_eb = *eb;
		goto out;
	}
	*stored = end;
	experiments_observe(m, t, pts, n);
out:
	free(pts);
	return ret;
}

/* ---- GET /v1/jobs/{id}/metrics ---- */

/* A JSON number that reads back as the same double: 15 digits when they do
 * (what people print: 0.295, not 0.29499999999999998), else 17, which always
 * do. Formatting is most of the cost of a large document. */
static void add_double(struct strbuf *out, double v)
{
	char buf[40];

	snprintf(buf, sizeof(buf), "%.15g", v);
	if (strtod(buf, NULL) != v)
		snprintf(buf, sizeof(buf), "%.17g", v);
	strbuf_addstr(out, buf);
}

/* Writing the series of one task as its points stream out of the store. */
struct series_writer {
	struct strbuf *out;
	const struct task *t;
	char *name;          /* owned: the series being written, NULL before the first */
	bool any;            /* a series of the document was written */
};

static int write_point(void *ctx, const struct store_metric *pt)
{
	struct series_writer *w = ctx;
	struct strbuf *out = w->out;

	if (!w->name || strcmp(w->name, pt->name)) {
		if (w->name)
			strbuf_addstr(out, "]}");
		free(w->name);
		w->name = xstrdup(pt->name);
		strbuf_addstr(out, w->any ? ",\n{\"task\":" : "\n{\"task\":");
		w->any = true;
		{
			char *task = xasprintf("%s/%u", w->t->role, w->t->index);
			http_json_string(out, task);
			free(task);
		}
		strbuf_addf(out, ",\"task_id\":%" PRIu64 ",\"attempt\":%u,\"name\":", w->t->id,
			    w->t->attempt);
		http_json_string(out, pt->name);
		strbuf_addstr(out, ",\"points\":[");
	} else {
		strbuf_addch(out, ',');
	}
	strbuf_addf(out, "[%" PRId64 ",", pt->step);
	add_double(out, pt->value);
	strbuf_addf(out, ",%" PRId64 "]", pt->time);
	return 0;
}

/* Tasks in the order of the spec's roles and indexes, then by attempt: the
 * first attempt lists every role/index in spec order. */
struct task_order {
	const struct task *t;
	size_t first;        /* position of the first task of this role/index */
};

static int by_task(const void *a, const void *b)
{
	const struct task_order *x = a, *y = b;

	if (x->first != y->first)
		return x->first < y->first ? -1 : 1;
	if (x->t->attempt != y->t->attempt)
		return x->t->attempt < y->t->attempt ? -1 : 1;
	return (x->t->id > y->t->id) - (x->t->id < y->t->id);
}

int metrics_job_doc(struct master *m, const struct job *j, const char *role, unsigned index,
		    const char *name, struct strbuf *out, struct errbuf *eb)
{
	struct task_order *order = xcalloc(j->ntasks + 1, sizeof(*order));
	struct series_writer w = { out, NULL, NULL, false };
	size_t n = 0;
	int ret = 0;

	for (size_t i = 0; i < j->ntasks; i++) {
		const struct task *t = j->tasks[i];
		size_t first = i;
		if (role && (strcmp(t->role, role) || t->index != index))
			continue;
		for (size_t k = 0; k < i; k++)
			if (!strcmp(j->tasks[k]->role, t->role) && j->tasks[k]->index == t->index) {
				first = k;
				break;
			}
		order[n++] = (struct task_order){ t, first };
	}
	sort_array(order, n, sizeof(*order), by_task);
	strbuf_addf(out, "{\"job\":%" PRIu64 ",\"series\":[", j->id);
	for (size_t i = 0; i < n && !ret; i++) {
		w.t = order[i].t;
		ret = m->sops->metrics_query(m->store, w.t->id, name, write_point, &w, eb);
		if (w.name)
			strbuf_addstr(out, "]}");
		free(w.name);
		w.name = NULL;
	}
	strbuf_addstr(out, w.any ? "\n]}\n" : "]}\n");
	free(order);
	return ret;
}
