/* Parsing a task's output for metrics and posting them (metricship.h). */
#include "base/compat.h"
#include "agent/metricship.h"

#include <jansson.h>

#include "agent/taskdir.h"
#include "base/clock.h"
#include "base/xalloc.h"
#include "common/metricparse.h"

/* Output is read in chunks that hold any line short enough to be parsed. */
#define READ_CHUNK ((size_t)256 << 10)
/* A batch stops growing at about this much JSON (the master takes 4 MiB). */
#define BATCH_BODY ((size_t)2 << 20)
/* Batches posted per stream by one metric_ship_run, so that one task's flood
 * does not hold up the shipping of the others. */
#define RUN_BATCHES 8

static_assert(READ_CHUNK > METRIC_LINE_MAX, "a chunk holds any line that is parsed");
static_assert(METRIC_BATCH_POINTS > METRIC_LINE_POINTS, "a line fits in a batch");

static const char *const stream_names[2] = { "stdout", "stderr" };

/* One output stream. Offsets are of its file; acked <= scan. */
struct mstream {
	uint64_t acked;                /* the master holds the points of the lines before it */
	struct metric_parser acked_st; /* the parser's state at acked */
	uint64_t scan;                 /* the lines before it are parsed: a line boundary */
	struct metric_parser st;       /* the parser's state at scan */
	uint64_t skip;                 /* > scan: the overlong line at scan is passed over up to here */
	struct metric_points pts;      /* the points of [acked, scan), not yet acknowledged */
	int64_t *times;                /* the wall_us time of each of pts */
	size_t atimes;
	size_t body;                   /* about the JSON size of pts */
	int64_t checkpoint_at;         /* wall_us of its last "checkpoint" point; 0: none */
};

struct metric_ship {
	char *dir;                     /* owned: the task dir */
	int64_t id;
	struct mstream s[2];           /* stdout, stderr */
	char *buf;                     /* owned: READ_CHUNK bytes during a run, else NULL */
};

/* Forgets what was parsed past acked. */
static void rewind_to_acked(struct mstream *s)
{
	s->scan = s->acked;
	s->st = s->acked_st;
	s->skip = 0;
	s->pts.n = 0;
	s->body = 0;
}

static void save(struct metric_ship *ms)
{
	json_t *doc = json_object();

	for (int i = 0; i < 2; i++)
		json_object_set_new(doc, stream_names[i],
				    json_pack("{s:I, s:o}", "offset", (json_int_t)ms->s[i].acked, "parser",
					      metric_parser_save(&ms->s[i].acked_st)));
	if (metric_ship_checkpoint_at(ms))
		json_object_set_new(doc, "checkpoint_at", json_integer(metric_ship_checkpoint_at(ms)));
	/* without fsync: after a power loss the master's cursor (409) says where to go on */
	taskdir_write_json(ms->dir, "metrics.json", doc, 0, NULL);
	json_decref(doc);
}

struct metric_ship *metric_ship_new(const char *dir, int64_t task_id)
{
	struct metric_ship *ms = xcalloc(1, sizeof(*ms));
	json_t *doc = NULL;

	ms->dir = xstrdup(dir);
	ms->id = task_id;
	for (int i = 0; i < 2; i++)
		metric_parser_init(&ms->s[i].acked_st);
	if (taskdir_read_json(dir, "metrics.json", &doc, NULL) == 0) {
		for (int i = 0; i < 2; i++) {
			json_t *sd = json_object_get(doc, stream_names[i]);
			json_t *off = json_object_get(sd, "offset");
			if (json_is_integer(off) && json_integer_value(off) >= 0)
				ms->s[i].acked = (uint64_t)json_integer_value(off);
			metric_parser_load(&ms->s[i].acked_st, json_object_get(sd, "parser"));
		}
		json_t *ck = json_object_get(doc, "checkpoint_at");
		if (json_is_integer(ck) && json_integer_value(ck) > 0)
			ms->s[0].checkpoint_at = json_integer_value(ck);
		json_decref(doc);
	}
	for (int i = 0; i < 2; i++)
		rewind_to_acked(&ms->s[i]);
	return ms;
}

int64_t metric_ship_checkpoint_at(const struct metric_ship *ms)
{
	if (!ms)
		return 0;
	return ms->s[0].checkpoint_at > ms->s[1].checkpoint_at ? ms->s[0].checkpoint_at
							       : ms->s[1].checkpoint_at;
}

