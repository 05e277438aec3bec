#include "base/compat.h"
#include "common/spec_sweep.h"

#include <math.h>

#include "base/xalloc.h"
#include "common/spec.h"
#include "common/spec_fields.h"

static const char *const sweep_fields[] = { "method", "params", "trials", "max_parallel", "seed",
	"objective", "early_stop", NULL };
static const char *const objective_fields[] = { "metric", "mode", NULL };
static const char *const stop_fields[] = { "method", "resource", "min_resource", "max_resource",
	"reduction_factor", "min_trials", "pause", NULL };
static const char *const domain_names[] = { "list", "uniform", "log_uniform", "int" };
static_assert(ARRAY_SIZE(domain_names) == SWEEP_INT + 1, "a name per domain");

static int check_fields(const json_t *v, const char *path, const char *const *known,
			struct errbuf *eb)
{
	const char *key;
	json_t *x;

	json_object_foreach((json_t *)v, key, x) {
		if (!spec_is_one_of(key, known)) {
			char p[256];
			snprintf(p, sizeof(p), "%s.%s", path, key);
			return spec_unknown_field(eb, p, key, known);
		}
	}
	return 0;
}

/* An integer field from lo to hi; absent or null: dflt. */
static int get_uint(const json_t *v, const char *path, unsigned lo, unsigned hi, unsigned dflt,
		    unsigned *out, struct errbuf *eb)
{
	*out = dflt;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
		char what[64];
		snprintf(what, sizeof(what), "an integer from %u to %u", lo, hi);
		return spec_bad_got(eb, path, what, v);
	}
	*out = (unsigned)json_integer_value(v);
	return 0;
}

/* A finite number field > lo (or >= lo with incl); absent or null: dflt. */
static int get_num(const json_t *v, const char *path, double lo, bool incl, double dflt, double *out,
		   struct errbuf *eb)
{
	*out = dflt;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v) || !isfinite(json_number_value(v)) ||
	    (incl ? json_number_value(v) < lo : json_number_value(v) <= lo)) {
		char what[64];
		snprintf(what, sizeof(what), "a number %s %g", incl ? ">=" : ">", lo);
		return spec_bad_got(eb, path, what, v);
	}
	*out = json_number_value(v);
	return 0;
}

static bool scalar(const json_t *v)
{
	return json_is_string(v) || json_is_number(v) || json_is_boolean(v);
}

/* One swept parameter: a list, or {DOMAIN: [lo, hi]} / {choice: [...]}. */
static int get_param(const char *name, const json_t *v, enum sweep_method method,
		     struct sweep_param *p, struct errbuf *eb)
{
	char path[256];
	const json_t *list = v;
	const char *dom = NULL;

	snprintf(path, sizeof(path), "sweep.params.%s", name);
	p->name = xstrdup(name);
	if (json_is_object(v)) {
		if (json_object_size(v) != 1)
			return spec_bad_got(eb, path, "a list of values or one of {uniform|log_uniform|"
					    "int: [lo, hi]} or {choice: [values]}", v);
		dom = json_object_iter_key(json_object_iter((json_t *)v));
		list = json_object_iter_value(json_object_iter((json_t *)v));
		if (!strcmp(dom, "choice"))
			dom = NULL;
		else if (!strcmp(dom, "uniform"))
			p->domain = SWEEP_UNIFORM;
		else if (!strcmp(dom, "log_uniform"))
			p->domain = SWEEP_LOG_UNIFORM;
		else if (!strcmp(dom, "int"))
			p->domain = SWEEP_INT;
		else
			return spec_bad(eb, path, "unknown domain '%s' (expected uniform, log_uniform, "
					"int or choice)", dom);
	}
	if (!dom) {
		size_t i;
		json_t *x;
		if (!json_is_array(list) || !json_array_size(list))
			return spec_bad_got(eb, path, "a non-empty list of values", list);
		json_array_foreach(list, i, x) {
			char p2[288];
			int ret;
			snprintf(p2, sizeof(p2), "%s[%zu]", path, i);
			if (!scalar(x))
				return spec_bad_got(eb, p2, "a string, number or bool", x);
			if (json_is_string(x) && (ret = spec_check_string(x, p2, eb)) < 0)
				return ret;
		}
		p->domain = SWEEP_LIST;
		p->values = json_deep_copy(list);
		return 0;
	}
	if (method == SWEEP_GRID)
		return spec_bad_got(eb, path, "a list of values (grid tries every value; a range is "
				    "for method: random)", v);
	if (!json_is_array(list) || json_array_size(list) != 2 ||
	    !json_is_number(json_array_get(list, 0)) || !json_is_number(json_array_get(list, 1)))
		return spec_bad_got(eb, path, "[lo, hi], two numbers", list);
	p->lo = json_number_value(json_array_get(list, 0));
	p->hi = json_number_value(json_array_get(list, 1));
	if (!isfinite(p->lo) || !isfinite(p->hi) || p->lo > p->hi)
		return spec_bad_got(eb, path, "[lo, hi] with lo <= hi", list);
	if (p->domain == SWEEP_LOG_UNIFORM && p->lo <= 0)
		return spec_bad_got(eb, path, "[lo, hi] with 0 < lo <= hi (log_uniform)", list);
	if (p->domain == SWEEP_INT &&
	    (!json_is_integer(json_array_get(list, 0)) || !json_is_integer(json_array_get(list, 1))))
		return spec_bad_got(eb, path, "[lo, hi], two integers", list);
	return 0;
}

