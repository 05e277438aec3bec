#include "base/compat.h"
#include "master/settings.h"

#include "base/conf.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "master/datasets.h"
#include "master/interactive.h"
#include "master/master.h"
#include "master/githook.h"
#include "master/visibility.h"

/* "[POOL=]NAME": the pool (NULL: every pool; caller frees) and the policy. */
static int parse_policy(const char *what, const char *v, char **pool, enum sched_policy *p,
			struct errbuf *eb)
{
	const char *eq = strchr(v, '=');
	int n = sched_policy_parse(eq ? eq + 1 : v);

	*pool = eq ? xstrndup(v, (size_t)(eq - v)) : NULL;
	if (n < 0 || (*pool && !spec_name_valid(*pool))) {
		free(*pool);
		*pool = NULL;
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected [POOL=]glas|las|fifo|fair|srtf|greedy",
			     what, v);
	}
	*p = (enum sched_policy)n;
	return 0;
}

/* "T1,T2,...": ascending GPU-seconds into conf's thresholds. */
static int parse_thresholds(const char *what, const char *text, struct sched_policy_conf *conf,
			    struct errbuf *eb)
{
	const char *p = text;
	size_t n = 0;
	uint64_t v, last = 0;

	while (*p) {
		if (n == ARRAY_SIZE(conf->thresholds) || parse_u64(&p, &v) < 0 || v <= last ||
		    (*p && *p != ','))
			return error(eb, YERR(BAD_REQUEST),
				     "%s '%s': expected at most %zu ascending GPU-seconds such as 3250,7200,18000",
				     what, text, ARRAY_SIZE(conf->thresholds));
		conf->thresholds[n++] = last = v;
		if (*p == ',')
			p++;
	}
	conf->nthresholds = n;
	return 0;
}

/* "TEAM=WEIGHT" or "TEAM=WEIGHT:QUOTA" (GPUs) into *out (its team owned). */
static int parse_team(const char *what, const char *v, struct team_share *out, struct errbuf *eb)
{
	const char *eq = strchr(v, '='), *p = eq ? eq + 1 : NULL;
	uint64_t w = 0, q = 0;
	char *team = eq ? xstrndup(v, (size_t)(eq - v)) : NULL;

	if (!team || !spec_name_valid(team) || parse_u64(&p, &w) < 0 || !w || w > 1000000 ||
	    (*p && (*p != ':' || (p++, parse_u64(&p, &q) < 0) || *p || q > 1000000))) {
		free(team);
		return error(eb, YERR(BAD_REQUEST),
			     "%s '%s': expected TEAM=WEIGHT or TEAM=WEIGHT:QUOTA (integers; QUOTA in GPUs)",
			     what, v);
	}
	*out = (struct team_share){ team, (double)w, (unsigned)q };
	return 0;
}

int settings_check_policy(const char *what, const char *value, struct errbuf *eb)
{
	enum sched_policy p;
	char *pool;
	int ret = parse_policy(what, value, &pool, &p, eb);

	free(pool);
	return ret;
}

int settings_check_thresholds(const char *what, const char *value, struct errbuf *eb)
{
	struct sched_policy_conf conf;

	return parse_thresholds(what, value, &conf, eb);
}

int settings_check_team(const char *what, const char *value, struct errbuf *eb)
{
	struct team_share t;
	int ret = parse_team(what, value, &t, eb);

	if (!ret)
		free(t.team);
	return ret;
}

void settings_release(struct master_settings *s)
{
	for (size_t i = 0; i < s->npool_policies; i++)
		free(s->pool_policies[i].pool);
	free(s->pool_policies);
	for (size_t i = 0; i < s->nteams; i++)
		free(s->teams[i].team);
	free(s->teams);
	for (size_t i = 0; i < s->ndata_quotas; i++)
		free(s->data_quotas[i].team);
	free(s->data_quotas);
	elastic_conf_release(&s->elastic);
	githook_secret_free(s->git_hook_secret);
	memset(s, 0, sizeof(*s));
}

/* The policy of every pool (cfg->policies), their levels, and the
 * protection of running work, the same in every pool. */
static int build_policies(const struct master_config *cfg, struct master_settings *s,
			  struct errbuf *eb)
{
	uint64_t min_run_ms = SCHED_PREEMPT_MIN_RUN_S * 1000, max_lost_ms = SCHED_PREEMPT_MAX_LOST_S * 1000;
	int ret;

