/* Unit tests for the master's tokens on a real SQLite store: a token
 * authenticates until it expires or is revoked, and then is refused with a
 * message that says which and when; its public id names it but does not
 * authenticate; expiry, revocation and last use survive a reload; and the
 * last use is stored at most once a minute (auth_tick). */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/clock.h"
#include "base/fsutil.h"
#include "base/xalloc.h"
#include "master/auth.h"

struct fixture {
	char dir[32];
	struct master m;
};

static int setup(void **state)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	struct errbuf eb = ERRBUF_INIT;
	int created;

	snprintf(f->dir, sizeof(f->dir), "/tmp/yard-tokens-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->m.data_dir = f->dir;
	f->m.sops = &store_sqlite_ops;
	assert_int_equal(f->m.sops->open(f->dir, &f->m.store, &created, &eb), 0);
	*state = f;
	return 0;
}

static void commit(struct fixture *f)
{
	struct errbuf eb = ERRBUF_INIT;

	if (!f->m.txn_open)
		return;
	assert_int_equal(f->m.batch_err, 0);
	assert_int_equal(f->m.sops->commit(f->m.store, &eb), 0);
	f->m.txn_open = false;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	commit(f);
	core_clear(&f->m);
	f->m.sops->close(f->m.store);
	rm_rf(f->dir);
	free(f);
	return 0;
}

/* The model dropped and loaded again from the store, as a restart does. */
static void reload(struct fixture *f)
{
	struct errbuf eb = ERRBUF_INIT;

	commit(f);
	core_clear(&f->m);
	assert_int_equal(core_load(&f->m, &eb), 0);
}

static char *bearer(const char *tok)
{
	return xasprintf("Bearer %s", tok);
}

static void test_expiry(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	uint64_t now = wall_us();
	char *tok = auth_create_token(&f->m, ROLE_USER, "alice", NULL, now + 60 * 1000000ULL);
	char *h = bearer(tok);
	const struct token *t;

	t = auth_lookup(&f->m, h, now, &eb);
	assert_non_null(t);
	assert_int_equal(eb.code, 0);
	assert_string_equal(t->user, "alice");
	assert_int_equal(auth_token_usable(t, now + 59 * 1000000ULL, &eb), 0);

	/* at its expiry and after: still found (to be named), but refused */
	t = auth_lookup(&f->m, h, now + 60 * 1000000ULL, &eb);
	assert_non_null(t);
	assert_int_equal(eb.code, YERR(UNAUTHORIZED));
	assert_non_null(strstr(eb.msg, "expired at "));
	assert_non_null(strstr(eb.msg, "'alice'"));
	/* a refused lookup is no use */
	assert_int_equal(t->last_used, now);

	/* the expiry survives a restart */
	reload(f);
	errbuf_reset(&eb);
	t = auth_lookup(&f->m, h, now + 61 * 1000000ULL, &eb);
	assert_non_null(t);
	assert_int_equal(eb.code, YERR(UNAUTHORIZED));
	assert_non_null(strstr(eb.msg, "expired"));
	errbuf_reset(&eb);
	assert_non_null(auth_lookup(&f->m, h, now + 1, &eb));
	assert_int_equal(eb.code, 0);

	/* a token without an expiry does not expire */
	free(tok);
	free(h);
	tok = auth_create_token(&f->m, ROLE_USER, "bob", NULL, 0);
	h = bearer(tok);
	assert_non_null(auth_lookup(&f->m, h, UINT64_MAX / 2, &eb));
	assert_int_equal(eb.code, 0);
	free(tok);
	free(h);
}