static int get_objective(const json_t *v, struct spec_sweep *s, struct errbuf *eb)
{
	const json_t *metric, *mode;
	int ret;

	if (!v || json_is_null(v))
		return spec_bad(eb, "sweep.objective", "required: {metric: NAME, mode: min|max}, the "
				"series to rank the trials by");
	if (!json_is_object(v))
		return spec_bad_got(eb, "sweep.objective", "{metric: NAME, mode: min|max}", v);
	if ((ret = check_fields(v, "sweep.objective", objective_fields, eb)))
		return ret;
	metric = json_object_get(v, "metric");
	mode = json_object_get(v, "mode");
	if (!json_is_string(metric) || !*json_string_value(metric) ||
	    strlen(json_string_value(metric)) > 128)
		return spec_bad_got(eb, "sweep.objective.metric", "the name of a metric series", metric);
	if (!json_is_string(mode) ||
	    (strcmp(json_string_value(mode), "min") && strcmp(json_string_value(mode), "max")))
		return spec_bad_got(eb, "sweep.objective.mode", "min or max", mode);
	s->metric = xstrdup(json_string_value(metric));
	s->maximize = !strcmp(json_string_value(mode), "max");
	return 0;
}

static int get_stop(const json_t *v, struct spec_sweep *s, struct errbuf *eb)
{
	const json_t *method, *res;
	int ret;

	s->stop = SWEEP_STOP_NONE;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return spec_bad_got(eb, "sweep.early_stop", "{method: asha|median, ...}", v);
	if ((ret = check_fields(v, "sweep.early_stop", stop_fields, eb)))
		return ret;
	method = json_object_get(v, "method");
	if (json_is_string(method) && !strcmp(json_string_value(method), "asha"))
		s->stop = SWEEP_STOP_ASHA;
	else if (json_is_string(method) && !strcmp(json_string_value(method), "median"))
		s->stop = SWEEP_STOP_MEDIAN;
	else
		return spec_bad_got(eb, "sweep.early_stop.method", "asha or median", method);
	res = json_object_get(v, "resource");
	if (res && !json_is_null(res)) {
		if (!json_is_string(res) || !*json_string_value(res) || strlen(json_string_value(res)) > 128)
			return spec_bad_got(eb, "sweep.early_stop.resource", "the name of a metric series",
					    res);
		s->resource = xstrdup(json_string_value(res));
	}
	if ((ret = get_num(json_object_get(v, "min_resource"), "sweep.early_stop.min_resource", 0, false,
			   1, &s->min_resource, eb)) ||
	    (ret = get_num(json_object_get(v, "max_resource"), "sweep.early_stop.max_resource", 0, false,
			   0, &s->max_resource, eb)) ||
	    (ret = get_num(json_object_get(v, "reduction_factor"), "sweep.early_stop.reduction_factor", 1,
			   false, 3, &s->reduction_factor, eb)) ||
	    (ret = get_uint(json_object_get(v, "min_trials"), "sweep.early_stop.min_trials", 1,
			    SWEEP_TRIALS_MAX, 3, &s->min_trials, eb)))
		return ret;
	if (s->max_resource && s->max_resource <= s->min_resource)
		return spec_bad(eb, "sweep.early_stop.max_resource", "expected more than min_resource "
				"(%g), got %g", s->min_resource, s->max_resource);
	if (s->stop != SWEEP_STOP_ASHA &&
	    (json_object_get(v, "max_resource") || json_object_get(v, "reduction_factor")))
		return spec_bad(eb, json_object_get(v, "max_resource") ? "sweep.early_stop.max_resource"
				: "sweep.early_stop.reduction_factor", "only for method: asha");
	if (s->stop != SWEEP_STOP_MEDIAN && json_object_get(v, "min_trials"))
		return spec_bad(eb, "sweep.early_stop.min_trials", "only for method: median");
	res = json_object_get(v, "pause");
	if (res && !json_is_boolean(res))
		return spec_bad_got(eb, "sweep.early_stop.pause", "true or false", res);
	if (json_is_true(res) && s->stop != SWEEP_STOP_ASHA)
		return spec_bad(eb, "sweep.early_stop.pause", "only for method: asha");
	s->pause = json_is_true(res);
	return 0;
}

