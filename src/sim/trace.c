/*
 * Trace readers for the simulator: CSV files with a header line, read as
 * they are published in ../shared/traces/.
 */
#include "base/compat.h"
#include "sim/sim.h"

#include "base/parse.h"
#include "base/xalloc.h"

#define MAX_COLS 32

int sim_format_parse(const char *name)
{
	if (!strcmp(name, "tiresias"))
		return SIM_FORMAT_TIRESIAS;
	if (!strcmp(name, "philly"))
		return SIM_FORMAT_PHILLY;
	if (!strcmp(name, "pollux"))
		return SIM_FORMAT_POLLUX;
	return -1;
}

/* split line (modified in place) at commas into at most MAX_COLS fields */
static size_t split(char *line, char **cols)
{
	size_t n = 0;
	char *p = line;

	line[strcspn(line, "\r\n")] = '\0';
	cols[n++] = p;
	while ((p = strchr(p, ',')) && n < MAX_COLS) {
		*p++ = '\0';
		cols[n++] = p;
	}
	return n;
}

static int find_col(char **names, size_t n, const char *want)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], want))
			return (int)i;
	return -1;
}

/* A number of seconds: digits, optionally a fraction (truncated). */
static int parse_seconds(const char *s, uint64_t *out)
{
	const char *p = s;

	if (parse_u64(&p, out) < 0)
		return -1;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return *p ? -1 : 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
 * days_from_civil algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

/* "YYYY-MM-DD HH:MM:SS" to seconds since the epoch (UTC). */
static int parse_timestamp(const char *s, uint64_t *out)
{
	uint64_t v[6];
	const char seps[] = "-- ::";
	const char *p = s;

	for (int i = 0; i < 6; i++) {
		if (parse_u64(&p, &v[i]) < 0)
			return -1;
		if (i < 5 && *p++ != seps[i])
			return -1;
	}
	if (*p || v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[0] < 1970)
		return -1;
	*out = (uint64_t)days_from_civil((int64_t)v[0], (unsigned)v[1], (unsigned)v[2]) * 86400 +
	       v[3] * 3600 + v[4] * 60 + v[5];
	return 0;
}

static int cmp_submit(const void *a, const void *b)
{
	const struct sim_job *x = a, *y = b;

	if (x->submit != y->submit)
		return x->submit < y->submit ? -1 : 1;
	/* the loader numbers rows in file order: a stable sort */
	return x->id < y->id ? -1 : x->id > y->id;
}

int sim_trace_load(const char *path, enum sim_format fmt, struct sim_trace *out,
		   struct errbuf *eb)
{
	FILE *f = fopen(path, "r");
	char *line = NULL, *names[MAX_COLS], *cols[MAX_COLS], *header = NULL;
	size_t cap = 0, nnames, lineno = 1;
	int c_gpus, c_submit, c_dur, c_ts = -1, rc = -1;
	uint64_t first = UINT64_MAX;

	memset(out, 0, sizeof(*out));
	if (!f)
		return error(eb, YERR(IO), "cannot open '%s': %s", path, strerror(errno));
	if (getline(&line, &cap, f) < 0) {
		error(eb, YERR(BAD_REQUEST), "'%s': empty file", path);
		goto out;
	}
	header = xstrdup(line);
	nnames = split(header, names);
	if (fmt == SIM_FORMAT_POLLUX) {
		error(eb, YERR(BAD_REQUEST),
		      "'%s': pollux workloads have no durations (job length comes from the "
		      "Pollux throughput model), which yard sim does not model yet",
		      path);
		goto out;
	}
	if (fmt == SIM_FORMAT_TIRESIAS) {
		c_gpus = find_col(names, nnames, "num_gpu");
		c_submit = find_col(names, nnames, "submit_time");
	} else {
		c_gpus = find_col(names, nnames, "num_gpus");
		c_submit = find_col(names, nnames, "submit_time");
		if (c_submit < 0) /* the upstream philly_jobs.csv: wall-clock timestamps */
			c_ts = find_col(names, nnames, "timestamp");
	}
	c_dur = find_col(names, nnames, "duration");
	if (c_gpus < 0 || (c_submit < 0 && c_ts < 0) || c_dur < 0) {
		error(eb, YERR(BAD_REQUEST), "'%s': header lacks the %s columns", path,
		      fmt == SIM_FORMAT_TIRESIAS ? "num_gpu, submit_time, duration"
						 : "num_gpus, submit_time (or timestamp), duration");
		goto out;
	}
	while (getline(&line, &cap, f) >= 0) {
		size_t n;
		uint64_t gpus, submit, dur;
		int cmax = c_gpus > c_dur ? c_gpus : c_dur;

		lineno++;
		if (line[0] == '\n' || line[0] == '\0')
			continue;
		n = split(line, cols);
		cmax = (c_submit > cmax ? c_submit : cmax) > c_ts ? (c_submit > cmax ? c_submit : cmax)
								   : c_ts;
		if ((int)n <= cmax) {
			error(eb, YERR(BAD_REQUEST), "'%s' line %zu: %zu fields, expected %zu", path,
			      lineno, n, nnames);
			goto out;
		}
		if (parse_u64_str(cols[c_gpus], &gpus) < 0 || gpus > UINT_MAX ||
		    parse_seconds(cols[c_dur], &dur) < 0 ||
		    (c_submit >= 0 ? parse_seconds(cols[c_submit], &submit)
				   : parse_timestamp(cols[c_ts], &submit)) < 0) {
			error(eb, YERR(BAD_REQUEST), "'%s' line %zu: bad number", path, lineno);
			goto out;
		}
		ALLOC_GROW(out->jobs, out->njobs + 1, out->alloc);
		out->jobs[out->njobs].id = out->njobs;
		out->jobs[out->njobs].submit = submit;
		out->jobs[out->njobs].duration = dur;
		out->jobs[out->njobs].gpus = (unsigned)gpus;
		out->njobs++;
		if (submit < first)
			first = submit;
	}
	if (ferror(f)) {
		error(eb, YERR(IO), "cannot read '%s': %s", path, strerror(errno));
		goto out;
	}
	if (c_ts >= 0)
		for (size_t i = 0; i < out->njobs; i++)
			out->jobs[i].submit -= first;
	qsort(out->jobs, out->njobs, sizeof(*out->jobs), cmp_submit);
	rc = 0;
out:
	if (rc)
		sim_trace_release(out);
	free(line);
	free(header);
	fclose(f);
	return rc;
}

void sim_trace_release(struct sim_trace *t)
{
	free(t->jobs);
	memset(t, 0, sizeof(*t));
}
