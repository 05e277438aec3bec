/* The provisioner settings of elastic pools (elastic_conf.h). */
#include "base/compat.h"
#include "master/elastic_conf.h"

#include "base/parse.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "master/master.h"
#include "master/provision.h"

void owned_shape_release(struct owned_shape *o)
{
	for (size_t i = 0; i < o->nlabels; i++) {
		free(o->keys[i]);
		free(o->values[i]);
	}
	free(o->keys);
	free(o->values);
	free(o->labels);
	free(o->model);
	memset(o, 0, sizeof(*o));
}

void owned_shape_add_label(struct owned_shape *o, const char *key, size_t klen, const char *value)
{
	o->keys = xrealloc(o->keys, (o->nlabels + 1) * sizeof(*o->keys));
	o->values = xrealloc(o->values, (o->nlabels + 1) * sizeof(*o->values));
	o->keys[o->nlabels] = xstrndup(key, klen);
	o->values[o->nlabels++] = xstrdup(value);
	free(o->labels);
	o->labels = xcalloc(o->nlabels + 1, sizeof(*o->labels));
	for (size_t i = 0; i < o->nlabels; i++)
		o->labels[i] = (struct sched_label){ o->keys[i], o->values[i] };
	o->s.labels = o->labels;
	o->s.nlabels = o->nlabels;
}

void elastic_conf_release(struct elastic_conf *c)
{
	for (size_t i = 0; i < c->npools; i++) {
		struct elastic_conf_pool *p = &c->pools[i];
		free(p->pool);
		free(p->provisioner);
		free(p->arg);
		owned_shape_release(&p->shape);
	}
	free(c->pools);
	free(c->url);
	free(c->slurm_account);
	free(c->slurm_qos);
	free(c->slurm_work_dir);
	free(c->slurm_yard);
	for (size_t i = 0; i < c->nslurm_agent_args; i++)
		free(c->slurm_agent_args[i]);
	free(c->slurm_agent_args);
	memset(c, 0, sizeof(*c));
}

/* "POOL=REST": the pool (caller frees) and REST; NULL when v has no valid
 * pool before its '='. */
static char *split_pool(const char *v, const char **rest)
{
	const char *eq = strchr(v, '=');
	char *pool = eq ? xstrndup(v, (size_t)(eq - v)) : NULL;

	if (pool && !spec_name_valid(pool)) {
		free(pool);
		pool = NULL;
	}
	*rest = eq ? eq + 1 : "";
	return pool;
}

/* The longest pool name of a Slurm provisioner: its nodes' names are
 * POOL-JOB-TASK, at most 63 characters, a job id of up to 19 digits and a
 * task of up to 6. */
#define ELASTIC_SLURM_POOL_MAX 36

/* POOL=KIND:ARG, checked whole: a line of a config file is refused for
 * anything settings_build would refuse it for alone. */
static int parse_provisioner(const char *what, const char *v, char **pool, const struct provisioner_ops **ops,
			     char **arg, struct errbuf *eb)
{
	const char *rest, *colon;
	char *p = split_pool(v, &rest);

	colon = strchr(rest, ':');
	*ops = colon ? provisioner_find(rest, (size_t)(colon - rest)) : NULL;
	if (!p || !*ops || !colon[1]) {
		free(p);
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected POOL=command:/PATH or POOL=slurm:PARTITION",
			     what, v);
	}
	/* a Slurm node is named POOL-JOB-TASK: room for a job id and a task */
	if (*ops == &provision_slurm_ops && strlen(p) > ELASTIC_SLURM_POOL_MAX) {
		free(p);
		return error(eb, YERR(BAD_REQUEST), "%s '%s': the pool of a Slurm provisioner has a name of "
			     "at most %d characters (its nodes are POOL-JOB-TASK)", what, v,
			     ELASTIC_SLURM_POOL_MAX);
	}
	{
		char *w = xasprintf("%s '%s'", what, v);
		int ret = (*ops)->check(w, colon + 1, eb);
		free(w);
		if (ret) {
			free(p);
			return ret;
		}
	}
	*pool = p;
	*arg = xstrdup(colon + 1);
	return 0;
}

int elastic_check_provisioner(const char *what, const char *value, struct errbuf *eb)
{
	const struct provisioner_ops *ops;
	char *pool = NULL, *arg = NULL;
	int ret = parse_provisioner(what, value, &pool, &ops, &arg, eb);

	free(pool);
	free(arg);
	return ret;
}

/* The most nodes a pool may have. */
#define ELASTIC_MAX_NODES 10000

