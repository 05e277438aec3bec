/* Metric points in lines of training output (metricparse.h has the grammar). */
#include "base/compat.h"
#include "common/metricparse.h"

#include <math.h>

#include "base/utf8.h"
#include "base/xalloc.h"

/* A bounded cursor over one line: nothing here reads at or past end. */
struct cur {
	const char *p, *end;
};

static bool at_end(const struct cur *c) { return c->p >= c->end; }

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

static bool is_name_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || is_digit(ch) || ch == '_' ||
	       ch == '.' || ch == '/' || ch == '-';
}

/* Consumes lit when the cursor is at it. */
static bool eat(struct cur *c, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n))
		return false;
	c->p += n;
	return true;
}

static void skip_blanks(struct cur *c)
{
	while (!at_end(c) && (*c->p == ' ' || *c->p == '\t'))
		c->p++;
}

/* One or more digits into a non-negative int64 (no overflow). */
static bool eat_count(struct cur *c, int64_t *out)
{
	const char *p = c->p;
	int64_t v = 0;

	if (p >= c->end || !is_digit(*p))
		return false;
	for (; p < c->end && is_digit(*p); p++) {
		if (v > (INT64_MAX - (*p - '0')) / 10)
			return false;
		v = v * 10 + (*p - '0');
	}
	c->p = p;
	*out = v;
	return true;
}

/* A NAME: OUT its start and length. */
static bool eat_name(struct cur *c, const char **name, size_t *len)
{
	const char *p = c->p;

	while (p < c->end && is_name_char(*p))
		p++;
	if (p == c->p)
		return false;
	*name = c->p;
	*len = (size_t)(p - c->p);
	c->p = p;
	return true;
}

/* A NUM (see the header) into *out, which may come out not finite (1e999).
 * Fails, consuming nothing, when the text is not a decimal number. */
static bool eat_number(struct cur *c, double *out)
{
	const char *p = c->p, *e = c->end;
	size_t digits = 0;
	char buf[64];

	if (p < e && (*p == '-' || *p == '+'))
		p++;
	while (p < e && is_digit(*p)) {
		p++;
		digits++;
	}
	if (p < e && *p == '.') {
		p++;
		while (p < e && is_digit(*p)) {
			p++;
			digits++;
		}
	}
	if (!digits)
		return false;
	if (p < e && (*p == 'e' || *p == 'E')) {
		const char *q = p + 1;
		if (q < e && (*q == '-' || *q == '+'))
			q++;
		if (q < e && is_digit(*q)) {
			while (q < e && is_digit(*q))
				q++;
			p = q;
		}
	}
	if (p < e && !strchr(" \t,;)", *p))
		return false;
	if ((size_t)(p - c->p) >= sizeof(buf))
		return false;
	memcpy(buf, c->p, (size_t)(p - c->p));
	buf[p - c->p] = '\0';
	*out = strtod(buf, NULL);
	c->p = p;
	return true;
}

/* The first occurrence of lit in [from, end), or NULL. */
static const char *find(const char *from, const char *end, const char *lit)
{
	if (from >= end)
		return NULL;
	return memmem(from, (size_t)(end - from), lit, strlen(lit));
}

bool metric_name_valid(const char *name, size_t len)
{
	if (!len || len > METRIC_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)name[i] < 0x20 || (unsigned char)name[i] == 0x7f)
			return false;
	return utf8_valid(name, len); /* names are stored and shown as text */
}

/* Appends PREFIX NAME @ step unless the value or the name cannot be a point. */
static size_t emit(struct metric_points *out, const char *prefix, const char *name, size_t len,
		   int64_t step, double value)
{
	size_t plen = prefix ? strlen(prefix) : 0;
	struct metric_point *pt;

	if (!isfinite(value) || plen + len > METRIC_NAME_MAX || !metric_name_valid(name, len))
		return 0;
	ALLOC_GROW(out->v, out->n + 1, out->alloc);
	pt = &out->v[out->n++];
	if (plen)
		memcpy(pt->name, prefix, plen);
	memcpy(pt->name + plen, name, len);
	pt->name[plen + len] = '\0';
	pt->step = step;
	pt->value = value;
	return 1;
}

void metric_points_release(struct metric_points *pts)
{
	free(pts->v);
	pts->v = NULL;
	pts->n = pts->alloc = 0;
}

void metric_parser_init(struct metric_parser *p)
{
	p->caffe_iter = -1;
	p->caffe_loss_step = -1;
	p->caffe_test_net = 0;
	p->mx_epoch = -1;
	p->mx_base = 0;
	p->mx_batch = 0;
}