void metric_ship_free(struct metric_ship *ms)
{
	if (!ms)
		return;
	for (int i = 0; i < 2; i++) {
		metric_points_release(&ms->s[i].pts);
		free(ms->s[i].times);
	}
	free(ms->buf);
	free(ms->dir);
	free(ms);
}

/* Parses one line; collect: keep its points for the batch, else drop them. */
static void take_line(struct mstream *s, const char *line, size_t len, bool collect, int64_t now)
{
	size_t n0 = s->pts.n;

	metric_parse_line(&s->st, line, len, &s->pts);
	if (!collect) {
		s->pts.n = n0;
		return;
	}
	ALLOC_GROW(s->times, s->pts.n, s->atimes);
	for (size_t i = n0; i < s->pts.n; i++) {
		s->times[i] = now;
		s->body += strlen(s->pts.v[i].name) + 96;
		if (!strcmp(s->pts.v[i].name, "checkpoint") && now > s->checkpoint_at)
			s->checkpoint_at = now;
	}
}

static bool batch_full(const struct mstream *s)
{
	return s->pts.n > METRIC_BATCH_POINTS - METRIC_LINE_POINTS ||
	       s->scan - s->acked >= METRIC_BATCH_BYTES || s->body >= BATCH_BODY;
}

/*
 * Parses the lines of fd from s->scan up to limit. final: a last line that
 * runs up to limit without '\n' counts (the task has finished). collect:
 * keep the points, and stop when the batch is full; else parse only to move
 * the parser's state along. Returns 0, or -1 (errno) when reading fails.
 */
static int scan_lines(struct mstream *s, int fd, char *buf, uint64_t limit, bool final, bool collect)
{
	while (s->scan < limit) {
		if (collect && batch_full(s))
			break;
		if (s->skip > s->scan) {
			/* passing over an overlong line: find its end */
			uint64_t left = limit > s->skip ? limit - s->skip : 0;
			size_t want = left > READ_CHUNK ? READ_CHUNK : (size_t)left;
			ssize_t n;
			const char *nl;
			if (!want) {
				if (final) {
					s->scan = limit;
					s->skip = 0;
				}
				break;
			}
			n = pread(fd, buf, want, (off_t)s->skip);
			if (n <= 0)
				return n < 0 ? -1 : (errno = EIO, -1);
			nl = memchr(buf, '\n', (size_t)n);
			if (nl) {
				s->scan = s->skip + (uint64_t)(nl - buf) + 1;
				s->skip = 0;
			} else {
				s->skip += (uint64_t)n;
			}
			continue;
		}
		uint64_t left = limit - s->scan;
		size_t want = left > READ_CHUNK ? READ_CHUNK : (size_t)left;
		ssize_t n = pread(fd, buf, want, (off_t)s->scan);
		const char *p = buf, *end, *nl = NULL;
		int64_t now = (int64_t)wall_us();
		bool full = false;

		if (n <= 0)
			return n < 0 ? -1 : (errno = EIO, -1);
		end = buf + n;
		while (p < end) {
			if (collect && batch_full(s)) {
				full = true;
				break;
			}
			nl = memchr(p, '\n', (size_t)(end - p));
			if (!nl)
				break;
			if (nl - p <= METRIC_LINE_MAX)
				take_line(s, p, (size_t)(nl - p), collect, now);
			s->scan += (uint64_t)(nl - p) + 1;
			p = nl + 1;
		}
		if (full)
			break;
		if (p == end)
			continue;
		/* a line without its '\n' in this chunk */
		if ((size_t)(end - p) > METRIC_LINE_MAX) {
			s->skip = s->scan + (uint64_t)(end - p);
			continue;
		}
		if (s->scan + (uint64_t)(end - p) == limit) {
			if (final) {
				take_line(s, p, (size_t)(end - p), collect, now);
				s->scan = limit;
			}
			break;
		}
		/* the chunk ended inside the line: read again from its start */
	}
	return 0;
}

/* The read buffer, allocated for the length of one metric_ship_run. */
static char *chunk(struct metric_ship *ms)
{
	if (!ms->buf)
		ms->buf = xmalloc(READ_CHUNK);
	return ms->buf;
}

/* The master holds the points up to target: parse there from what we know. */
static int resync(struct mstream *s, int fd, char *buf, uint64_t target, uint64_t size,
		  bool finished, struct errbuf *eb)
{
	if (target >= s->acked) {
		rewind_to_acked(s);
	} else {
		s->scan = s->skip = 0;
		metric_parser_init(&s->st);
		s->pts.n = 0;
		s->body = 0;
	}
	if (scan_lines(s, fd, buf, target < size ? target : size, finished && target >= size, false)) {
		int e = errno;
		rewind_to_acked(s);
		return error(eb, YERR(IO), "cannot read a task's output: %s", strerror(e));
	}
	s->acked = s->scan = target;
	s->acked_st = s->st;
	s->skip = 0;
	return 0;
}