static int parse_pool_count(const char *what, const char *v, char **pool, unsigned *n, struct errbuf *eb)
{
	const char *rest;
	uint64_t x;

	*pool = split_pool(v, &rest);
	if (!*pool || parse_u64_str(rest, &x) || x > ELASTIC_MAX_NODES) {
		free(*pool);
		*pool = NULL;
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected POOL=N, N from 0 to %d", what, v,
			     ELASTIC_MAX_NODES);
	}
	*n = (unsigned)x;
	return 0;
}

int elastic_check_pool_count(const char *what, const char *value, struct errbuf *eb)
{
	char *pool;
	unsigned n;
	int ret = parse_pool_count(what, value, &pool, &n, eb);

	free(pool);
	return ret;
}

static int parse_pool_duration(const char *what, const char *v, char **pool, uint64_t *ms, struct errbuf *eb)
{
	const char *rest;

	*pool = split_pool(v, &rest);
	if (!*pool || parse_duration_str(rest, ms) || !*ms) {
		free(*pool);
		*pool = NULL;
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected POOL=DURATION such as gpu=10m (more than 0)",
			     what, v);
	}
	return 0;
}

int elastic_check_pool_duration(const char *what, const char *value, struct errbuf *eb)
{
	char *pool;
	uint64_t ms;
	int ret = parse_pool_duration(what, value, &pool, &ms, eb);

	free(pool);
	return ret;
}

/* "gpus=2,gpu-model=V100,gpu-memory=16GiB,cpus=8,memory=64GiB,runtime=docker,
 * label=KEY=VALUE": one node of the pool. */
static int parse_shape(const char *what, const char *v, char **pool, struct owned_shape *o,
		       struct errbuf *eb)
{
	const char *rest, *p;
	int ret = 0;

	memset(o, 0, sizeof(*o));
	o->s.cpus_milli = 1000;
	*pool = split_pool(v, &rest);
	if (!*pool || !*rest)
		ret = error(eb, YERR(BAD_REQUEST), "%s '%s': expected POOL=KEY=VALUE,... (gpus, gpu-model, "
			    "gpu-memory, cpus, memory, runtime, label)", what, v);
	for (p = rest; !ret && *p;) {
		size_t len = strcspn(p, ","), klen = strcspn(p, "=,");
		char *val = klen < len ? xstrndup(p + klen + 1, len - klen - 1) : NULL;
		uint64_t x = 0;
		bool ok = val && *val;

		if (!ok)
			;
		else if (klen == 4 && !strncmp(p, "gpus", 4))
			ok = !parse_u64_str(val, &x) && x <= 256 && ((o->s.gpus = (unsigned)x), true);
		else if (klen == 9 && !strncmp(p, "gpu-model", 9))
			ok = strlen(val) <= 64 && ((free(o->model), o->model = xstrdup(val)), true);
		else if (klen == 10 && !strncmp(p, "gpu-memory", 10))
			ok = !parse_size_str(val, &o->s.gpu_memory);
		else if (klen == 4 && !strncmp(p, "cpus", 4))
			ok = !parse_u64_str(val, &x) && x && x <= 100000 && ((o->s.cpus_milli = x * 1000), true);
		else if (klen == 6 && !strncmp(p, "memory", 6))
			ok = !parse_size_str(val, &o->s.memory);
		else if (klen == 7 && !strncmp(p, "runtime", 7))
			ok = (!strcmp(val, "docker") && (o->s.containers = true)) || !strcmp(val, "process");
		else if (klen == 5 && !strncmp(p, "label", 5)) {
			const char *eq = strchr(val, '=');
			char *key = eq ? xstrndup(val, (size_t)(eq - val)) : NULL;
			ok = key && spec_label_valid(key, eq + 1);
			if (ok)
				owned_shape_add_label(o, key, strlen(key), eq + 1);
			free(key);
		} else
			ok = false;
		if (!ok)
			ret = error(eb, YERR(BAD_REQUEST), "%s '%s': bad '%.*s' (expected gpus=N, gpu-model=NAME, "
				    "gpu-memory=SIZE, cpus=N, memory=SIZE, runtime=process|docker or "
				    "label=KEY=VALUE)", what, v, (int)len, p);
		free(val);
		p += len + (p[len] == ',');
	}
	o->s.gpu_model = o->model;
	if (ret) {
		free(*pool);
		*pool = NULL;
		owned_shape_release(o);
	}
	return ret;
}