json_t *metric_parser_save(const struct metric_parser *p)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "caffe_iter", (json_int_t)p->caffe_iter,
			 "caffe_loss_step", (json_int_t)p->caffe_loss_step, "caffe_test_net",
			 (json_int_t)p->caffe_test_net, "mx_epoch", (json_int_t)p->mx_epoch,
			 "mx_base", (json_int_t)p->mx_base, "mx_batch", (json_int_t)p->mx_batch);
}

static void load_i64(const json_t *doc, const char *key, int64_t min, int64_t *out)
{
	const json_t *v = json_object_get(doc, key);

	if (json_is_integer(v) && json_integer_value(v) >= min)
		*out = (int64_t)json_integer_value(v);
}

void metric_parser_load(struct metric_parser *p, const json_t *doc)
{
	int64_t net = 0;

	metric_parser_init(p);
	load_i64(doc, "caffe_iter", -1, &p->caffe_iter);
	load_i64(doc, "caffe_loss_step", -1, &p->caffe_loss_step);
	load_i64(doc, "caffe_test_net", 0, &net);
	p->caffe_test_net = net <= UINT_MAX ? (unsigned)net : 0;
	load_i64(doc, "mx_epoch", -1, &p->mx_epoch);
	load_i64(doc, "mx_base", 0, &p->mx_base);
	load_i64(doc, "mx_batch", 0, &p->mx_batch);
}

/* ---- 1. @yard {json} ---- */

/* The '{' of the first "@yard" + blanks + '{' in the line, or NULL. */
static const char *yard_object(const char *s, const char *end)
{
	for (const char *at = find(s, end, "@yard"); at; at = find(at + 1, end, "@yard")) {
		const char *p = at + 5;
		if (p >= end || (*p != ' ' && *p != '\t'))
			continue;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (p < end && *p == '{')
			return p;
	}
	return NULL;
}

static size_t parse_yard(const char *obj, const char *end, struct metric_points *out)
{
	json_t *doc = json_loadb(obj, (size_t)(end - obj), JSON_DISABLE_EOF_CHECK, NULL);
	json_t *jstep, *v;
	int64_t step = METRIC_NO_STEP;
	const char *key;
	size_t n = 0;

	if (!json_is_object(doc)) {
		json_decref(doc);
		return 0;
	}
	jstep = json_object_get(doc, "step");
	if (json_is_integer(jstep) && json_integer_value(jstep) >= 0)
		step = (int64_t)json_integer_value(jstep);
	json_object_foreach(doc, key, v) {
		if (!strcmp(key, "step") || !json_is_number(v))
			continue;
		n += emit(out, NULL, key, strlen(key), step, json_number_value(v));
	}
	json_decref(doc);
	return n;
}

/* ---- 2. Caffe ---- */

/* "Iteration " at the start of the line or after ' ' or ']'. */
static const char *caffe_iteration(const char *s, const char *end)
{
	for (const char *at = find(s, end, "Iteration "); at; at = find(at + 1, end, "Iteration "))
		if (at == s || at[-1] == ' ' || at[-1] == ']')
			return at;
	return NULL;
}

/* ": NAME = NUM" after "net output #J". */
static bool caffe_output(struct cur *c, const char **name, size_t *len, double *v)
{
	int64_t j;

	return eat_count(c, &j) && eat(c, ": ") && eat_name(c, name, len) && eat(c, " = ") &&
	       eat_number(c, v);
}

static size_t parse_caffe(struct metric_parser *p, const char *s, const char *end,
			  struct metric_points *out)
{
	const char *at = caffe_iteration(s, end), *name, *mark;
	struct cur c;
	size_t len;
	double v;