	sched_policy_conf_init(&s->policy, SCHED_POLICY_DEFAULT);
	s->pool_policies = xcalloc(cfg->policies.n + 1, sizeof(*s->pool_policies));
	for (size_t i = 0; i < cfg->policies.n; i++) {
		enum sched_policy p;
		char *pool;

		if ((ret = parse_policy("--policy", cfg->policies.items[i], &pool, &p, eb)))
			return ret;
		if (!pool) {
			sched_policy_conf_init(&s->policy, p);
			continue;
		}
		s->pool_policies[s->npool_policies].pool = pool;
		sched_policy_conf_init(&s->pool_policies[s->npool_policies++].conf, p);
	}
	if (cfg->preempt_min_run && parse_duration_str(cfg->preempt_min_run, &min_run_ms))
		return error(eb, YERR(BAD_REQUEST), "--preempt-min-run '%s': expected a duration",
			     cfg->preempt_min_run);
	if (cfg->preempt_max_lost && parse_duration_str(cfg->preempt_max_lost, &max_lost_ms))
		return error(eb, YERR(BAD_REQUEST), "--preempt-max-lost '%s': expected a duration",
			     cfg->preempt_max_lost);
	for (size_t i = 0; i <= s->npool_policies; i++) {
		struct sched_policy_conf *c = i < s->npool_policies ? &s->pool_policies[i].conf : &s->policy;

		if (cfg->thresholds && (ret = parse_thresholds("--thresholds", cfg->thresholds, c, eb)))
			return ret;
		c->min_run_s = min_run_ms / 1000;
		c->max_lost_s = max_lost_ms / 1000;
		c->need_checkpoint = max_lost_ms > 0;
	}
	return 0;
}

int settings_build(const struct master_config *cfg, struct master_settings *s, struct errbuf *eb)
{
	int ret;

	memset(s, 0, sizeof(*s));
	if ((ret = build_policies(cfg, s, eb)))
		return ret;
	s->teams = xcalloc(cfg->teams.n + 1, sizeof(*s->teams));
	for (; s->nteams < cfg->teams.n; s->nteams++)
		if ((ret = parse_team("--team", cfg->teams.items[s->nteams], &s->teams[s->nteams], eb)))
			return ret;
	s->data_quotas = xcalloc(cfg->data_quotas.n + 1, sizeof(*s->data_quotas));
	for (; s->ndata_quotas < cfg->data_quotas.n; s->ndata_quotas++)
		if ((ret = datasets_parse_quota("--data-quota", cfg->data_quotas.items[s->ndata_quotas],
						&s->data_quotas[s->ndata_quotas], eb)))
			return ret;
	s->rate = RATELIMIT_DEFAULT_RATE;
	s->burst = RATELIMIT_DEFAULT_BURST;
	if (cfg->rate_limit && (ret = ratelimit_parse("--rate-limit", cfg->rate_limit, &s->rate, &s->burst, eb)))
		return ret;
	if (cfg->visibility && (ret = visibility_parse("--visibility", cfg->visibility, &s->visibility_open, eb)))
		return ret;
	s->gpuidle.threshold = GPUIDLE_DEFAULT_THRESHOLD;
	if (cfg->idle_gpu_threshold &&
	    (ret = gpuidle_parse_threshold("--idle-gpu-threshold", cfg->idle_gpu_threshold,
					   &s->gpuidle.threshold, eb)))
		return ret;
	if (cfg->idle_gpu_action &&
	    (ret = gpuidle_parse_action("--idle-gpu-action", cfg->idle_gpu_action, &s->gpuidle.stop, eb)))
		return ret;
	s->gpuidle.timeout_ms = cfg->idle_gpu_timeout_ms;
	s->outputs_retention_ms = cfg->outputs_retention_ms;
	s->interactive_idle_ms = INTERACTIVE_IDLE_DEFAULT_MS;
	if (cfg->interactive_idle_timeout &&
	    (ret = interactive_parse_idle("--interactive-idle-timeout", cfg->interactive_idle_timeout,
					  &s->interactive_idle_ms, eb)))
		return ret;
	if (cfg->git_hook_secret_file &&
	    (ret = githook_read_secret("--git-hook-secret-file", cfg->git_hook_secret_file, &s->git_hook_secret,
				       eb)))
		return ret;
	return elastic_conf_build(cfg, &s->elastic, eb);
}