int elastic_check_pool_shape(const char *what, const char *value, struct errbuf *eb)
{
	struct owned_shape o;
	char *pool;
	int ret = parse_shape(what, value, &pool, &o, eb);

	if (!ret) {
		free(pool);
		owned_shape_release(&o);
	}
	return ret;
}

int elastic_check_count(const char *what, const char *value, struct errbuf *eb)
{
	uint64_t n;

	if (parse_u64_str(value, &n) || !n || n > ELASTIC_MAX_NODES)
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a number from 1 to %d", what, value,
			     ELASTIC_MAX_NODES);
	return 0;
}

int elastic_check_duration(const char *what, const char *value, struct errbuf *eb)
{
	uint64_t ms;

	if (parse_duration_str(value, &ms))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a duration such as 30s", what, value);
	return 0;
}

int elastic_check_register_timeout(const char *what, const char *value, struct errbuf *eb)
{
	uint64_t ms;

	if (parse_duration_str(value, &ms) || !ms)
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a duration of more than 0", what, value);
	return 0;
}

int elastic_check_slurm_time(const char *what, const char *value, struct errbuf *eb)
{
	uint64_t ms;

	if (parse_duration_str(value, &ms) || (ms && ms < 60000))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a duration of at least 1m (0: the "
			     "partition's limit)", what, value);
	return 0;
}

int elastic_check_slurm_word(const char *what, const char *value, struct errbuf *eb)
{
	size_t n = strlen(value);

	if (!n || n > 64 || strspn(value, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != n)
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a Slurm name (letters, digits, '_', '.', '-')",
			     what, value);
	return 0;
}

struct elastic_conf_pool *elastic_conf_pool(const struct elastic_conf *c, const char *pool)
{
	for (size_t i = 0; i < c->npools; i++)
		if (!strcmp(c->pools[i].pool, pool))
			return &c->pools[i];
	return NULL;
}

bool elastic_conf_pool_is(const struct elastic_conf *c, const char *pool, const char *provisioner,
			  unsigned min, unsigned max, uint64_t idle_ms)
{
	const struct elastic_conf_pool *p = elastic_conf_pool(c, pool);

	return p && !strcmp(p->provisioner, provisioner) && p->min == min && p->max == max &&
	       p->idle_ms == idle_ms;
}

/* The pool of a bound, which must have a provisioner. */
static struct elastic_conf_pool *bound_pool(struct elastic_conf *c, const char *opt, const char *v,
					    char *pool, struct errbuf *eb)
{
	struct elastic_conf_pool *p = elastic_conf_pool(c, pool);

	if (!p)
		error(eb, YERR(CONFLICT), "%s '%s': pool '%s' has no --provisioner", opt, v, pool);
	free(pool);
	return p;
}