	if (at) {
		int64_t n, k;
		c = (struct cur){ at + strlen("Iteration "), end };
		if (!eat_count(&c, &n))
			return 0;
		p->caffe_iter = n;
		if (eat(&c, " (")) {
			const char *close = memchr(c.p, ')', (size_t)(c.end - c.p));
			if (!close)
				return 0;
			c.p = close + 1;
		}
		if (!eat(&c, ", "))
			return 0;
		if (eat(&c, "Testing net (#")) {
			if (eat_count(&c, &k) && eat(&c, ")") && k <= UINT_MAX)
				p->caffe_test_net = (unsigned)k;
			return 0;
		}
		if (!eat_name(&c, &name, &len) || !eat(&c, " = ") || !eat_number(&c, &v))
			return 0;
		if (len == 4 && !memcmp(name, "loss", 4))
			p->caffe_loss_step = n;
		return emit(out, NULL, name, len, n, v);
	}
	if ((mark = find(s, end, "Train net output #"))) {
		c = (struct cur){ mark + strlen("Train net output #"), end };
		if (!caffe_output(&c, &name, &len, &v))
			return 0;
		if (len == 4 && !memcmp(name, "loss", 4) && p->caffe_iter >= 0 &&
		    p->caffe_loss_step == p->caffe_iter)
			return 0; /* the Iteration line gave this step's loss */
		return emit(out, NULL, name, len, p->caffe_iter, v);
	}
	if ((mark = find(s, end, "Test net output #"))) {
		char prefix[24];
		c = (struct cur){ mark + strlen("Test net output #"), end };
		if (!caffe_output(&c, &name, &len, &v))
			return 0;
		if (p->caffe_test_net)
			snprintf(prefix, sizeof(prefix), "test%u/", p->caffe_test_net);
		else
			snprintf(prefix, sizeof(prefix), "test/");
		return emit(out, prefix, name, len, p->caffe_iter, v);
	}
	return 0;
}

static bool is_caffe(const char *s, const char *end)
{
	return caffe_iteration(s, end) || find(s, end, "net output #");
}

/* ---- 3. MXNet ---- */

/* "Epoch[" or "Iter[" at the start of the line or after a non-name byte. */
static const char *mxnet_epoch(const char *s, const char *end, struct cur *c)
{
	static const char *const marks[] = { "Epoch[", "Iter[" };

	for (size_t i = 0; i < ARRAY_SIZE(marks); i++)
		for (const char *at = find(s, end, marks[i]); at; at = find(at + 1, end, marks[i]))
			if (at == s || !is_name_char(at[-1])) {
				*c = (struct cur){ at + strlen(marks[i]), end };
				return at;
			}
	return NULL;
}

/* The next blank-separated field: OUT [start, end). */
static bool next_field(struct cur *c, const char **f, const char **fend)
{
	skip_blanks(c);
	if (at_end(c))
		return false;
	*f = c->p;
	while (!at_end(c) && *c->p != ' ' && *c->p != '\t')
		c->p++;
	*fend = c->p;
	return true;
}

/* A "NAME=NUM" field: OUT name, length and value. */
static bool name_eq_num(const char *f, const char *fend, const char **name, size_t *len, double *v)
{
	struct cur c = { f, fend };

	return eat_name(&c, name, len) && eat(&c, "=") && eat_number(&c, v) && at_end(&c);
}

static size_t parse_mxnet(struct metric_parser *p, struct cur *c, struct metric_points *out)
{
	const char *f, *fend, *name;
	int64_t epoch, a, b;
	size_t n = 0, len;
	double v;

	if (!eat_count(c, &epoch) || !eat(c, "]"))
		return 0;
	skip_blanks(c);
	if (eat(c, "Batch")) {
		int64_t step;
		skip_blanks(c);
		if (!eat(c, "[") || !eat_count(c, &a))
			return 0;
		b = a;
		if (eat(c, "-") && !eat_count(c, &b))
			return 0;
		if (!eat(c, "]"))
			return 0;
		if (p->mx_epoch >= 0 && epoch != p->mx_epoch) {
			p->mx_base = p->mx_base > INT64_MAX - p->mx_batch ? INT64_MAX : p->mx_base + p->mx_batch;
			p->mx_batch = 0;
		}
		p->mx_epoch = epoch;
		if (b > p->mx_batch)
			p->mx_batch = b;
		step = p->mx_base > INT64_MAX - b ? INT64_MAX : p->mx_base + b;
		while (next_field(c, &f, &fend)) {
			if (fend - f == 6 && !memcmp(f, "Speed:", 6)) {
				skip_blanks(c);
				if (eat_number(c, &v))
					n += emit(out, NULL, "samples_per_sec", 15, step, v);
				continue;
			}
			if (!name_eq_num(f, fend, &name, &len, &v))
				continue;
			if (len > 6 && !memcmp(name, "Train-", 6)) {
				name += 6;
				len -= 6;
			}
			n += emit(out, NULL, name, len, step, v);
		}
		return n;
	}
	while (next_field(c, &f, &fend)) {
		if (fend - f == 4 && !memcmp(f, "Time", 4)) {
			struct cur t = *c;
			skip_blanks(&t);
			if (eat(&t, "cost=") && eat_number(&t, &v)) {
				n += emit(out, NULL, "time_cost", 9, epoch, v);
				*c = t;
			}
			continue;
		}
		if (!name_eq_num(f, fend, &name, &len, &v))
			continue;
		if (len > 6 && !memcmp(name, "Train-", 6))
			n += emit(out, "train/", name + 6, len - 6, epoch, v);
		else if (len > 11 && !memcmp(name, "Validation-", 11))
			n += emit(out, "validation/", name + 11, len - 11, epoch, v);
	}
	return n;
}

