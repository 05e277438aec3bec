/* Accounting (usage.h). */
#include "base/compat.h"
#include "master/usage.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "master/core.h"

void usage_task_ended(struct task *t, const json_t *r)
{
	const json_t *cpu = json_object_get(r, "cpu_usec"), *mem = json_object_get(r, "memory_peak");

	t->has_cpu = json_is_integer(cpu) && json_integer_value(cpu) >= 0;
	t->cpu_usec = t->has_cpu ? (uint64_t)json_integer_value(cpu) : 0;
	t->has_memory_peak = json_is_integer(mem) && json_integer_value(mem) >= 0;
	t->memory_peak = t->has_memory_peak ? (uint64_t)json_integer_value(mem) : 0;
}

json_t *usage_task_json(const struct task *t)
{
	return json_pack("{s:o, s:o}", "cpu_seconds", t->has_cpu ? json_real((double)t->cpu_usec / 1e6) : json_null(),
			 "memory_peak", t->has_memory_peak ? json_integer((json_int_t)t->memory_peak) : json_null());
}

struct row {
	const char *key;
	uint64_t jobs, tasks, last_job, memory_peak;
	double gpu_s, cpu_s;
	bool has_memory_peak;
};

static int by_gpu_seconds(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->gpu_s != y->gpu_s)
		return x->gpu_s < y->gpu_s ? 1 : -1;
	return strcmp(x->key, y->key);
}

/* Microseconds of [a, b) inside [lo, hi). */
static uint64_t overlap(uint64_t a, uint64_t b, uint64_t lo, uint64_t hi)
{
	uint64_t s = a > lo ? a : lo, e = b < hi ? b : hi;
	return e > s ? e - s : 0;
}

static struct row *row_of(struct row **rows, size_t *n, size_t *alloc, const char *key)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*rows)[i].key, key))
			return &(*rows)[i];
	ALLOC_GROW(*rows, *n + 1, *alloc);
	memset(&(*rows)[*n], 0, sizeof(**rows));
	(*rows)[*n].key = key;
	return &(*rows)[(*n)++];
}

static json_t *series(const struct usage_run *runs, size_t n, uint64_t since, uint64_t until, uint64_t step)
{
	json_t *buckets = json_array();

	for (uint64_t lo = since; lo < until; lo += step) {
		uint64_t hi = lo + step < until ? lo + step : until;
		json_t *vals = json_object();
		for (size_t i = 0; i < n; i++) {
			uint64_t us = overlap(runs[i].start, runs[i].end, lo, hi);
			json_t *v = json_object_get(vals, runs[i].key);
			if (!us || !runs[i].ngpus)
				continue;
			json_object_set_new(vals, runs[i].key,
					    json_real((v ? json_real_value(v) : 0) + (double)runs[i].ngpus * (double)us / 1e6));
		}
		json_array_append_new(buckets, json_pack("{s:I, s:o}", "start", (json_int_t)lo, "gpu_seconds", vals));
	}
	return buckets;
}

int usage_report(const struct usage_run *runs, size_t n, uint64_t since, uint64_t until, uint64_t step,
		 json_t **rows_out, json_t **buckets, struct errbuf *eb)
{
	struct row *rows = NULL;
	size_t nrows = 0, arows = 0;

	*rows_out = *buckets = NULL;
	if (step && (until - since) / step >= USAGE_BUCKETS_MAX)
		return error_field(eb, YERR(BAD_REQUEST), "step", "step: %" PRIu64 " s makes more than %d buckets "
				   "of the window", step / 1000000, USAGE_BUCKETS_MAX);
	for (size_t i = 0; i < n; i++) {
		const struct usage_run *u = &runs[i];
		uint64_t us = overlap(u->start, u->end, since, until), run = u->end > u->start ? u->end - u->start : 0;
		struct row *r;
		if (!us && !(u->start == u->end && u->start >= since && u->start < until))
			continue; /* outside the window (a run of no length inside it still counts as a task) */
		r = row_of(&rows, &nrows, &arows, u->key);
		r->tasks++;
		if (r->last_job != u->job)
			r->jobs++;
		r->last_job = u->job;
		r->gpu_s += (double)u->ngpus * (double)us / 1e6;
		if (u->ended && u->has_cpu)
			r->cpu_s += (double)u->cpu_usec / 1e6 * (run ? (double)us / (double)run : 1);
		if (u->ended && u->has_memory_peak && u->memory_peak >= r->memory_peak) {
			r->memory_peak = u->memory_peak;
			r->has_memory_peak = true;
		}
	}
	sort_array(rows, nrows, sizeof(*rows), by_gpu_seconds);
	*rows_out = json_array();
	for (size_t i = 0; i < nrows; i++)
		json_array_append_new(*rows_out, json_pack("{s:s, s:I, s:I, s:f, s:f, s:o}", "key", rows[i].key,
							   "jobs", (json_int_t)rows[i].jobs, "tasks",
							   (json_int_t)rows[i].tasks, "gpu_seconds", rows[i].gpu_s,
							   "cpu_seconds", rows[i].cpu_s, "memory_peak",
							   rows[i].has_memory_peak ? json_integer((json_int_t)rows[i].memory_peak)
										   : json_null()));
	free(rows);
	if (step)
		*buckets = series(runs, n, since, until, step);
	return 0;
}
