/*
 * Trace readers for the simulator: CSV files with a header line, read as
 * they are published upstream and bundled in traces/ (traces/README.md).
 */
#include "base/compat.h"
#include "sim/sim.h"

#include <math.h>

#include "base/parse.h"
#include "base/xalloc.h"
#include "sim/csv.h"
#include "sim/pollux.h"

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
	/* a year past 9999 would overflow the day count (fuzz_trace) */
	if (*p || v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[0] < 1970 || v[0] > 9999 ||
	    v[3] > 23 || v[4] > 59 || v[5] > 60)
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
	char *line = NULL, *names[CSV_MAX_COLS], *cols[CSV_MAX_COLS], *header = NULL;
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
	nnames = csv_split(header, names, CSV_MAX_COLS);
	if (fmt == SIM_FORMAT_POLLUX) {
		error(eb, YERR(BAD_REQUEST), "'%s': " SIM_POLLUX_NEEDS_PROFILES, path);
		goto out;
	}
	if (fmt == SIM_FORMAT_TIRESIAS) {
		c_gpus = csv_find_col(names, nnames, "num_gpu");
		c_submit = csv_find_col(names, nnames, "submit_time");
	} else {
		c_gpus = csv_find_col(names, nnames, "num_gpus");
		c_submit = csv_find_col(names, nnames, "submit_time");
		if (c_submit < 0) /* the upstream philly_jobs.csv: wall-clock timestamps */
			c_ts = csv_find_col(names, nnames, "timestamp");
	}
	c_dur = csv_find_col(names, nnames, "duration");
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
		n = csv_split(line, cols, CSV_MAX_COLS);
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
	sort_array(out->jobs, out->njobs, sizeof(*out->jobs), cmp_submit);
	rc = 0;
out:
	if (rc)
		sim_trace_release(out);
	free(line);
	free(header);
	fclose(f);
	return rc;
}

int sim_trace_load_pollux(const char *path, const char *profiles, unsigned gpus_per_node,
			  int model, struct sim_trace *out, struct errbuf *eb)
{
	struct pollux_profiles prof;
	struct csv_reader r;
	char *cols[CSV_MAX_COLS];
	int c_time, c_app, c_reps, c_bsz, rc;

	memset(out, 0, sizeof(*out));
	if (csv_open(&r, path, eb))
		return -1;
	pollux_profiles_init(&prof, profiles);
	if ((c_time = csv_col(&r, "time", eb)) < 0 || (c_app = csv_col(&r, "application", eb)) < 0 ||
	    (c_reps = csv_col(&r, "num_replicas", eb)) < 0 ||
	    (c_bsz = csv_col(&r, "batch_size", eb)) < 0) {
		rc = -1;
		goto out;
	}
	while ((rc = csv_next(&r, cols, eb)) > 0) {
		const struct pollux_app *app;
		struct pollux_run run;
		struct errbuf why = ERRBUF_INIT;
		uint64_t submit, reps, bsz;
		size_t lineno = r.lineno;
		double secs;

		rc = -1;
		if (parse_seconds(cols[c_time], &submit) < 0) {
			error(eb, YERR(BAD_REQUEST), "'%s' line %zu: field 'time': '%s' is not seconds",
			      path, lineno, cols[c_time]);
			goto out;
		}
		if (parse_u64_str(cols[c_reps], &reps) < 0 || !reps || reps > UINT_MAX) {
			error(eb, YERR(BAD_REQUEST),
			      "'%s' line %zu: field 'num_replicas': '%s' is not a GPU count above 0",
			      path, lineno, cols[c_reps]);
			goto out;
		}
		if (parse_u64_str(cols[c_bsz], &bsz) < 0 || !bsz) {
			error(eb, YERR(BAD_REQUEST),
			      "'%s' line %zu: field 'batch_size': '%s' is not a batch size above 0",
			      path, lineno, cols[c_bsz]);
			goto out;
		}
		if (pollux_profiles_app(&prof, cols[c_app], &app, &why) < 0 ||
		    pollux_duration(app, (unsigned)reps, gpus_per_node, bsz, &run, &why) < 0) {
			error(eb, why.code, "'%s' line %zu: %s", path, lineno, why.msg);
			goto out;
		}
		if (model == POLLUX_MODEL_PROGRESS && !app->stats) {
			error(eb, YERR(BAD_REQUEST),
			      "'%s' line %zu: application '%s': the progress model needs the columns "
			      "progress, grad_sqr and grad_var in every validation file of '%s/%s'",
			      path, lineno, app->name, profiles, app->name);
			goto out;
		}
		secs = model == POLLUX_MODEL_PROGRESS ? run.progress_seconds : run.seconds;
		ALLOC_GROW(out->jobs, out->njobs + 1, out->alloc);
		out->jobs[out->njobs].id = out->njobs;
		out->jobs[out->njobs].submit = submit;
		/* whole seconds, as the replay's clock; at least one */
		out->jobs[out->njobs].duration = secs < 1 ? 1 : (uint64_t)llround(secs);
		out->jobs[out->njobs].gpus = (unsigned)reps;
		out->njobs++;
	}
	if (rc < 0)
		goto out;
	sort_array(out->jobs, out->njobs, sizeof(*out->jobs), cmp_submit);
	rc = 0;
out:
	if (rc)
		sim_trace_release(out);
	pollux_profiles_release(&prof);
	csv_close(&r);
	return rc;
}

void sim_trace_release(struct sim_trace *t)
{
	free(t->jobs);
	memset(t, 0, sizeof(*t));
}