/* Posts the batch [acked, scan) of stream i. */
static int post(struct metric_ship *ms, int i, int fd, uint64_t size, bool finished,
		struct httpc *c, long *status, struct errbuf *eb)
{
	struct mstream *s = &ms->s[i];
	json_t *pts = json_array(), *body, *doc = NULL, *off;
	struct httpc_response res;
	char *text, *path;
	int ret;

	for (size_t k = 0; k < s->pts.n; k++) {
		const struct metric_point *pt = &s->pts.v[k];
		json_array_append_new(pts, json_pack("{s:s, s:o, s:f, s:I}", "name", pt->name, "step",
						     pt->step >= 0 ? json_integer(pt->step) : json_null(),
						     "value", pt->value, "time", (json_int_t)s->times[k]));
	}
	body = json_pack("{s:I, s:o}", "end", (json_int_t)s->scan, "points", pts);
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	path = xasprintf("/v1/tasks/%" PRId64 "/metrics?stream=%s&offset=%" PRIu64, ms->id,
			 stream_names[i], s->acked);
	httpc_response_init(&res);
	ret = httpc_request(c, "POST", path, text, strlen(text), "application/json", &res, eb);
	free(path);
	free(text);
	if (ret)
		goto out;
	*status = res.status;
	doc = res.body.len ? json_loadb(res.body.buf, res.body.len, 0, NULL) : NULL;
	off = json_object_get(doc, "offset");
	if ((res.status == 200 || res.status == 409) && json_is_integer(off) && json_integer_value(off) >= 0) {
		uint64_t held = (uint64_t)json_integer_value(off);
		*status = 0;
		if (res.status == 200 && held == s->scan) {
			s->acked = s->scan;
			s->acked_st = s->st;
			s->pts.n = 0;
			s->body = 0;
		} else {
			ret = resync(s, fd, chunk(ms), held, size, finished, eb);
		}
		if (!ret)
			save(ms);
	} else if (res.status >= 400) {
		ret = httpc_error_from_reply(&res, eb);
	} else {
		ret = error(eb, YERR(INTERNAL), "task %" PRId64 " metrics: unexpected reply (HTTP %ld)",
			    ms->id, res.status);
	}
out:
	json_decref(doc);
	httpc_response_release(&res);
	return ret;
}

/* Ships what is new in stream i: 1 when all is acknowledged, 0 when more is
 * left, or an error. */
static int run_stream(struct metric_ship *ms, int i, struct httpc *c, bool finished, long *status,
		      struct errbuf *eb)
{
	struct mstream *s = &ms->s[i];
	char *path = xasprintf("%s/%s", ms->dir, stream_names[i]);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	int ret = 0;

	if (fd < 0) {
		ret = errno == ENOENT ? 1 : error(eb, YERR(IO), "cannot open '%s': %s", path, strerror(errno));
		free(path);
		return ret;
	}
	if (fstat(fd, &st)) {
		ret = error(eb, YERR(IO), "cannot stat '%s': %s", path, strerror(errno));
		goto out;
	}
	for (int b = 0; b < RUN_BATCHES; b++) {
		if (s->scan < (uint64_t)st.st_size) {
			if (scan_lines(s, fd, chunk(ms), (uint64_t)st.st_size, finished, true)) {
				ret = error(eb, YERR(IO), "cannot read '%s': %s", path, strerror(errno));
				goto out;
			}
		}
		if (!s->pts.n && s->scan - s->acked < METRIC_BATCH_BYTES)
			break;
		ret = post(ms, i, fd, (uint64_t)st.st_size, finished, c, status, eb);
		if (ret)
			goto out;
	}
	ret = !s->pts.n && s->scan >= (uint64_t)st.st_size;
out:
	close(fd);
	free(path);
	return ret;
}

int metric_ship_run(struct metric_ship *ms, struct httpc *c, bool finished, long *status,
		    struct errbuf *eb)
{
	int done = 1;

	*status = 0;
	for (int i = 0; i < 2; i++) {
		int r = run_stream(ms, i, c, finished, status, eb);
		if (r < 0) {
			done = r;
			break;
		}
		done &= r;
	}
	free(ms->buf);
	ms->buf = NULL;
	return done;
}
