/*
 * Leadership of masters sharing a store (master/leader.h): the role's
 * state x event table, and the lease with its fencing epoch on a real
 * PostgreSQL (the server whose URL YARD_TEST_PG holds; meson test runs this
 * program through tests/pg/pgtmp.sh run, and without it the PostgreSQL
 * cases fail, never skip).
 */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <libpq-fe.h>

#include "base/strbuf.h"
#include "master/leader.h"
#include "master/store.h"

/* ---- the table ---- */

static void test_table(void **state)
{
	static const struct {
		enum leader_state from;
		enum leader_event ev;
		int to;
	} cases[] = {
		{ LEADER_STANDBY, LEADER_EV_ACQUIRE, LEADER_LEADING },
		{ LEADER_STANDBY, LEADER_EV_RENEW, -1 },
		{ LEADER_STANDBY, LEADER_EV_LAPSE, -1 },
		{ LEADER_STANDBY, LEADER_EV_DEPOSED, -1 },
		{ LEADER_LEADING, LEADER_EV_ACQUIRE, -1 },
		{ LEADER_LEADING, LEADER_EV_RENEW, LEADER_LEADING },
		{ LEADER_LEADING, LEADER_EV_LAPSE, LEADER_UNSURE },
		{ LEADER_LEADING, LEADER_EV_DEPOSED, LEADER_STANDBY },
		{ LEADER_UNSURE, LEADER_EV_ACQUIRE, -1 },
		{ LEADER_UNSURE, LEADER_EV_RENEW, LEADER_LEADING },
		{ LEADER_UNSURE, LEADER_EV_LAPSE, LEADER_UNSURE },
		{ LEADER_UNSURE, LEADER_EV_DEPOSED, LEADER_STANDBY },
	};
	static_assert(ARRAY_SIZE(cases) == LEADER_STATE__COUNT * LEADER_EVENT__COUNT, "every pair");

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		assert_int_equal(leader_transition(cases[i].from, cases[i].ev), cases[i].to);
	assert_int_equal(leader_transition(LEADER_STATE__COUNT, LEADER_EV_RENEW), -1);
	assert_int_equal(leader_transition(LEADER_LEADING, LEADER_EVENT__COUNT), -1);
	assert_string_equal(leader_state_name(LEADER_STANDBY), "standby");
	assert_string_equal(leader_state_name(LEADER_LEADING), "leader");
}

/* ---- the lease on PostgreSQL ---- */

static const char *pg_url(void)
{
	const char *url = getenv("YARD_TEST_PG");

	if (!url)
		fail_msg("YARD_TEST_PG is not set: run this test through tests/pg/pgtmp.sh run");
	return url;
}

static struct store *open_store(void)
{
	struct errbuf eb = ERRBUF_INIT;
	struct store *st = NULL;
	int created = 0;

	if (store_pg_ops.open(pg_url(), &st, &created, &eb))
		fail_msg("open: %s", eb.msg);
	return st;
}

/* Runs sql on a connection of the test's own; the first value of its
 * first row into out. */