/* The number of grid points, or 0 past SWEEP_TRIALS_MAX. */
static unsigned grid_size(const struct spec_sweep *s)
{
	uint64_t n = 1;

	for (size_t i = 0; i < s->nparams; i++) {
		n *= json_array_size(s->params[i].values);
		if (n > SWEEP_TRIALS_MAX)
			return 0;
	}
	return (unsigned)n;
}

static int parse(const json_t *v, json_t *params, struct spec_sweep *s, struct errbuf *eb)
{
	const json_t *method, *ps, *x;
	const char *key;
	int ret;

	if (!json_is_object(v))
		return spec_bad_got(eb, "sweep", "a mapping (method, params, objective, ...)", v);
	if ((ret = check_fields(v, "sweep", sweep_fields, eb)))
		return ret;
	method = json_object_get(v, "method");
	if (json_is_string(method) && !strcmp(json_string_value(method), "grid"))
		s->method = SWEEP_GRID;
	else if (json_is_string(method) && !strcmp(json_string_value(method), "random"))
		s->method = SWEEP_RANDOM;
	else
		return spec_bad_got(eb, "sweep.method", "grid or random", method);
	ps = json_object_get(v, "params");
	if (!json_is_object(ps) || !json_object_size(ps))
		return spec_bad_got(eb, "sweep.params", "a mapping of parameter names to their values", ps);
	if (json_object_size(ps) > SWEEP_PARAMS_MAX)
		return spec_bad(eb, "sweep.params", "at most %d parameters, got %zu", SWEEP_PARAMS_MAX,
				json_object_size(ps));
	s->params = xcalloc(json_object_size(ps), sizeof(*s->params));
	json_object_foreach((json_t *)ps, key, x) {
		char path[256];
		snprintf(path, sizeof(path), "sweep.params.%s", key);
		if (!spec_ident_valid(key))
			return spec_bad(eb, path, "expected a parameter name of letters, digits and '_' "
					"(at most 64, not starting with a digit)");
		if ((ret = get_param(key, x, s->method, &s->params[s->nparams++], eb)))
			return ret;
	}
	if (s->method == SWEEP_GRID) {
		unsigned n = grid_size(s);
		if (!n)
			return spec_bad(eb, "sweep.params", "the grid has more than %d points",
					SWEEP_TRIALS_MAX);
		if ((ret = get_uint(json_object_get(v, "trials"), "sweep.trials", n, n, n, &s->trials, eb)))
			return ret;
	} else {
		x = json_object_get(v, "trials");
		if (!x || json_is_null(x))
			return spec_bad(eb, "sweep.trials", "required for method: random");
		if ((ret = get_uint(x, "sweep.trials", 1, SWEEP_TRIALS_MAX, 1, &s->trials, eb)))
			return ret;
	}
	if ((ret = get_uint(json_object_get(v, "max_parallel"), "sweep.max_parallel", 1,
			    SWEEP_TRIALS_MAX, SWEEP_PARALLEL_DEFAULT, &s->max_parallel, eb)))
		return ret;
	x = json_object_get(v, "seed");
	if (x && !json_is_null(x)) {
		if (!json_is_integer(x) || json_integer_value(x) < 0)
			return spec_bad_got(eb, "sweep.seed", "an integer >= 0", x);
		s->has_seed = true;
		s->seed = (uint64_t)json_integer_value(x);
	}
	if ((ret = get_objective(json_object_get(v, "objective"), s, eb)) ||
	    (ret = get_stop(json_object_get(v, "early_stop"), s, eb)))
		return ret;
	/* a swept name params lacks is added, with a value of its domain */
	for (size_t i = 0; i < s->nparams; i++) {
		const struct sweep_param *p = &s->params[i];
		if (json_object_get(params, p->name))
			continue;
		json_object_set_new(params, p->name, p->domain == SWEEP_LIST ? json_deep_copy(json_array_get(p->values, 0))
					: p->domain == SWEEP_INT ? json_integer((json_int_t)p->lo)
					: json_real(p->lo));
	}
	return 0;
}