/* ---- 4. Keras ---- */

static size_t parse_keras(const char *s, const char *end, struct metric_points *out)
{
	struct cur c = { s, end };
	const char *name, *sep;
	int64_t done, total;
	size_t n = 0, len;
	double v;

	skip_blanks(&c);
	if (!eat_count(&c, &done) || !eat(&c, "/") || !eat_count(&c, &total) || done != total ||
	    !eat(&c, " "))
		return 0;
	while ((sep = find(c.p, end, " - "))) {
		c.p = sep + 3;
		if (eat_name(&c, &name, &len) && eat(&c, ": ") && eat_number(&c, &v))
			n += emit(out, NULL, name, len, METRIC_NO_STEP, v);
	}
	return n;
}

/* What each form cannot do without, found in one pass over the line: only
 * the forms a line may be are then searched for (a task printing a
 * gigabyte of lines that are none of them cost five memmem calls a line,
 * and its agent shipped its log at the speed of that). */
enum line_marks { MARK_AT = 1 << 0, MARK_CAFFE = 1 << 1, MARK_BRACKET = 1 << 2 };

static bool literal_at(const char *s, const char *end, const char *lit, size_t len)
{
	return (size_t)(end - s) >= len && !memcmp(s, lit, len);
}

static unsigned line_marks(const char *s, const char *end)
{
	/* the bytes that may start (or, '#', end) what a form needs */
	static const unsigned char first[256] = { ['@'] = 1, ['I'] = 1, ['#'] = 1, ['E'] = 1 };
	unsigned marks = 0;

	for (const char *p = s; p < end; p++) {
		/* eight bytes none of which may start a form are passed over with
		 * one branch (a byte each cost a branch: a tenth of the agent's
		 * CPU, shipping a gigabyte of log) */
		while (end - p >= 8) {
			const unsigned char *u = (const unsigned char *)p;
			if (first[u[0]] | first[u[1]] | first[u[2]] | first[u[3]] | first[u[4]] |
			    first[u[5]] | first[u[6]] | first[u[7]])
				break;
			p += 8;
		}
		if (p == end)
			break;
		if (!first[(unsigned char)*p])
			continue;
		switch (*p) {
		case '@':
			marks |= MARK_AT;
			break;
		case 'I':
			if (literal_at(p, end, "Iteration ", 10))
				marks |= MARK_CAFFE;
			else if (literal_at(p, end, "Iter[", 5))
				marks |= MARK_BRACKET;
			break;
		case '#': /* "net output #" */
			if (p - s >= 11 && !memcmp(p - 11, "net output ", 11))
				marks |= MARK_CAFFE;
			break;
		case 'E':
			if (literal_at(p, end, "Epoch[", 6))
				marks |= MARK_BRACKET;
			break;
		default:
			break;
		}
	}
	return marks;
}

static size_t parse_any(struct metric_parser *p, const char *s, const char *end,
			struct metric_points *out)
{
	unsigned marks = line_marks(s, end);
	const char *obj;
	struct cur c;

	if ((marks & MARK_AT) && (obj = yard_object(s, end)))
		return parse_yard(obj, end, out);
	if ((marks & MARK_CAFFE) && is_caffe(s, end))
		return parse_caffe(p, s, end, out);
	if ((marks & MARK_BRACKET) && mxnet_epoch(s, end, &c))
		return parse_mxnet(p, &c, out);
	return parse_keras(s, end, out);
}

size_t metric_parse_line(struct metric_parser *p, const char *line, size_t len,
			 struct metric_points *out)
{
	const char *s = line, *end = line + len, *cr;
	size_t n;

	if (len > METRIC_LINE_MAX)
		return 0;
	while (end > s && end[-1] == '\r')
		end--;
	/* a line redrawn in place: what the terminal shows is after the last '\r' */
	while ((cr = memchr(s, '\r', (size_t)(end - s))))
		s = cr + 1;
	n = parse_any(p, s, end, out);
	if (n > METRIC_LINE_POINTS) {
		out->n -= n - METRIC_LINE_POINTS;
		n = METRIC_LINE_POINTS;
	}
	return n;
}