static void raw_sql(const char *sql, char *out, size_t len)
{
	PGconn *c = PQconnectdb(pg_url());
	PGresult *res = PQexec(c, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
		fail_msg("%s: %s", sql, PQerrorMessage(c));
	if (out)
		snprintf(out, len, "%s", PQntuples(res) ? PQgetvalue(res, 0, 0) : "");
	PQclear(res);
	PQfinish(c);
}

/* Every case starts from a free lease and no jobs. */
static int reset(void **state)
{
	struct store *st = open_store(); /* makes the schema on a new server */

	store_pg_ops.close(st);
	raw_sql("UPDATE leader SET epoch = 0, holder = NULL, url = NULL, pid = NULL,"
		" expires_at = '-infinity'; DELETE FROM jobs", NULL, 0);
	(void)state;
	return 0;
}

static struct store_lease acquire_as(struct store *st, const char *name, bool reclaim, unsigned ms)
{
	struct errbuf eb = ERRBUF_INIT;
	struct store_lease l;
	char url[64];

	snprintf(url, sizeof(url), "http://%s:7420", name);
	if (store_pg_ops.lease_acquire(st, name, url, reclaim, ms, &l, &eb))
		fail_msg("lease_acquire %s: %s", name, eb.msg);
	return l;
}

static struct store_lease acquire(struct store *st, const char *name, unsigned ms)
{
	return acquire_as(st, name, false, ms);
}

static int put_job(struct store *st, const char *key, struct errbuf *eb)
{
	int rc = store_pg_ops.begin(st, eb);

	if (!rc)
		rc = store_pg_ops.put(st, STORE_JOB, key, "{}", eb);
	if (!rc)
		return store_pg_ops.commit(st, eb);
	store_pg_ops.rollback(st);
	return rc;
}

static int count_job(void *ctx, const char *key, const char *doc)
{
	struct strbuf *seen = ctx;
	strbuf_addf(seen, "%s ", key);
	(void)doc;
	return 0;
}

static void jobs_seen(struct store *st, const char *want)
{
	struct errbuf eb = ERRBUF_INIT;
	struct strbuf seen = STRBUF_INIT;

	assert_int_equal(store_pg_ops.load(st, STORE_JOB, count_job, &seen, &eb), 0);
	assert_string_equal(seen.buf ? seen.buf : "", want);
	strbuf_release(&seen);
}

static void test_takeover_fences_the_old_leader(void **state)
{
	struct store *a = open_store(), *b = open_store();
	struct errbuf eb = ERRBUF_INIT;
	struct store_lease la, lb;

	(void)state;
	la = acquire(a, "a", 300);
	assert_true(la.mine);
	assert_int_equal(la.epoch, 1);
	/* while a's lease holds, b stands by and learns where a is */
	lb = acquire(b, "b", 300);
	assert_false(lb.mine);
	assert_true(lb.live);
	assert_int_equal(lb.epoch, 1);
	assert_string_equal(lb.url, "http://a:7420");
	store_lease_release(&lb);
	store_pg_ops.lease_fence(a, la.epoch, 300);
	assert_int_equal(put_job(a, "1", &eb), 0);
	/* a is silent past its lease (paused): b takes over at epoch 2 */
	usleep(400 * 1000);
	lb = acquire(b, "b", 5000);
	assert_true(lb.mine);
	assert_int_equal(lb.epoch, 2);
	store_pg_ops.lease_fence(b, lb.epoch, 5000);
	/* a wakes up and commits: refused, and nothing of it is stored */
	assert_int_equal(put_job(a, "2", &eb), YERR(NOT_LEADER));
	assert_non_null(strstr(eb.msg, "epoch 1"));
	errbuf_reset(&eb);
	assert_int_equal(put_job(b, "3", &eb), 0);
	jobs_seen(b, "1 3 ");
	/* a learns who leads */
	store_pg_ops.lease_fence(a, 0, 0);
	la = acquire(a, "a", 300);
	assert_false(la.mine);
	assert_true(la.live);
	assert_string_equal(la.url, "http://b:7420");
	store_lease_release(&la);
	store_lease_release(&lb);
	store_pg_ops.close(a);
	store_pg_ops.close(b);
}

/* A leader's commits renew its lease: a standby never takes a lease that
 * its holder keeps committing within, however long that goes on. */
static void test_commits_renew(void **state)
{
	struct store *a = open_store(), *b = open_store();
	struct errbuf eb = ERRBUF_INIT;
	struct store_lease la, lb;
	char key[8];

	(void)state;
	la = acquire(a, "a", 300);
	assert_true(la.mine);
	store_pg_ops.lease_fence(a, la.epoch, 300);
	for (int i = 0; i < 8; i++) {
		usleep(100 * 1000);
		snprintf(key, sizeof(key), "%d", i + 1);
		assert_int_equal(put_job(a, key, &eb), 0);
		lb = acquire(b, "b", 300);
		assert_false(lb.mine);
		assert_true(lb.live);
		store_lease_release(&lb);
	}
	store_lease_release(&la);
	store_pg_ops.close(a);
	store_pg_ops.close(b);
}

/* A holder that vanished between its fence and its COMMIT keeps the lease
 * row locked; the standby does not wait for the server to notice: it ends
 * that server process, and takes the lease at its next try. */
static void test_vanished_holder_ended(void **state)
{
	struct store *b = open_store();
	PGconn *held = PQconnectdb(pg_url());
	struct errbuf eb = ERRBUF_INIT;
	struct store_lease lb;
	PGresult *res;

	(void)state;
	raw_sql("UPDATE leader SET epoch = 7, expires_at = clock_timestamp() + interval '200 ms'", NULL, 0);
	PQclear(PQexec(held, "BEGIN"));
	res = PQexec(held, "SELECT yard_fence(7, 200)");
	assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
	PQclear(res);
	usleep(300 * 1000);
	/* expired, but locked: this try fails (and ends the holder) */
	assert_int_not_equal(store_pg_ops.lease_acquire(b, "b", "http://b:7420", false, 1000, &lb, &eb), 0);
	errbuf_reset(&eb);
	lb = acquire(b, "b", 1000);
	assert_true(lb.mine);
	assert_int_equal(lb.epoch, 8);
	/* the held transaction can commit nothing */
	res = PQexec(held, "COMMIT");
	assert_int_not_equal(PQresultStatus(res), PGRES_COMMAND_OK);
	PQclear(res);
	PQfinish(held);
	store_lease_release(&lb);
	store_pg_ops.close(b);
}

/* The server is lost between the lease row and the COMMIT (a primary
 * failing over): the try fails, and what it had read of the row is not
 * handed out (a standby that took it as an answer leaked it). A deferred
 * trigger makes that COMMIT fail on a server that stays up. */
static void test_failed_commit_hands_out_nothing(void **state)
{
	struct store *b = open_store();
	struct errbuf eb = ERRBUF_INIT;
	struct store_lease lb;

	(void)state;
	raw_sql("CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS"
		" $$BEGIN RAISE EXCEPTION 'refused at commit'; END$$;"
		" CREATE CONSTRAINT TRIGGER test_refuse AFTER UPDATE ON leader"
		" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_refuse()", NULL, 0);
	memset(&lb, 0xab, sizeof(lb));
	assert_int_not_equal(store_pg_ops.lease_acquire(b, "b", "http://b:7420", false, 1000, &lb, &eb), 0);
	assert_non_null(strstr(eb.msg, "refused at commit"));
	assert_null(lb.url);
	assert_false(lb.mine);
	raw_sql("DROP TRIGGER test_refuse ON leader; DROP FUNCTION test_refuse()", NULL, 0);
	errbuf_reset(&eb);
	lb = acquire(b, "b", 1000);
	assert_true(lb.mine);
	store_lease_release(&lb);
	store_pg_ops.close(b);
}

/* A master started again (the same holder: host and data dir) takes back
 * the lease its old self holds, at once, and the old self is fenced; a
 * leader that stops releases its lease, so a standby takes it at once. */
static void test_reclaim_and_release(void **state)
{
	struct store *old = open_store(), *again = open_store(), *b = open_store();
	struct errbuf eb = ERRBUF_INIT;
	struct store_lease l;

	(void)state;
	l = acquire(old, "a", 60000);
	assert_true(l.mine);
	store_pg_ops.lease_fence(old, l.epoch, 60000);
	store_lease_release(&l);
	/* another holder, or the same one not reclaiming, waits */
	l = acquire(b, "b", 60000);
	assert_false(l.mine);
	store_lease_release(&l);
	l = acquire_as(again, "a", false, 60000);
	assert_false(l.mine);
	store_lease_release(&l);
	l = acquire_as(again, "a", true, 60000);
	assert_true(l.mine);
	assert_int_equal(l.epoch, 2);
	store_lease_release(&l);
	store_pg_ops.lease_fence(again, 2, 60000);
	assert_int_equal(put_job(old, "1", &eb), YERR(NOT_LEADER));
	errbuf_reset(&eb);
	assert_int_equal(store_pg_ops.lease_release(again, 2, &eb), 0);
	l = acquire(b, "b", 60000);
	assert_true(l.mine);
	assert_int_equal(l.epoch, 3);
	/* a release of an epoch that is over ends nothing */
	assert_int_equal(store_pg_ops.lease_release(again, 2, &eb), 0);
	store_lease_release(&l);
	l = acquire(again, "a", 60000);
	assert_false(l.mine);
	assert_true(l.live);
	store_lease_release(&l);
	store_pg_ops.close(old);
	store_pg_ops.close(again);
	store_pg_ops.close(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test_setup(test_takeover_fences_the_old_leader, reset),
		cmocka_unit_test_setup(test_commits_renew, reset),
		cmocka_unit_test_setup(test_vanished_holder_ended, reset),
		cmocka_unit_test_setup(test_reclaim_and_release, reset),
		cmocka_unit_test_setup(test_failed_commit_hands_out_nothing, reset),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