int spec_sweep_parse(const json_t *v, json_t *params, struct spec_sweep **out, struct errbuf *eb)
{
	struct spec_sweep *s;
	int ret;

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	s = xcalloc(1, sizeof(*s));
	if ((ret = parse(v, params, s, eb)))
		spec_sweep_free(s);
	else
		*out = s;
	return ret;
}

json_t *spec_sweep_to_json(const struct spec_sweep *s)
{
	json_t *params = json_object(), *doc, *stop;

	for (size_t i = 0; i < s->nparams; i++) {
		const struct sweep_param *p = &s->params[i];
		json_object_set_new(params, p->name, p->domain == SWEEP_LIST ? json_deep_copy(p->values)
				    : json_pack("{s:[o,o]}", domain_names[p->domain],
						p->domain == SWEEP_INT ? json_integer((json_int_t)p->lo) : json_real(p->lo),
						p->domain == SWEEP_INT ? json_integer((json_int_t)p->hi) : json_real(p->hi)));
	}
	doc = json_pack("{s:s, s:o, s:i, s:i, s:{s:s, s:s}}", "method",
			s->method == SWEEP_GRID ? "grid" : "random", "params", params, "trials",
			(int)s->trials, "max_parallel", (int)s->max_parallel, "objective", "metric",
			s->metric, "mode", s->maximize ? "max" : "min");
	if (s->has_seed)
		json_object_set_new(doc, "seed", json_integer((json_int_t)s->seed));
	if (s->stop == SWEEP_STOP_NONE)
		return doc;
	stop = json_pack("{s:s, s:f}", "method", s->stop == SWEEP_STOP_ASHA ? "asha" : "median",
			 "min_resource", s->min_resource);
	if (s->resource)
		json_object_set_new(stop, "resource", json_string(s->resource));
	if (s->stop == SWEEP_STOP_ASHA) {
		json_object_set_new(stop, "max_resource",
				    json_real(s->max_resource ? s->max_resource : s->min_resource * 1000));
		json_object_set_new(stop, "reduction_factor", json_real(s->reduction_factor));
		json_object_set_new(stop, "pause", json_boolean(s->pause));
	} else {
		json_object_set_new(stop, "min_trials", json_integer(s->min_trials));
	}
	json_object_set_new(doc, "early_stop", stop);
	return doc;
}

void spec_sweep_free(struct spec_sweep *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nparams; i++) {
		free(s->params[i].name);
		json_decref(s->params[i].values);
	}
	free(s->params);
	free(s->metric);
	free(s->resource);
	free(s);
}

/* splitmix64: a small, well-mixed generator, enough to draw trials from a
 * seed reproducibly. */
static uint64_t mix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in [0, 1) */
static double unit(uint64_t *x)
{
	return (double)(mix(x) >> 11) * 0x1.0p-53;
}

/* A real drawn from a range, kept to 6 significant digits so that a
 * trial's params read as a person would write them. */
static json_t *real6(double v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%.6g", v);
	return json_real(strtod(buf, NULL));
}

json_t *spec_sweep_trial_params(const struct spec_sweep *s, unsigned trial, uint64_t seed)
{
	json_t *out = json_object();
	uint64_t state = seed * 0x100000001b3ull ^ ((uint64_t)trial << 20) ^ trial;
	unsigned rest = trial;

	if (s->method == SWEEP_GRID) {
		for (size_t i = s->nparams; i-- > 0;) {
			size_t n = json_array_size(s->params[i].values);
			json_object_set_new(out, s->params[i].name,
					    json_deep_copy(json_array_get(s->params[i].values, rest % n)));
			rest /= (unsigned)n;
		}
		/* in the spec's order, as the lists were given */
		json_t *ordered = json_object();
		for (size_t i = 0; i < s->nparams; i++)
			json_object_set(ordered, s->params[i].name, json_object_get(out, s->params[i].name));
		json_decref(out);
		return ordered;
	}
	mix(&state);
	for (size_t i = 0; i < s->nparams; i++) {
		const struct sweep_param *p = &s->params[i];
		double u = unit(&state);
		json_t *v;
		switch (p->domain) {
		case SWEEP_LIST:
			v = json_deep_copy(json_array_get(p->values, (size_t)(u * json_array_size(p->values))));
			break;
		case SWEEP_UNIFORM:
			v = real6(p->lo + u * (p->hi - p->lo));
			break;
		case SWEEP_LOG_UNIFORM:
			v = real6(exp(log(p->lo) + u * (log(p->hi) - log(p->lo))));
			break;
		default: {
			double span = p->hi - p->lo + 1;
			v = json_integer((json_int_t)(p->lo + floor(u * span)));
			break;
		}
		}
		json_object_set_new(out, p->name, v);
	}
	return out;
}