int elastic_conf_build(const struct master_config *cfg, struct elastic_conf *c, struct errbuf *eb)
{
	uint64_t n;
	int ret = 0;

	memset(c, 0, sizeof(*c));
	c->max_pending = ELASTIC_DEFAULT_MAX_PENDING;
	c->cooldown_ms = ELASTIC_DEFAULT_COOLDOWN_MS;
	c->register_ms = ELASTIC_DEFAULT_REGISTER_MS;
	c->pools = xcalloc(cfg->provisioners.n + 1, sizeof(*c->pools));
	for (size_t i = 0; i < cfg->provisioners.n && !ret; i++) {
		struct elastic_conf_pool *p = &c->pools[c->npools];
		const char *v = cfg->provisioners.items[i];
		if ((ret = parse_provisioner("--provisioner", v, &p->pool, &p->ops, &p->arg, eb)))
			break;
		c->npools++;
		p->provisioner = xstrdup(strchr(v, '=') + 1);
		p->max = ELASTIC_DEFAULT_MAX;
		p->idle_ms = ELASTIC_DEFAULT_IDLE_MS;
		for (size_t k = 0; k + 1 < c->npools; k++)
			if (!strcmp(c->pools[k].pool, p->pool))
				ret = error(eb, YERR(CONFLICT), "--provisioner '%s': pool '%s' has one already",
					    v, p->pool);
	}
	for (size_t i = 0; i < cfg->provisioner_mins.n && !ret; i++) {
		const char *v = cfg->provisioner_mins.items[i];
		struct elastic_conf_pool *p;
		char *pool;
		unsigned x;
		if (!(ret = parse_pool_count("--provisioner-min", v, &pool, &x, eb))) {
			if ((p = bound_pool(c, "--provisioner-min", v, pool, eb)))
				p->min = x;
			else
				ret = YERR(CONFLICT);
		}
	}
	for (size_t i = 0; i < cfg->provisioner_maxes.n && !ret; i++) {
		const char *v = cfg->provisioner_maxes.items[i];
		struct elastic_conf_pool *p;
		char *pool;
		unsigned x;
		if (!(ret = parse_pool_count("--provisioner-max", v, &pool, &x, eb))) {
			if ((p = bound_pool(c, "--provisioner-max", v, pool, eb)))
				p->max = x;
			else
				ret = YERR(CONFLICT);
		}
	}
	for (size_t i = 0; i < cfg->provisioner_idles.n && !ret; i++) {
		const char *v = cfg->provisioner_idles.items[i];
		struct elastic_conf_pool *p;
		char *pool;
		uint64_t ms;
		if (!(ret = parse_pool_duration("--provisioner-idle", v, &pool, &ms, eb))) {
			if ((p = bound_pool(c, "--provisioner-idle", v, pool, eb)))
				p->idle_ms = ms;
			else
				ret = YERR(CONFLICT);
		}
	}
	for (size_t i = 0; i < cfg->provisioner_shapes.n && !ret; i++) {
		const char *v = cfg->provisioner_shapes.items[i];
		struct elastic_conf_pool *p;
		struct owned_shape o;
		char *pool;
		if (!(ret = parse_shape("--provisioner-shape", v, &pool, &o, eb))) {
			if ((p = bound_pool(c, "--provisioner-shape", v, pool, eb))) {
				owned_shape_release(&p->shape);
				p->shape = o;
				p->has_shape = true;
			} else {
				owned_shape_release(&o);
				ret = YERR(CONFLICT);
			}
		}
	}
	for (size_t i = 0; i < c->npools && !ret; i++)
		if (c->pools[i].min > c->pools[i].max)
			ret = error(eb, YERR(CONFLICT), "--provisioner-min of pool '%s' (%u) is above its "
				    "--provisioner-max (%u)", c->pools[i].pool, c->pools[i].min, c->pools[i].max);
	if (!ret && cfg->provisioner_max_pending) {
		if ((ret = elastic_check_count("--provisioner-max-pending", cfg->provisioner_max_pending, eb)))
			return ret;
		parse_u64_str(cfg->provisioner_max_pending, &n);
		c->max_pending = (unsigned)n;
	}
	if (!ret && cfg->provisioner_cooldown &&
	    !(ret = elastic_check_duration("--provisioner-cooldown", cfg->provisioner_cooldown, eb)))
		parse_duration_str(cfg->provisioner_cooldown, &c->cooldown_ms);
	/* each value checked by its key's own check (master_main.c's table), so
	 * that a file's line is refused for what the build would refuse */
	if (!ret && cfg->provisioner_register_timeout &&
	    !(ret = elastic_check_register_timeout("--provisioner-register-timeout",
						   cfg->provisioner_register_timeout, eb)))
		parse_duration_str(cfg->provisioner_register_timeout, &c->register_ms);
	if (!ret && cfg->slurm_time && !(ret = elastic_check_slurm_time("--slurm-time", cfg->slurm_time, eb)))
		parse_duration_str(cfg->slurm_time, &c->slurm_time_ms);
	if (ret)
		return ret;
	c->url = cfg->provisioner_url ? xstrdup(cfg->provisioner_url) : NULL;
	c->slurm_account = cfg->slurm_account ? xstrdup(cfg->slurm_account) : NULL;
	c->slurm_qos = cfg->slurm_qos ? xstrdup(cfg->slurm_qos) : NULL;
	c->slurm_work_dir = xstrdup(cfg->slurm_work_dir ? cfg->slurm_work_dir : ELASTIC_DEFAULT_SLURM_WORK_DIR);
	if (cfg->slurm_yard)
		c->slurm_yard = xstrdup(cfg->slurm_yard);
	else if (!(c->slurm_yard = realpath("/proc/self/exe", NULL)))
		c->slurm_yard = xstrdup("yard");
	c->slurm_agent_args = xcalloc(cfg->slurm_agent_args.n + 1, sizeof(*c->slurm_agent_args));
	for (size_t i = 0; i < cfg->slurm_agent_args.n; i++)
		c->slurm_agent_args[c->nslurm_agent_args++] = xstrdup(cfg->slurm_agent_args.items[i]);
	return 0;
}

int elastic_check_path(const char *what, const char *value, struct errbuf *eb)
{
	if (value[0] != '/')
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected an absolute path", what, value);
	return 0;
}