static void test_revocation(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	uint64_t now = wall_us();
	char *tok = auth_create_token(&f->m, ROLE_USER, "alice", "vision", 0);
	char *other = auth_create_token(&f->m, ROLE_USER, "alice", NULL, 0);
	char *h = bearer(tok), *ho = bearer(other), id[TOKEN_ID_LEN + 1];
	const struct token *t = auth_lookup(&f->m, h, now, &eb);
	struct token *found;

	assert_non_null(t);
	auth_token_id(t, id);
	assert_int_equal(strlen(id), TOKEN_ID_LEN);
	assert_null(strstr(tok, id)); /* the id is of the hash, not the text */
	found = auth_find_token(&f->m, id);
	assert_ptr_equal(found, t);
	assert_null(auth_find_token(&f->m, "0"));

	/* the id itself does not authenticate */
	{
		char *hid = bearer(id);
		assert_null(auth_lookup(&f->m, hid, now, &eb));
		free(hid);
	}

	auth_revoke(&f->m, found, now + 5);
	t = auth_lookup(&f->m, h, now + 6, &eb);
	assert_non_null(t);
	assert_int_equal(eb.code, YERR(UNAUTHORIZED));
	assert_non_null(strstr(eb.msg, "was revoked at "));
	assert_non_null(strstr(eb.msg, id));
	/* revoking again keeps the first time */
	auth_revoke(&f->m, found, now + 100);
	assert_int_equal(found->revoked_at, now + 5);
	/* the user's other token is unaffected */
	errbuf_reset(&eb);
	assert_non_null(auth_lookup(&f->m, ho, now + 6, &eb));
	assert_int_equal(eb.code, 0);

	/* revocation survives a restart, and wins over a later expiry check */
	reload(f);
	errbuf_reset(&eb);
	t = auth_lookup(&f->m, h, now + 7, &eb);
	assert_non_null(t);
	assert_int_equal(t->revoked_at, now + 5);
	assert_string_equal(t->team, "vision");
	assert_int_equal(eb.code, YERR(UNAUTHORIZED));
	assert_non_null(strstr(eb.msg, "revoked"));
	free(tok);
	free(other);
	free(h);
	free(ho);
}

/* last_used: set in memory by every use, stored by auth_tick once per
 * AUTH_USED_SAVE_US at most. */
static void test_last_used_saved_once_a_minute(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	uint64_t t0 = wall_us();
	char *tok = auth_create_token(&f->m, ROLE_USER, "alice", NULL, 0);
	char *h = bearer(tok);
	const struct token *t;

	commit(f);
	assert_non_null(auth_lookup(&f->m, h, t0, &eb));
	auth_tick(&f->m, t0 + 1);
	assert_true(f->m.txn_open); /* the first use is stored at the next tick */
	commit(f);

	assert_non_null(t = auth_lookup(&f->m, h, t0 + 10 * 1000000ULL, &eb));
	assert_int_equal(t->last_used, t0 + 10 * 1000000ULL);
	auth_tick(&f->m, t0 + 30 * 1000000ULL);
	assert_false(f->m.txn_open); /* not within the minute */
	auth_tick(&f->m, t0 + AUTH_USED_SAVE_US);
	assert_true(f->m.txn_open);
	commit(f);
	auth_tick(&f->m, t0 + 5 * AUTH_USED_SAVE_US);
	assert_false(f->m.txn_open); /* no new use: nothing to store */

	reload(f);
	t = auth_lookup(&f->m, h, t0 - 5, &eb); /* an earlier clock does not go back */
	assert_non_null(t);
	assert_int_equal(t->last_used, t0 + 10 * 1000000ULL);
	free(tok);
	free(h);
}

/* A team admin's flag survives a reload; a plain member's token has none. */
static void test_team_admin_reloaded(void **state)
{
	struct fixture *f = *state;
	struct errbuf eb = ERRBUF_INIT;
	char *lead = auth_create_token(&f->m, ROLE_USER, "dave", "vision", 0);
	char *member = auth_create_token(&f->m, ROLE_USER, "carol", "vision", 0);
	char *hl = bearer(lead), *hm = bearer(member);
	const struct token *t;

	f->m.tokens[f->m.ntokens - 2].team_admin = true;
	core_save_token(&f->m, &f->m.tokens[f->m.ntokens - 2]);
	reload(f);
	t = auth_lookup(&f->m, hl, wall_us(), &eb);
	assert_non_null(t);
	assert_true(t->team_admin);
	assert_string_equal(t->team, "vision");
	t = auth_lookup(&f->m, hm, wall_us(), &eb);
	assert_non_null(t);
	assert_false(t->team_admin);
	free(lead);
	free(member);
	free(hl);
	free(hm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revocation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_last_used_saved_once_a_minute, setup, teardown),
		cmocka_unit_test_setup_teardown(test_team_admin_reloaded, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
