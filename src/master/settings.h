/*
 * The master's settings that a reload may change: the scheduling policy of
 * every pool with its levels and the protection of running work, the
 * teams' shares and GPU quotas, the teams' data quotas, the rate limit, the
 * visibility rule, the idle GPU policy, how long outputs are kept, the
 * provisioners of elastic pools, the idle timeout of interactive jobs and
 * the secret that signs git servers' pushes, read again from its file at
 * each reload (the options marked CONF_RELOAD in master_main.c).
 *
 * They are built whole from a master_config (settings_build) and then
 * installed at once (settings_install), so a start or a reload with one bad
 * value changes nothing. A reload (settings_reload: SIGHUP, or POST
 * /v1/admin/reload) reads the config file again, applies what changed of
 * these and says which other changes wait for a restart.
 */
#ifndef YARD_MASTER_SETTINGS_H
#define YARD_MASTER_SETTINGS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "master/core.h"
#include "master/elastic.h"

struct master_config;

struct master_settings {
	struct sched_policy_conf policy;     /* every pool's but those below */
	struct pool_policy *pool_policies;   /* owned */
	size_t npool_policies;
	struct team_share *teams;            /* owned */
	size_t nteams;
	struct data_quota *data_quotas;      /* owned */
	size_t ndata_quotas;
	uint64_t rate, burst;                /* ratelimit.h; rate 0: no limit */
	bool visibility_open;
	struct gpuidle_policy gpuidle;
	uint64_t outputs_retention_ms;
	uint64_t interactive_idle_ms;        /* interactive.h; 0: none */
	struct elastic_conf elastic;         /* the provisioners (elastic.h) */
	char *git_hook_secret;               /* owned or NULL: githook.h */
};

/* settings_build reads cfg's reloadable settings into *out (released by
 * settings_release, also on error); YERR(BAD_REQUEST) naming the flag and
 * the value. */
int settings_build(const struct master_config *cfg, struct master_settings *out, struct errbuf *eb);

/* settings_install makes s the master's, taking its contents (s is left
 * empty), and frees the master's old ones; the next scheduling pass uses
 * them. */
void settings_install(struct master *m, struct master_settings *s);

void settings_release(struct master_settings *s);

/* settings_clear frees the master's installed settings (master_free). */
void settings_clear(struct master *m);

/* The checks of one value each (base/conf.h's conf_check_fn): what names
 * the flag or the file's line and key. */
int settings_check_policy(const char *what, const char *value, struct errbuf *eb);
int settings_check_thresholds(const char *what, const char *value, struct errbuf *eb);
int settings_check_team(const char *what, const char *value, struct errbuf *eb);

/* settings_reload reads the master's config file again (m->conf) and
 * installs the reloadable settings it changed; *out (caller decrefs) says
 * {"file", "applied": [keys], "restart": [keys whose change waits for a
 * restart], "overridden": [keys changed in the file that a command-line
 * flag overrides]}. A file with an error changes nothing: the error names
 * the file, the line and the reason. YERR(CONFLICT) when the master was
 * started without --config. */
int settings_reload(struct master *m, json_t **out, struct errbuf *eb);

#endif
