/*
 * Who may see what (docs/security.md, "Visibility"): one rule, applied in
 * one place. The route layer (http.c) calls visibility_check() for every
 * request after its permission has admitted the caller, with the route's
 * scope (api.h); handlers that list or build documents ask the same
 * functions which jobs and datasets the caller sees whole.
 *
 * The rule, under --visibility team (the default):
 *   - everyone with a token sees the cluster and the queue: job ids,
 *     names, owners, teams, states, resources and reasons;
 *   - a job's own data (logs, metrics, code, params, command, checkpoints,
 *     outputs, execs) is its owner's, its team's members' and the admins';
 *     a job token sees its own job;
 *   - a dataset's contents are its team's (its maker's when it has no
 *     team) and the admins';
 *   - a token's record (id, dates) is its user's and the admins';
 *   - an agent sees what the tasks on its node need (their code,
 *     checkpoints and manifests) and acts only for its own node and tasks.
 * --visibility open lets every user see every job and dataset whole (a
 * site of one team); the agent and job token rules stay.
 */
#ifndef YARD_MASTER_VISIBILITY_H
#define YARD_MASTER_VISIBILITY_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "master/core.h"

struct route;
struct experiment;
struct jtemplate;

/* The caller as the rule sees it: what its token says. */
struct caller {
	enum role role;
	const char *user;       /* borrowed; node name for an agent */
	const char *team;       /* borrowed or NULL */
	bool team_admin;        /* an admin of team (a token's flag) */
	uint64_t job;           /* ROLE_JOB: the job the token acts for */
};

/* visibility_parse: "team" or "open" (--visibility) into *open_out;
 * YERR(BAD_REQUEST) starting with what (the flag, or the
 * config file's line and key) and the value otherwise. */
int visibility_parse(const char *what, const char *s, bool *open_out, struct errbuf *eb);

/* Whether c sees job j whole (its own data), dataset ds's contents. */
bool visibility_job(const struct master *m, const struct caller *c, const struct job *j);
bool visibility_dataset(const struct master *m, const struct caller *c, const struct dataset *ds);
/* visibility_job_priority: 0 when c may change job j's priority (its owner,
 * an admin, an admin of its team: a token's team_admin); else
 * YERR(FORBIDDEN) saying who may (a team member who may see it may not:
 * a priority is a claim on the team's share). */
int visibility_job_priority(const struct caller *c, const struct job *j, struct errbuf *eb);
/* Whether c sees experiment e (its trials' params and results): as its
 * jobs, its owner, its team's members, admins. */
/* Whether c sees template t (and may delete it): its owner, its team's
 * members, admins (--visibility open: every user). */
bool visibility_template(const struct master *m, const struct caller *c, const struct jtemplate *t);
bool visibility_experiment(const struct master *m, const struct caller *c,
			   const struct experiment *e);
/* visibility_token: whether c may see (and revoke) token t: admins every
 * token, users their own user and admin tokens (not a node's of the same
 * name). */
bool visibility_token(const struct caller *c, const struct token *t);
/* visibility_team: whether c may act for team (submit to it, count
 * against its quota): an admin for any team, a user for the team its
 * token names. NULL team: everyone. */
bool visibility_team(const struct caller *c, const char *team);

/* visibility_redact_job takes out of a job's API document (jobs_job_json)
 * what is the job's own: its code and checkpoint digests, and every field
 * of its spec but those that say what it holds and how it is scheduled
 * (the command, params, env and data go); it adds "redacted": true. */
void visibility_redact_job(json_t *doc);

/* visibility_check applies route's scope to c and the route's path
 * captures caps. 0: the handler may run (also when the object named does
 * not exist: the handler answers 404); else YERR(FORBIDDEN) in eb, naming
 * what and whose, or YERR(NOT_FOUND) for a token (whose ids are not shown
 * to others). */
int visibility_check(const struct master *m, const struct route *route, const struct caller *c,
		     char *const caps[2], struct errbuf *eb);

#endif