void settings_clear(struct master *m)
{
	struct master_settings old = {
		.pool_policies = m->pool_policies, .npool_policies = m->npool_policies,
		.teams = m->teams, .nteams = m->nteams,
		.data_quotas = m->data_quotas, .ndata_quotas = m->ndata_quotas,
	};

	settings_release(&old);
	githook_secret_free(m->git_hook_secret);
	m->git_hook_secret = NULL;
	m->pool_policies = NULL;
	m->teams = NULL;
	m->data_quotas = NULL;
	m->npool_policies = m->apool_policies = m->nteams = m->ateams = m->ndata_quotas = m->adata_quotas = 0;
}

void settings_install(struct master *m, struct master_settings *s)
{
	settings_clear(m);

	m->policy = s->policy;
	m->pool_policies = s->pool_policies;
	m->npool_policies = m->apool_policies = s->npool_policies;
	m->teams = s->teams;
	m->nteams = m->ateams = s->nteams;
	m->data_quotas = s->data_quotas;
	m->ndata_quotas = m->adata_quotas = s->ndata_quotas;
	if (m->ratelimit.rate != s->rate || m->ratelimit.burst != (s->burst ? s->burst : 1) ||
	    (s->rate && !m->ratelimit.slots)) {
		/* a new limit starts with full buckets */
		ratelimit_release(&m->ratelimit);
		ratelimit_init(&m->ratelimit, s->rate, s->burst);
	}
	m->visibility_open = s->visibility_open;
	m->gpuidle = s->gpuidle;
	m->outputs_retention_ms = s->outputs_retention_ms;
	m->interactive_idle_ms = s->interactive_idle_ms;
	m->git_hook_secret = s->git_hook_secret;
	elastic_install(m, &s->elastic);
	memset(s, 0, sizeof(*s));
	/* the queue's order and the listings may differ now */
	m->sched_needed = true;
	m->jobs_gen++;
}

static void list_add(json_t *list, struct strbuf *text, const char *name)
{
	json_array_append_new(list, json_string(name));
	strbuf_addf(text, "%s%s", text->len ? ", " : "", name);
}

int settings_reload(struct master *m, json_t **out, struct errbuf *eb)
{
	struct master_config cfg = { 0 };
	struct master_settings s = { 0 };
	struct conf next;
	json_t *applied = json_array(), *restart = json_array(), *overridden = json_array();
	struct strbuf a = STRBUF_INIT, r = STRBUF_INIT;
	int ret;

	*out = NULL;
	if (!m->conf) {
		ret = error(eb, YERR(CONFLICT), "the master was started without --config: there is no file to read");
		goto out_lists;
	}
	conf_clone(&next, m->conf);
	if ((ret = conf_reload(&next, eb)) || (ret = conf_apply(&next, &cfg, eb)) ||
	    (ret = settings_build(&cfg, &s, eb))) {
		settings_release(&s);
		goto out;
	}
	for (size_t i = 0; i < next.nopts; i++) {
		char *was = conf_value_text(m->conf, i), *now = conf_value_text(&next, i);
		bool changed = strcmp(was, now);
		const char *name = next.opts[i].name;

		if (!changed && m->conf->args[i].n) {
			/* the file changed under a flag that wins over it */
			char *fw = conf_key_text(m->conf, i), *fn = conf_key_text(&next, i);
			if (strcmp(fw, fn))
				json_array_append_new(overridden, json_string(name));
			free(fw);
			free(fn);
		}
		if (changed && (next.opts[i].flags & CONF_RELOAD))
			list_add(applied, &a, name);
		else if (changed)
			list_add(restart, &r, name);
		if (next.opts[i].flags & CONF_RELOAD)
			conf_take_keys(m->conf, &next, i);
		free(was);
		free(now);
	}
	settings_install(m, &s);
	fprintf(stderr, "yard master: reloaded '%s': %s%s%s%s\n", m->conf->file,
		a.len ? "applied " : "nothing to apply", a.buf, r.len ? "; needs a restart to change: " : "",
		r.buf);
	*out = json_pack("{s:s, s:O, s:O, s:O}", "file", m->conf->file, "applied", applied, "restart",
			 restart, "overridden", overridden);
out:
	conf_release(&next);
out_lists:
	json_decref(applied);
	json_decref(restart);
	json_decref(overridden);
	strbuf_release(&a);
	strbuf_release(&r);
	return ret;
}
