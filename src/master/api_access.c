/* The API's routes of identity: who the caller is, tokens, and the audit
 * log of what they were used for (the route table is api.c's). */
#include "base/compat.h"
#include "master/api_handlers.h"

#include "base/clock.h"
#include "base/parse.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "master/audit.h"
#include "master/auth.h"
#include "master/settings.h"
#include "master/visibility.h"

void h_whoami(struct req *r)
{
	bool admin = r->has_token && r->role == ROLE_ADMIN;

	req_json(r, 200, json_pack("{s:s, s:b, s:s, s:o}", "user", r->user, "admin", admin, "role",
				   role_name(r->role), "team", r->team ? json_string(r->team) : json_null()));
}

#define TOKEN_EXPIRES_MAX_S ((uint64_t)3660 * 86400)

/* A token's "expires": integer seconds or a duration string ("30d",
 * "12h", "90m", parse_duration_str) from now, 1s to 10 years; absent or
 * null: never. OUT: *at, wall clock microseconds (0: never). */
static int token_expiry(const json_t *v, uint64_t *at, struct errbuf *eb)
{
	uint64_t ms = 0;

	*at = 0;
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v) && json_integer_value(v) > 0 &&
	    json_integer_value(v) <= (json_int_t)TOKEN_EXPIRES_MAX_S)
		ms = (uint64_t)json_integer_value(v) * 1000;
	else if (!json_is_string(v) || parse_duration_str(json_string_value(v), &ms) ||
		 ms > TOKEN_EXPIRES_MAX_S * 1000)
		ms = 0;
	if (ms < 1000)
		return error_field(eb, YERR(BAD_REQUEST), "expires",
				   "expires: expected seconds or a duration such as 30d, 12h or 90m, "
				   "from 1s to 10 years");
	*at = wall_us() + ms * 1000;
	return 0;
}

void h_tokens(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *body = body_json(r), *doc;
	const char *user, *team;
	uint64_t expires_at;
	bool admin, team_admin;
	char *tok;

	if (!body)
		return;
	user = json_string_value(json_object_get(body, "user"));
	team = json_string_value(json_object_get(body, "team"));
	admin = json_is_true(json_object_get(body, "admin"));
	team_admin = json_is_true(json_object_get(body, "team_admin"));
	if (!spec_name_valid(user)) {
		error_field(&eb, YERR(BAD_REQUEST), "user", "user: expected [a-z0-9][a-z0-9_.-]{0,62}");
		req_error(r, &eb);
	} else if (team && !spec_name_valid(team)) {
		error_field(&eb, YERR(BAD_REQUEST), "team", "team: expected [a-z0-9][a-z0-9_.-]{0,62}");
		req_error(r, &eb);
	} else if (team_admin && (!team || admin)) {
		error_field(&eb, YERR(BAD_REQUEST), "team_admin", "team_admin: %s", admin ?
			    "an admin token is every team's admin already" : "an admin of which team? (team: required)");
		req_error(r, &eb);
	} else if (token_expiry(json_object_get(body, "expires"), &expires_at, &eb)) {
		req_error(r, &eb);
	} else {
		tok = auth_create_token(r->m, admin ? ROLE_ADMIN : ROLE_USER, user, team, expires_at);
		if (team_admin) {
			r->m->tokens[r->m->ntokens - 1].team_admin = true;
			core_save_token(r->m, &r->m->tokens[r->m->ntokens - 1]);
		}
		doc = auth_token_json(&r->m->tokens[r->m->ntokens - 1]);
		json_object_set_new(doc, "admin", json_boolean(admin));
		json_object_set_new(doc, "token", json_string(tok));
		req_json(r, 201, doc);
		free(tok);
	}
	json_decref(body);
}

void h_tokens_list(struct req *r)
{
	struct caller c = caller_of(r);
	json_t *arr = json_array();

	for (size_t i = 0; i < r->m->ntokens; i++)
		if (visibility_token(&c, &r->m->tokens[i]))
			json_array_append_new(arr, auth_token_json(&r->m->tokens[i]));
	req_json(r, 200, json_pack("{s:o}", "tokens", arr));
}

void h_token_revoke(struct req *r)
{
	struct token *t = auth_find_token(r->m, r->cap[0]);

	if (!t) {
		reply_err(r, YERR(NOT_FOUND), "no token '%s'", r->cap[0]);
		return;
	}
	auth_revoke(r->m, t, wall_us());
	req_json(r, 200, auth_token_json(t));
}

/* ---- audit ---- */

/* POST /v1/admin/reload: settings.h's reload; its refusal (a bad file)
 * changes nothing and names the file, the line and the reason. */
void h_admin_reload(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *doc;

	if (settings_reload(r->m, &doc, &eb))
		req_error(r, &eb);
	else
		req_json(r, 200, doc);
}

void h_audit(struct req *r)
{
	struct errbuf eb = ERRBUF_INIT;
	const char *user = req_query(r, "user"), *since = req_query(r, "since"),
		   *limit = req_query(r, "limit");
	uint64_t since_ms = 0, n = AUDIT_LIMIT_DEFAULT, now = wall_us();
	json_t *doc;

	if (since && (parse_duration_str(since, &since_ms) || since_ms > now / 1000)) {
		reply_err(r, YERR(BAD_REQUEST), "since: expected a duration back from now (1d, 12h, 90m)");
		return;
	}
	if (limit && (parse_u64_str(limit, &n) || n < 1 || n > AUDIT_LIMIT_MAX)) {
		reply_err(r, YERR(BAD_REQUEST), "limit: expected 1..%d", AUDIT_LIMIT_MAX);
		return;
	}
	if (audit_list(r->m, user && *user ? user : NULL, since ? now - since_ms * 1000 : 0, n, &doc,
		       &eb))
		req_error(r, &eb);
	else
		req_json(r, 200, doc);
}
