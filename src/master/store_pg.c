/*
 * The PostgreSQL backend of struct store_ops (libpq), for masters that keep
 * their state in a server of their site rather than in DATA/state.db.
 *
 * One connection, used only by the master's loop thread. Every statement
 * with values is a prepared statement with parameters, prepared again after
 * each (re)connection. Durability is the server's: a COMMIT returns once its
 * WAL is flushed (synchronous_commit=on, PostgreSQL's default). A connection
 * that went bad (the server restarted) is made again before the next
 * statement outside a transaction, so the next begin() after a restart
 * reconnects; inside a transaction the transaction is lost with the
 * connection and the ops fail until the master rolls back.
 *
 * Messages name the store by its connection string without its password
 * (store_pg_display()).
 */
#include "base/compat.h"
#include "master/store.h"

#include <libpq-fe.h>

#include <endian.h>
#include <sys/wait.h>

#include "base/spawn.h"
#include "base/strbuf.h"
#include "base/utf8.h"
#include "base/xalloc.h"
#include "common/logoffset.h"

struct store {
	PGconn *conn;
	char *name; /* the store in messages: the connection string less its password */
	int in_txn;
	int queued; /* writes sent in pipeline mode whose answers are not read yet */
	uint64_t fence_epoch; /* lease_fence: every commit runs yard_fence first (0: none) */
	unsigned fence_ms;
};

/* Writes in a transaction are sent without waiting for their answers
 * (libpq's pipeline mode), so a batch costs a round trip per QUEUE_MAX
 * writes rather than one per row. This many at most are in flight: the
 * server's answers to them (about 30 bytes each) must fit the socket's
 * buffers, or both sides would block writing. */
#define QUEUE_MAX 256

static const char *const table_names[] = { "jobs", "tasks", "nodes", "tokens", "meta", "datasets",
					    "experiments", "templates", "provisions" };
static_assert(ARRAY_SIZE(table_names) == STORE_KIND__COUNT, "store table names");
/* tables whose keys are integers (bigint), loaded in numeric order */
static const int numeric_key[] = { 1, 1, 0, 0, 0, 0, 1, 0, 1 };
static_assert(ARRAY_SIZE(numeric_key) == STORE_KIND__COUNT, "store key kinds");

/*
 * The schema, one step per version: migrations[i] takes a store from
 * version i to version i + 1, inside the transaction that records the new
 * version in schema_version. The numbers are store_sqlite.c's: the same
 * version is the same tables in both backends. A step that has shipped is
 * never edited; a change is a new step at the end (and STORE_SCHEMA_VERSION
 * one more). Version 0 is a database without schema_version: no store yet
 * (step 1 does not adopt tables of the same names that something else made:
 * it fails on them).
 *
 * Text is ordered COLLATE "C" (bytes, as SQLite orders it) whatever the
 * database's collation. Metric points and audit entries number their
 * arrival (id), which SQLite's rowid does there.
 */
static const char *const migrations[] = {
	/* 1: the documents (one table per kind), metric points and the
	 * cursors of their streams, the audit log */
	"CREATE TABLE jobs (k bigint PRIMARY KEY, doc text NOT NULL);"
	"CREATE TABLE tasks (k bigint PRIMARY KEY, doc text NOT NULL);"
	"CREATE TABLE nodes (k text COLLATE \"C\" PRIMARY KEY, doc text NOT NULL);"
	"CREATE TABLE tokens (k text COLLATE \"C\" PRIMARY KEY, doc text NOT NULL);"
	"CREATE TABLE meta (k text COLLATE \"C\" PRIMARY KEY, doc text NOT NULL);"
	"CREATE TABLE datasets (k text COLLATE \"C\" PRIMARY KEY, doc text NOT NULL);"
	"CREATE TABLE metrics (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
	" task_id bigint NOT NULL, name text COLLATE \"C\" NOT NULL, step bigint NOT NULL,"
	" value double precision NOT NULL, time bigint NOT NULL);"
	"CREATE INDEX metrics_series ON metrics (task_id, name, step);"
	"CREATE TABLE metric_cursors (task_id bigint NOT NULL, stream integer NOT NULL,"
	" off bigint NOT NULL, PRIMARY KEY (task_id, stream));"
	"CREATE TABLE audit (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
	" time bigint NOT NULL, \"user\" text, role text, token text, addr text,"
	" method text NOT NULL, path text NOT NULL, status integer NOT NULL, code text);"
	"CREATE INDEX audit_user ON audit (\"user\", id);",
	/* 2: blobs, as pieces: a log's appends, an archive's PG_BLOB_PIECE
	 * slices; a blob is its rows in off order, each starting where the one
	 * before ends. Their TOAST is compressed with lz4 where the server has
	 * it (pg_settings lists it then): log appends went 2.8x as fast as with
	 * pglz, the default, for the same size (docs/design-notes.md). */
	"CREATE TABLE blobs (name text COLLATE \"C\" NOT NULL, off bigint NOT NULL,"
	" data bytea NOT NULL, PRIMARY KEY (name, off));"
	"DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression'"
	" AND 'lz4' = ANY (enumvals)) THEN"
	" EXECUTE 'ALTER TABLE blobs ALTER COLUMN data SET COMPRESSION lz4'; END IF; END $$;",
	/* 3: the leader lease (one row): its epoch, one more at every change
	 * of holder; the holder's name, advertised URL and server process (the
	 * one a standby may end, below); when it expires, by the server's
	 * clock. yard_fence(epoch, ms) is what every commit of the leader runs
	 * last: it renews the lease if it is still at epoch, and otherwise
	 * fails the transaction with SQLSTATE YF001. */
	"CREATE TABLE leader (id integer PRIMARY KEY CHECK (id = 1), epoch bigint NOT NULL,"
	" holder text, url text, pid integer, expires_at timestamptz NOT NULL);"
	"INSERT INTO leader VALUES (1, 0, NULL, NULL, NULL, '-infinity');"
	"CREATE FUNCTION yard_fence(e bigint, ms bigint) RETURNS void LANGUAGE plpgsql AS $$"
	" BEGIN"
	"  UPDATE leader SET expires_at = clock_timestamp() + ms * interval '1 millisecond',"
	"   pid = pg_backend_pid() WHERE id = 1 AND epoch = e;"
	"  IF NOT FOUND THEN"
	"   RAISE EXCEPTION 'the lease of epoch % was taken by another master', e"
	"    USING ERRCODE = 'YF001';"
	"  END IF;"
	" END $$;",
	/* 4: experiments, the documents of sweeps (master/experiments.h) */
	"CREATE TABLE experiments (k bigint PRIMARY KEY, doc text NOT NULL);",
	/* 5: templates, jobs run again on each new version of a dataset (master/templates.h) */
	"CREATE TABLE templates (k text COLLATE \"C\" PRIMARY KEY, doc text NOT NULL);",
	/* 6: provisioning requests of elastic pools (master/elastic.h) */
	"CREATE TABLE provisions (k bigint PRIMARY KEY, doc text NOT NULL);",
};
static_assert(ARRAY_SIZE(migrations) == STORE_SCHEMA_VERSION, "one migration per schema version");

/* The key of the advisory lock that masters opening one database at once
 * take, so that one migrates and the others then see its version. */
#define MIGRATION_LOCK "7420001"

/* The prepared statements other than each kind's put, del and load. */
static const struct {
	const char *name;
	const char *sql;
} row_stmts[] = {
	{ "get_meta", "SELECT doc FROM meta WHERE k = $1" },
	{ "m_insert",
	  "INSERT INTO metrics (task_id, name, step, value, time)"
	  " SELECT $1, n, s, v, t FROM unnest($2::text[], $3::bigint[], $4::float8[], $5::bigint[])"
	  " WITH ORDINALITY AS p (n, s, v, t, i) ORDER BY i" },
	{ "m_last", "SELECT MAX(step) FROM metrics WHERE task_id = $1 AND name = $2" },
	{ "m_query_all",
	  "SELECT name, step, value, time FROM metrics WHERE task_id = $1 ORDER BY name, step, id" },
	{ "m_query_one",
	  "SELECT name, step, value, time FROM metrics WHERE task_id = $1 AND name = $2"
	  " ORDER BY step, id" },
	{ "m_cursor_get", "SELECT off FROM metric_cursors WHERE task_id = $1 AND stream = $2" },
	{ "m_cursor_set",
	  "INSERT INTO metric_cursors (task_id, stream, off) VALUES ($1, $2, $3)"
	  " ON CONFLICT (task_id, stream) DO UPDATE SET off = EXCLUDED.off" },
	{ "a_insert",
	  "INSERT INTO audit (time, \"user\", role, token, addr, method, path, status, code)"
	  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)" },
	{ "b_size", "SELECT off + length(data) FROM blobs WHERE name = $1 ORDER BY off DESC LIMIT 1" },
	{ "b_insert", "INSERT INTO blobs (name, off, data) VALUES ($1, $2::bigint, $3::bytea)" },
	{ "b_delete", "DELETE FROM blobs WHERE name = $1" },
	/* the pieces that hold [$2, $3): from the last one starting at or before $2 */
	{ "b_read",
	  "SELECT off, data FROM blobs WHERE name = $1 AND off < $3::bigint AND off >= coalesce("
	  "(SELECT max(off) FROM blobs WHERE name = $1 AND off <= $2::bigint), 0) ORDER BY off" },
	{ "a_query",
	  "SELECT id, time, \"user\", role, token, addr, method, path, status, code FROM audit"
	  " WHERE ($1::text IS NULL OR \"user\" = $1) AND time >= $2 ORDER BY id DESC LIMIT $3" },
	{ "l_fence", "SELECT yard_fence($1, $2)" },
	{ "l_release", "UPDATE leader SET expires_at = '-infinity' WHERE id = 1 AND epoch = $1" },
	/* takes an expired lease; answers the row as it was, and the new
	 * epoch when taken */
	{ "l_take",
	  "WITH t AS (UPDATE leader SET epoch = epoch + 1, holder = $1, url = $2, pid = pg_backend_pid(),"
	  " expires_at = clock_timestamp() + $3 * interval '1 millisecond'"
	  " WHERE id = 1 AND (expires_at < clock_timestamp() OR ($4 AND holder = $1)) RETURNING epoch)"
	  " SELECT (SELECT epoch FROM t), epoch, url, expires_at > clock_timestamp() FROM leader WHERE id = 1" },
	/* a holder whose lease expired while its server process kept the row
	 * locked (a transaction its master never ended: the master's machine
	 * vanished between the fence and the COMMIT) would stop every takeover
	 * until the server noticed; the processes that lock the table are
	 * ended instead, once the lease has expired (another standby's try
	 * among them, which tries again) */
	{ "l_end",
	  "SELECT pg_terminate_backend(l.pid) FROM pg_locks l"
	  " WHERE l.relation = 'leader'::regclass AND l.granted AND l.pid <> pg_backend_pid()"
	  " AND EXISTS (SELECT 1 FROM leader WHERE id = 1 AND expires_at < clock_timestamp())" },
};

/* ---- the store's name: its connection string without the password ---- */

static bool password_keyword(const char *kw, size_t len)
{
	static const char *const secret[] = { "password", "sslpassword" };

	for (size_t i = 0; i < ARRAY_SIZE(secret); i++)
		if (strlen(secret[i]) == len && !strncmp(kw, secret[i], len))
			return true;
	return false;
}

/* A URI keeps its form: the password of its user part and password
 * parameters are cut. */
static char *display_uri(const char *uri, size_t scheme_len)
{
	struct strbuf sb = STRBUF_INIT;
	const char *net = uri + scheme_len, *end = net + strcspn(net, "/?"), *at = NULL, *q;

	for (const char *p = net; p < end; p++)
		if (*p == '@')
			at = p;
	strbuf_add(&sb, uri, scheme_len);
	if (at) {
		const char *colon = memchr(net, ':', (size_t)(at - net));
		strbuf_add(&sb, net, (size_t)((colon ? colon : at) - net));
		net = at;
	}
	q = strchr(end, '?');
	strbuf_add(&sb, net, (size_t)((q ? q : end + strlen(end)) - net));
	if (q) {
		char sep = '?';
		for (const char *p = q + 1; *p;) {
			size_t len = strcspn(p, "&");
			if (!password_keyword(p, strcspn(p, "=&"))) {
				strbuf_addch(&sb, sep);
				strbuf_add(&sb, p, len);
				sep = '&';
			}
			p += len;
			if (*p == '&')
				p++;
		}
	}
	return strbuf_detach(&sb, NULL);
}

/* A keyword string is written again from what libpq parsed of it, less the
 * keywords libpq itself hides (dispchar "*": the passwords). */
static char *display_keywords(const char *conninfo)
{
	PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
	struct strbuf sb = STRBUF_INIT;

	if (!opts)
		return xstrdup("(a connection string that libpq cannot parse)");
	for (PQconninfoOption *o = opts; o->keyword; o++) {
		if (!o->val || o->dispchar[0] == '*')
			continue;
		if (sb.len)
			strbuf_addch(&sb, ' ');
		strbuf_addf(&sb, "%s=", o->keyword);
		if (*o->val && !strpbrk(o->val, " '\\")) {
			strbuf_addstr(&sb, o->val);
			continue;
		}
		strbuf_addch(&sb, '\'');
		for (const char *p = o->val; *p; p++) {
			if (*p == '\'' || *p == '\\')
				strbuf_addch(&sb, '\\');
			strbuf_addch(&sb, *p);
		}
		strbuf_addch(&sb, '\'');
	}
	PQconninfoFree(opts);
	return strbuf_detach(&sb, NULL);
}

char *store_pg_display(const char *conninfo)
{
	static const char *const schemes[] = { "postgresql://", "postgres://" };

	for (size_t i = 0; i < ARRAY_SIZE(schemes); i++)
		if (!strncmp(conninfo, schemes[i], strlen(schemes[i])))
			return display_uri(conninfo, strlen(schemes[i]));
	return display_keywords(conninfo);
}

/* ---- errors, statements ---- */

/* The first line of a libpq message, without "ERROR:  " and the like. */
static void add_first_line(struct strbuf *sb, const char *msg)
{
	static const char *const severities[] = { "ERROR:  ", "FATAL:  ", "PANIC:  " };

	for (size_t i = 0; i < ARRAY_SIZE(severities); i++)
		if (!strncmp(msg, severities[i], strlen(severities[i])))
			msg += strlen(severities[i]);
	strbuf_add(sb, msg, strcspn(msg, "\n"));
	if (!sb->len)
		strbuf_addstr(sb, "unknown error");
}

/* Reports a failed statement (res, or NULL when it could not be sent):
 * YERR(NO_SPACE) where the server's disk is full (SQLSTATE 53100),
 * YERR(NOT_LEADER) where yard_fence found the lease taken (YF001),
 * YERR(IO) otherwise. */
static int pg_error(struct store *st, struct errbuf *eb, const PGresult *res, const char *what)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res && *PQresultErrorMessage(res) ? PQresultErrorMessage(res)
							   : PQerrorMessage(st->conn);
	struct strbuf sb = STRBUF_INIT;
	int code = state && !strcmp(state, "53100")   ? YERR(NO_SPACE)
		   : state && !strcmp(state, "YF001") ? YERR(NOT_LEADER)
						      : YERR(IO);

	add_first_line(&sb, msg);
	if (PQstatus(st->conn) != CONNECTION_OK && strcmp(what, "connect"))
		strbuf_addstr(&sb, " (the connection is lost; it is made again at the next transaction)");
	error(eb, code, "store '%s': cannot %s: %s", st->name, what, sb.buf);
	strbuf_release(&sb);
	return code;
}

/* Runs a statement with no values (BEGIN, DDL); 0 or an error. */
static int pg_simple(struct store *st, const char *sql, const char *what, struct errbuf *eb)
{
	PGresult *res = PQexec(st->conn, sql);
	int ret = 0;

	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
		ret = pg_error(st, eb, res, what);
	PQclear(res);
	return ret;
}

static int pg_prepare(struct store *st, const char *name, const char *sql, struct errbuf *eb)
{
	PGresult *res = PQprepare(st->conn, name, sql, 0, NULL);
	int ret = 0;

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		ret = pg_error(st, eb, res, "prepare a statement");
	PQclear(res);
	return ret;
}

/* Prepares every statement on a new connection. */
static int pg_prepare_all(struct store *st, struct errbuf *eb)
{
	int ret = 0;

	for (int i = 0; !ret && i < STORE_KIND__COUNT; i++) {
		const char *t = table_names[i], *k = numeric_key[i] ? "$1::bigint" : "$1";
		char *name = xasprintf("put_%s", t);
		char *sql = xasprintf("INSERT INTO %s (k, doc) VALUES (%s, $2)"
				      " ON CONFLICT (k) DO UPDATE SET doc = EXCLUDED.doc", t, k);
		ret = pg_prepare(st, name, sql, eb);
		free(name);
		free(sql);
		name = xasprintf("del_%s", t);
		sql = xasprintf("DELETE FROM %s WHERE k = %s", t, k);
		if (!ret)
			ret = pg_prepare(st, name, sql, eb);
		free(name);
		free(sql);
		name = xasprintf("load_%s", t);
		/* by the column, not by its text (the output column is k too) */
		sql = xasprintf("SELECT k::text, doc FROM %s ORDER BY %s.k", t, t);
		if (!ret)
			ret = pg_prepare(st, name, sql, eb);
		free(name);
		free(sql);
	}
	for (size_t i = 0; !ret && i < ARRAY_SIZE(row_stmts); i++)
		ret = pg_prepare(st, row_stmts[i].name, row_stmts[i].sql, eb);
	return ret;
}

/* Before a statement: a connection that went bad outside a transaction is
 * made again (PQreset, the same parameters), with its statements. */
static int pg_ready(struct store *st, struct errbuf *eb)
{
	if (PQstatus(st->conn) == CONNECTION_OK)
		return 0;
	if (st->in_txn)
		return error(eb, YERR(IO), "store '%s': the connection was lost in a transaction",
			     st->name);
	PQreset(st->conn);
	st->queued = 0;
	if (PQstatus(st->conn) != CONNECTION_OK)
		return pg_error(st, eb, NULL, "connect");
	if (PQpipelineStatus(st->conn) != PQ_PIPELINE_OFF && !PQexitPipelineMode(st->conn))
		return pg_error(st, eb, NULL, "leave pipeline mode");
	fprintf(stderr, "yard master: store '%s': connected again\n", st->name);
	return pg_prepare_all(st, eb);
}

/* Reads the answers of the writes in flight and leaves pipeline mode;
 * returns the first failure (the server skips the rest of the writes after
 * it, and the transaction can then only roll back). */
static int pg_settle(struct store *st, struct errbuf *eb)
{
	PGresult *res;
	int ret = 0;

	if (PQpipelineStatus(st->conn) == PQ_PIPELINE_OFF)
		return 0;
	if (!PQpipelineSync(st->conn)) {
		ret = pg_error(st, eb, NULL, "write");
		goto out;
	}
	/* each write's answer is its results, then NULL; the sync's is one
	 * PGRES_PIPELINE_SYNC (a lost connection: an error, then only NULLs) */
	for (int i = 0; i < st->queued; i++) {
		while ((res = PQgetResult(st->conn))) {
			ExecStatusType s = PQresultStatus(res);
			if (!ret && s == PGRES_PIPELINE_ABORTED)
				ret = error(eb, YERR(IO), "store '%s': cannot write: an earlier write failed",
					    st->name);
			else if (!ret && s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
				ret = pg_error(st, eb, res, "write");
			PQclear(res);
		}
	}
	while ((res = PQgetResult(st->conn))) {
		bool sync = PQresultStatus(res) == PGRES_PIPELINE_SYNC;
		PQclear(res);
		if (sync)
			break;
	}
out:
	st->queued = 0;
	if (!PQexitPipelineMode(st->conn) && !ret)
		ret = pg_error(st, eb, NULL, "write");
	return ret;
}

/* Sends a write: in a transaction, into the pipeline (its failure is seen
 * by the next read, or by the commit); outside one, at once. lens and fmts
 * as PQsendQueryPrepared has them (NULL: every value is text). */
static int pg_write_values(struct store *st, const char *stmt, int n, const char *const *vals,
			   const int *lens, const int *fmts, const char *what, struct errbuf *eb)
{
	int ret;

	if ((ret = pg_ready(st, eb)))
		return ret;
	if (PQpipelineStatus(st->conn) == PQ_PIPELINE_OFF && !PQenterPipelineMode(st->conn))
		return pg_error(st, eb, NULL, what);
	if (!PQsendQueryPrepared(st->conn, stmt, n, vals, lens, fmts, 0))
		return pg_error(st, eb, NULL, what);
	if (++st->queued >= QUEUE_MAX || !st->in_txn)
		return pg_settle(st, eb);
	return 0;
}

static int pg_write(struct store *st, const char *stmt, int n, const char *const *vals,
		    const char *what, struct errbuf *eb)
{
	return pg_write_values(st, stmt, n, vals, NULL, NULL, what, eb);
}

/* Runs a prepared statement with text values and an answer in format
 * (0 text, 1 binary): *out (caller PQclears) when it succeeded. */
/* A read's values are text that came from outside (a user named in a query,
 * a series name): text that is not UTF-8 can equal nothing the server
 * holds (the database is UTF-8, and it would refuse the statement), so
 * such a read finds nothing rather than fail. */
static bool texts_utf8(int n, const char *const *vals)
{
	for (int i = 0; i < n; i++)
		if (vals[i] && !utf8_valid(vals[i], strlen(vals[i])))
			return false;
	return true;
}

static int pg_exec_format(struct store *st, const char *stmt, int n, const char *const *vals,
			  int format, PGresult **out, const char *what, struct errbuf *eb)
{
	PGresult *res;
	int ret;

	*out = NULL;
	if ((ret = pg_ready(st, eb)) || (ret = pg_settle(st, eb)))
		return ret;
	if (!texts_utf8(n, vals)) {
		*out = PQmakeEmptyPGresult(st->conn, PGRES_TUPLES_OK);
		return 0;
	}
	res = PQexecPrepared(st->conn, stmt, n, vals, NULL, NULL, format);
	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
		ret = pg_error(st, eb, res, what);
		PQclear(res);
		return ret;
	}
	*out = res;
	return 0;
}

/* Runs a prepared statement whose answer is at most one row, in text. */
static int pg_exec(struct store *st, const char *stmt, int n, const char *const *vals,
		   PGresult **out, const char *what, struct errbuf *eb)
{
	return pg_exec_format(st, stmt, n, vals, 0, out, what, eb);
}

/* Runs a prepared statement and calls row for each row of its answer as it
 * arrives (single-row mode: a large table is never held in memory whole).
 * row returning non-zero stops the calls with that code; the rest of the
 * answer is read and dropped. */
static int pg_rows(struct store *st, const char *stmt, int n, const char *const *vals,
		   int (*row)(void *ctx, const PGresult *res), void *ctx, const char *what,
		   struct errbuf *eb)
{
	PGresult *res;
	int ret;

	if ((ret = pg_ready(st, eb)) || (ret = pg_settle(st, eb)))
		return ret;
	if (!texts_utf8(n, vals))
		return 0;
	if (!PQsendQueryPrepared(st->conn, stmt, n, vals, NULL, NULL, 0))
		return pg_error(st, eb, NULL, what);
	if (!PQsetSingleRowMode(st->conn))
		ret = error(eb, YERR(INTERNAL), "store '%s': cannot %s: no single-row mode", st->name, what);
	while ((res = PQgetResult(st->conn))) {
		ExecStatusType s = PQresultStatus(res);
		if (s == PGRES_SINGLE_TUPLE) {
			if (!ret)
				ret = row(ctx, res);
		} else if (s != PGRES_TUPLES_OK && !ret) {
			ret = pg_error(st, eb, res, what);
		}
		PQclear(res);
	}
	return ret;
}

/* A column of a row: NULL when the value is NULL. */
static const char *col(const PGresult *res, int c)
{
	return PQgetisnull(res, 0, c) ? NULL : PQgetvalue(res, 0, c);
}

static int64_t col_i64(const PGresult *res, int c)
{
	const char *v = col(res, c);
	return v ? strtoll(v, NULL, 10) : 0;
}

/* ---- opening: connect, migrate ---- */

/* Brings the schema to STORE_SCHEMA_VERSION, in one transaction; refuses a
 * store of a newer master. *created: the database held no store. */
static int pg_migrate(struct store *st, int *created, struct errbuf *eb)
{
	PGresult *res = NULL;
	int64_t version;
	char v[24];
	const char *vals[] = { v };
	int ret;

	*created = 0;
	if ((ret = pg_simple(st, "BEGIN", "begin a transaction", eb)))
		return ret;
	ret = pg_simple(st, "SELECT pg_advisory_xact_lock(" MIGRATION_LOCK ")", "lock the schema", eb);
	if (ret)
		goto out;
	res = PQexec(st->conn, "SELECT to_regclass('schema_version') IS NULL");
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		ret = pg_error(st, eb, res, "read the schema version");
		goto out;
	}
	if (!strcmp(PQgetvalue(res, 0, 0), "t"))
		ret = pg_simple(st, "CREATE TABLE schema_version (version integer NOT NULL)",
				"create the schema_version table", eb);
	PQclear(res);
	res = NULL;
	if (ret)
		goto out;
	res = PQexec(st->conn, "SELECT version FROM schema_version");
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		ret = pg_error(st, eb, res, "read the schema version");
		goto out;
	}
	if (PQntuples(res) > 1) {
		ret = error(eb, YERR(IO), "store '%s': schema_version holds %d rows, not one", st->name,
			    PQntuples(res));
		goto out;
	}
	version = PQntuples(res) ? col_i64(res, 0) : 0;
	if (version > STORE_SCHEMA_VERSION) {
		ret = error(eb, YERR(IO),
			    "store '%s' is at schema version %" PRId64 ", newer than this master's %d:"
			    " it was written by a newer yard master, run that one",
			    st->name, version, STORE_SCHEMA_VERSION);
		goto out;
	}
	if (version == STORE_SCHEMA_VERSION)
		goto out;
	*created = version == 0;
	for (int64_t i = version; !ret && i < STORE_SCHEMA_VERSION; i++) {
		char *what = xasprintf("migrate the schema from version %" PRId64 " to %" PRId64, i, i + 1);
		ret = pg_simple(st, migrations[i], what, eb);
		free(what);
	}
	if (!ret)
		ret = pg_simple(st, "DELETE FROM schema_version", "record the schema version", eb);
	snprintf(v, sizeof(v), "%d", STORE_SCHEMA_VERSION);
	if (!ret) {
		PGresult *ins = PQexecParams(st->conn, "INSERT INTO schema_version (version) VALUES ($1)",
					     1, NULL, vals, NULL, NULL, 0);
		if (PQresultStatus(ins) != PGRES_COMMAND_OK)
			ret = pg_error(st, eb, ins, "record the schema version");
		PQclear(ins);
	}
	if (!ret && version)
		fprintf(stderr, "yard master: store '%s': schema upgraded from version %" PRId64 " to %d\n",
			st->name, version, STORE_SCHEMA_VERSION);
out:
	PQclear(res);
	if (!ret)
		return pg_simple(st, "COMMIT", "commit the schema", eb);
	PQclear(PQexec(st->conn, "ROLLBACK"));
	return ret;
}

static void pg_close(struct store *st)
{
	if (!st)
		return;
	PQfinish(st->conn);
	free(st->name);
	free(st);
}

/* Connects to the database of conninfo: *out (pg_close it, also on
 * error) has no statement prepared and its schema is not looked at. */
static int pg_connect(const char *conninfo, struct store **out, struct errbuf *eb)
{
	/* Defaults the connection string may override: a server that cannot
	 * be reached, or stops answering, fails the statement instead of
	 * hanging the master's loop (TCP; a unix socket fails at once). */
	const char *keys[8], *vals[8];
	struct store *st = xcalloc(1, sizeof(*st));
	char *err = NULL;
	PQconninfoOption *opts;
	size_t n = 0;
	int ret = 0;

	*out = st;
	st->name = store_pg_display(conninfo);
	opts = PQconninfoParse(conninfo, &err);
	if (!opts) {
		ret = error(eb, YERR(BAD_REQUEST), "--store '%s': %.*s", st->name,
			    err ? (int)strcspn(err, "\n") : 0, err ? err : "");
		PQfreemem(err);
		goto out;
	}
	PQconninfoFree(opts);
	if (!getenv("PGCONNECT_TIMEOUT")) {
		keys[n] = "connect_timeout";
		vals[n++] = "10";
	}
	keys[n] = "keepalives_idle", vals[n++] = "10";
	keys[n] = "keepalives_interval", vals[n++] = "5";
	keys[n] = "keepalives_count", vals[n++] = "3";
	keys[n] = "tcp_user_timeout", vals[n++] = "30000";
	keys[n] = "fallback_application_name", vals[n++] = "yard-master";
	keys[n] = "dbname", vals[n++] = conninfo; /* expanded: its keywords win */
	keys[n] = NULL, vals[n] = NULL;
	st->conn = PQconnectdbParams(keys, vals, 1);
	if (PQstatus(st->conn) != CONNECTION_OK)
		ret = pg_error(st, eb, NULL, "connect");
out:
	return ret;
}

static int pg_open(const char *conninfo, struct store **out, int *created, struct errbuf *eb)
{
	struct store *st;
	int ret = pg_connect(conninfo, &st, eb);

	*out = NULL;
	*created = 0;
	if (!ret)
		ret = pg_migrate(st, created, eb);
	if (!ret)
		ret = pg_prepare_all(st, eb);
	if (ret)
		pg_close(st);
	else
		*out = st;
	return ret;
}

/* ---- transactions ---- */

static int pg_begin(struct store *st, struct errbuf *eb)
{
	int ret = pg_ready(st, eb);

	if (ret)
		return ret;
	ret = pg_simple(st, "BEGIN", "begin a transaction", eb);
	if (ret && PQstatus(st->conn) != CONNECTION_OK) {
		/* an idle connection finds out at its first statement that the
		 * server restarted: connect again, once */
		errbuf_reset(eb);
		ret = pg_ready(st, eb);
		if (!ret)
			ret = pg_simple(st, "BEGIN", "begin a transaction", eb);
	}
	if (!ret)
		st->in_txn = 1;
	return ret;
}

static void pg_rollback(struct store *st)
{
	PGTransactionStatusType ts;

	pg_settle(st, NULL);
	ts = PQtransactionStatus(st->conn);
	if (PQstatus(st->conn) == CONNECTION_OK && (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR))
		PQclear(PQexec(st->conn, "ROLLBACK"));
	st->in_txn = 0;
}

static int pg_commit(struct store *st, struct errbuf *eb)
{
	PGresult *res;
	int ret = 0;

	if (PQstatus(st->conn) != CONNECTION_OK) {
		ret = error(eb, YERR(IO), "store '%s': cannot commit: the connection was lost", st->name);
		goto out;
	}
	if (st->fence_epoch) {
		/* last in the pipeline: its lock on the lease row is held from
		 * here to the COMMIT, one round trip */
		char epoch[24], ms[16];
		const char *vals[] = { epoch, ms };
		snprintf(epoch, sizeof(epoch), "%" PRIu64, st->fence_epoch);
		snprintf(ms, sizeof(ms), "%u", st->fence_ms);
		if ((ret = pg_write(st, "l_fence", 2, vals, "renew the lease", eb)))
			goto out;
	}
	if ((ret = pg_settle(st, eb)))
		goto out;
	res = PQexec(st->conn, "COMMIT");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		ret = pg_error(st, eb, res, "commit");
	else if (strcmp(PQcmdStatus(res), "COMMIT"))
		/* a transaction in which a statement failed ends in a ROLLBACK */
		ret = error(eb, YERR(IO), "store '%s': cannot commit: a statement of the transaction failed",
			    st->name);
	PQclear(res);
out:
	if (ret)
		pg_rollback(st);
	st->in_txn = 0;
	return ret;
}

/* ---- documents ---- */

static int pg_put(struct store *st, enum store_kind kind, const char *key, const char *doc,
		  struct errbuf *eb)
{
	char stmt[32];
	const char *vals[] = { key, doc };

	snprintf(stmt, sizeof(stmt), "put_%s", table_names[kind]);
	return pg_write(st, stmt, 2, vals, "write a row", eb);
}

static int pg_del(struct store *st, enum store_kind kind, const char *key, struct errbuf *eb)
{
	char stmt[32];
	const char *vals[] = { key };

	snprintf(stmt, sizeof(stmt), "del_%s", table_names[kind]);
	return pg_write(st, stmt, 1, vals, "delete a row", eb);
}

static int pg_get_meta(struct store *st, const char *key, char **out, struct errbuf *eb)
{
	const char *vals[] = { key };
	PGresult *res;
	int ret = pg_exec(st, "get_meta", 1, vals, &res, "read meta", eb);

	*out = NULL;
	if (!ret && PQntuples(res) == 1)
		*out = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return ret;
}

struct load_ctx {
	store_load_fn fn;
	void *ctx;
};

static int load_row(void *ctx, const PGresult *res)
{
	struct load_ctx *l = ctx;
	return l->fn(l->ctx, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
}

static int pg_load(struct store *st, enum store_kind kind, store_load_fn fn, void *ctx,
		   struct errbuf *eb)
{
	struct load_ctx l = { fn, ctx };
	char stmt[32];

	snprintf(stmt, sizeof(stmt), "load_%s", table_names[kind]);
	return pg_rows(st, stmt, 0, NULL, load_row, &l, "load", eb);
}

/* ---- training metrics ---- */

/* Appends s to a text[] literal as a quoted element. */
static void add_array_text(struct strbuf *sb, const char *s)
{
	strbuf_addch(sb, sb->len ? ',' : '{');
	strbuf_addch(sb, '"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			strbuf_addch(sb, '\\');
		strbuf_addch(sb, *s);
	}
	strbuf_addch(sb, '"');
}

static int pg_metrics_append(struct store *st, uint64_t task_id, const struct store_metric *pts,
			     size_t n, struct errbuf *eb)
{
	struct strbuf names = STRBUF_INIT, steps = STRBUF_INIT, values = STRBUF_INIT,
		      times = STRBUF_INIT;
	char task[24];
	const char *vals[5];
	int ret;

	if (!n)
		return 0;
	snprintf(task, sizeof(task), "%" PRIu64, task_id);
	for (size_t i = 0; i < n; i++) {
		const char *sep = i ? "," : "{";
		add_array_text(&names, pts[i].name);
		strbuf_addf(&steps, "%s%" PRId64, sep, pts[i].step);
		strbuf_addf(&values, "%s%.17g", sep, pts[i].value);
		strbuf_addf(&times, "%s%" PRId64, sep, pts[i].time);
	}
	strbuf_addch(&names, '}');
	strbuf_addch(&steps, '}');
	strbuf_addch(&values, '}');
	strbuf_addch(&times, '}');
	vals[0] = task, vals[1] = names.buf, vals[2] = steps.buf, vals[3] = values.buf, vals[4] = times.buf;
	ret = pg_write(st, "m_insert", 5, vals, "store metrics", eb);
	strbuf_release(&names);
	strbuf_release(&steps);
	strbuf_release(&values);
	strbuf_release(&times);
	return ret;
}

static int pg_metrics_last_step(struct store *st, uint64_t task_id, const char *name, int64_t *out,
				struct errbuf *eb)
{
	char task[24];
	const char *vals[] = { task, name };
	PGresult *res;
	int ret;

	*out = -1;
	snprintf(task, sizeof(task), "%" PRIu64, task_id);
	ret = pg_exec(st, "m_last", 2, vals, &res, "read a metric series", eb);
	if (!ret && PQntuples(res) == 1 && col(res, 0))
		*out = col_i64(res, 0);
	PQclear(res);
	return ret;
}

struct metric_ctx {
	store_metric_fn fn;
	void *ctx;
};

static int metric_row(void *ctx, const PGresult *res)
{
	struct metric_ctx *q = ctx;
	struct store_metric pt = {
		.name = PQgetvalue(res, 0, 0),
		.step = col_i64(res, 1),
		.value = strtod(PQgetvalue(res, 0, 2), NULL),
		.time = col_i64(res, 3),
	};
	return q->fn(q->ctx, &pt);
}

static int pg_metrics_query(struct store *st, uint64_t task_id, const char *name, store_metric_fn fn,
			    void *ctx, struct errbuf *eb)
{
	struct metric_ctx q = { fn, ctx };
	char task[24];
	const char *vals[] = { task, name };

	snprintf(task, sizeof(task), "%" PRIu64, task_id);
	return pg_rows(st, name ? "m_query_one" : "m_query_all", name ? 2 : 1, vals, metric_row, &q,
		       "read metrics", eb);
}

static int pg_metrics_cursor_get(struct store *st, uint64_t task_id, int stream, uint64_t *out,
				 struct errbuf *eb)
{
	char task[24], s[16];
	const char *vals[] = { task, s };
	PGresult *res;
	int ret;

	*out = 0;
	snprintf(task, sizeof(task), "%" PRIu64, task_id);
	snprintf(s, sizeof(s), "%d", stream);
	ret = pg_exec(st, "m_cursor_get", 2, vals, &res, "read a metrics cursor", eb);
	if (!ret && PQntuples(res) == 1 && col_i64(res, 0) > 0)
		*out = (uint64_t)col_i64(res, 0);
	PQclear(res);
	return ret;
}

static int pg_metrics_cursor_set(struct store *st, uint64_t task_id, int stream, uint64_t off,
				 struct errbuf *eb)
{
	char task[24], s[16], o[24];
	const char *vals[] = { task, s, o };

	snprintf(task, sizeof(task), "%" PRIu64, task_id);
	snprintf(s, sizeof(s), "%d", stream);
	snprintf(o, sizeof(o), "%" PRIu64, off);
	return pg_write(st, "m_cursor_set", 3, vals, "store a metrics cursor", eb);
}

/* ---- the audit log ---- */

static int pg_audit_append(struct store *st, const struct store_audit *e, struct errbuf *eb)
{
	char when[24], status[16];
	const char *vals[] = { when, e->user, e->role, e->token, e->addr, e->method, e->path, status,
			       e->code };

	snprintf(when, sizeof(when), "%" PRId64, e->time);
	snprintf(status, sizeof(status), "%d", e->status);
	return pg_write(st, "a_insert", 9, vals, "store an audit entry", eb);
}

struct audit_ctx {
	store_audit_fn fn;
	void *ctx;
};

static int audit_row(void *ctx, const PGresult *res)
{
	struct audit_ctx *q = ctx;
	struct store_audit e = {
		.id = col_i64(res, 0),
		.time = col_i64(res, 1),
		.user = col(res, 2),
		.role = col(res, 3),
		.token = col(res, 4),
		.addr = col(res, 5),
		.method = PQgetvalue(res, 0, 6),
		.path = PQgetvalue(res, 0, 7),
		.status = (int)col_i64(res, 8),
		.code = col(res, 9),
	};
	return q->fn(q->ctx, &e);
}

static int pg_audit_query(struct store *st, const char *user, int64_t since, size_t limit,
			  store_audit_fn fn, void *ctx, struct errbuf *eb)
{
	struct audit_ctx q = { fn, ctx };
	char s[24], l[24];
	const char *vals[] = { user, s, l };

	snprintf(s, sizeof(s), "%" PRId64, since);
	snprintf(l, sizeof(l), "%" PRIu64, (uint64_t)(limit > INT64_MAX ? INT64_MAX : limit));
	return pg_rows(st, "a_query", 3, vals, audit_row, &q, "read the audit log", eb);
}

/* ---- the leader lease ---- */

void store_lease_release(struct store_lease *l)
{
	free(l->url);
	l->url = NULL;
}

static int lease_row(void *ctx, const PGresult *res)
{
	struct store_lease *out = ctx;

	out->mine = !PQgetisnull(res, 0, 0);
	out->epoch = (uint64_t)col_i64(res, out->mine ? 0 : 1);
	out->url = col(res, 2) ? xstrdup(col(res, 2)) : NULL;
	out->live = !out->mine && col(res, 3) && !strcmp(col(res, 3), "t");
	return 0;
}

static int pg_lease_acquire(struct store *st, const char *holder, const char *url, bool reclaim,
			    unsigned lease_ms, struct store_lease *out, struct errbuf *eb)
{
	char ms[16];
	const char *vals[] = { holder, url, ms, reclaim ? "t" : "f" };
	PGresult *res;
	int ret;

	uint64_t fence = st->fence_epoch;

	memset(out, 0, sizeof(*out));
	snprintf(ms, sizeof(ms), "%u", lease_ms);
	if ((ret = pg_begin(st, eb)))
		return ret;
	st->fence_epoch = 0; /* this transaction is the lease's own */
	/* a lock held by a vanished holder is not waited for (l_end) */
	ret = pg_simple(st, "SET LOCAL lock_timeout = '200ms'", "take the lease", eb);
	if (!ret)
		ret = pg_rows(st, "l_take", 4, vals, lease_row, out, "take the lease", eb);
	if (ret) {
		pg_rollback(st);
		store_lease_release(out);
		memset(out, 0, sizeof(*out));
		struct errbuf leb = ERRBUF_INIT;
		if (PQstatus(st->conn) == CONNECTION_OK && !pg_exec(st, "l_end", 0, NULL, &res, "end a holder", &leb))
			PQclear(res);
		st->fence_epoch = fence;
		return ret;
	}
	ret = pg_commit(st, eb);
	if (ret) {
		/* the server lost between the row and the COMMIT (a primary
		 * failing over): the row read is not what holds */
		store_lease_release(out);
		memset(out, 0, sizeof(*out));
	}
	st->fence_epoch = fence;
	return ret;
}

static int pg_lease_release(struct store *st, uint64_t epoch, struct errbuf *eb)
{
	char e[24];
	const char *vals[] = { e };
	PGresult *res;
	int ret;

	snprintf(e, sizeof(e), "%" PRIu64, epoch);
	if (!(ret = pg_exec(st, "l_release", 1, vals, &res, "release the lease", eb)))
		PQclear(res);
	return ret;
}

static void pg_lease_fence(struct store *st, uint64_t epoch, unsigned lease_ms)
{
	st->fence_epoch = epoch;
	st->fence_ms = lease_ms;
}

/* ---- blobs: rows of pieces ---- */

/* The slices an archive is stored in (a log's pieces are its appends). */
#define PG_BLOB_PIECE ((size_t)1 << 20)

static int pg_blob_size(struct store *st, const char *name, uint64_t *out, struct errbuf *eb)
{
	const char *vals[] = { name };
	PGresult *res;
	int ret = pg_exec(st, "b_size", 1, vals, &res, "read a blob's size", eb);

	*out = 0;
	if (!ret && PQntuples(res) == 1)
		*out = (uint64_t)col_i64(res, 0);
	else if (!ret)
		ret = error(eb, YERR(NOT_FOUND), "no blob '%s'", name);
	PQclear(res);
	return ret;
}

/* Queues the insert of one piece of name at off. */
static int insert_piece(struct store *st, const char *name, uint64_t off, const void *data,
			size_t len, struct errbuf *eb)
{
	char o[24];
	const char *vals[] = { name, o, data ? data : "" };
	const int lens[] = { 0, 0, (int)len }, fmts[] = { 0, 0, 1 };

	snprintf(o, sizeof(o), "%" PRIu64, off);
	return pg_write_values(st, "b_insert", 3, vals, lens, fmts, "write a blob", eb);
}

static int pg_blob_append(struct store *st, const char *name, uint64_t off, const void *data,
			  size_t len, uint64_t *have, struct errbuf *eb)
{
	struct log_chunk_decision d;
	int ret = pg_blob_size(st, name, have, eb);

	if (ret == YERR(NOT_FOUND)) {
		errbuf_reset(eb);
		ret = 0;
	}
	if (ret)
		return ret;
	d = log_chunk_decide(*have, off, len);
	if (d.action == LOG_CHUNK_GAP)
		return error(eb, YERR(CONFLICT), "blob '%s': offset %" PRIu64 " is past the %" PRIu64
			     " bytes held", name, off, *have);
	if (d.action != LOG_CHUNK_APPEND)
		return 0;
	/* in rows of at most PG_BLOB_PIECE, as files are: a read by offset
	 * fetches what it asks for, not a whole 16 MiB chunk */
	for (size_t at = d.skip; at < len && !ret; at += PG_BLOB_PIECE) {
		size_t n = len - at < PG_BLOB_PIECE ? len - at : PG_BLOB_PIECE;
		ret = insert_piece(st, name, *have, (const char *)data + at, n, eb);
		if (!ret)
			*have += n;
	}
	return ret;
}

/* An append is its transaction's rows: durable at its commit. */
static int pg_blob_sync(struct store *st, const char *name, struct errbuf *eb)
{
	return 0;
}

/* The file goes into the transaction in PG_BLOB_PIECE slices (an empty
 * file as one empty piece, so that it exists). */
static int pg_blob_put_file(struct store *st, const char *name, const char *path,
			    struct errbuf *eb)
{
	char *buf = NULL;
	uint64_t size, off = 0;
	int fd = -1, ret = pg_blob_size(st, name, &size, eb);

	if (ret != YERR(NOT_FOUND))
		goto out; /* there already (0), or an error */
	errbuf_reset(eb);
	ret = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = error(eb, yerr_of_errno(errno), "cannot open '%s': %s", path, strerror(errno));
		goto out;
	}
	buf = xmalloc(PG_BLOB_PIECE);
	for (;;) {
		size_t n = 0;
		while (n < PG_BLOB_PIECE) {
			ssize_t r = read(fd, buf + n, PG_BLOB_PIECE - n);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				ret = error(eb, yerr_of_errno(errno), "cannot read '%s': %s", path,
					    strerror(errno));
				goto out;
			}
			if (!r)
				break;
			n += (size_t)r;
		}
		if ((n || !off) && (ret = insert_piece(st, name, off, buf, n, eb)))
			goto out;
		off += n;
		if (n < PG_BLOB_PIECE)
			break;
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	unlink(path);
	return ret;
}

/* In PG_BLOB_PIECE slices, as pg_blob_put_file. */
static int pg_blob_put(struct store *st, const char *name, const void *data, size_t len,
		       struct errbuf *eb)
{
	uint64_t size;
	size_t off = 0;
	int ret = pg_blob_size(st, name, &size, eb);

	if (ret != YERR(NOT_FOUND))
		return ret; /* there already (0), or an error */
	errbuf_reset(eb);
	ret = 0;
	do {
		size_t n = len - off < PG_BLOB_PIECE ? len - off : PG_BLOB_PIECE;
		ret = insert_piece(st, name, off, (const char *)data + off, n, eb);
		off += n;
	} while (!ret && off < len);
	return ret;
}

static int pg_blob_delete(struct store *st, const char *name, struct errbuf *eb)
{
	const char *vals[] = { name };

	return pg_write(st, "b_delete", 1, vals, "delete a blob", eb);
}

static int pg_blob_read(struct store *st, const char *name, uint64_t off, uint64_t len,
			struct store_blob_range *out, struct errbuf *eb)
{
	char start[24], end[24];
	const char *vals[] = { name, start, end };
	PGresult *res;
	uint64_t e;
	int ret;

	out->fd = -1;
	out->buf = NULL;
	out->len = 0;
	if (len > STORE_BLOB_READ_MAX)
		len = STORE_BLOB_READ_MAX;
	e = off + len < off ? UINT64_MAX : off + len;
	if (e > INT64_MAX)
		e = INT64_MAX;
	snprintf(start, sizeof(start), "%" PRIu64, off);
	snprintf(end, sizeof(end), "%" PRIu64, e);
	ret = pg_exec_format(st, "b_read", 3, vals, 1, &res, "read a blob", eb);
	if (ret)
		return ret;
	if (!PQntuples(res)) {
		/* none in the range: past the end, or no blob at all */
		PQclear(res);
		ret = pg_blob_size(st, name, &e, eb);
		return ret;
	}
	out->buf = xmalloc(len ? len : 1);
	for (int i = 0; i < PQntuples(res); i++) {
		uint64_t poff, plen = (uint64_t)PQgetlength(res, i, 1), from, to;
		memcpy(&poff, PQgetvalue(res, i, 0), sizeof(poff));
		poff = be64toh(poff);
		from = poff > off ? poff : off;
		to = poff + plen < off + len ? poff + plen : off + len;
		if (from != off + out->len)
			break; /* a hole: cannot be, each piece starts where the last ends */
		if (to > from) {
			memcpy(out->buf + (from - off), PQgetvalue(res, i, 1) + (from - poff), to - from);
			out->len = to - off;
		}
	}
	PQclear(res);
	return 0;
}

/* ---- backups: pg_dump, pg_restore ---- */

/* Every table a migration step made, in no order: what a restore with
 * aside moves out of the way. A step that makes a table adds it here. */
static const char *const yard_tables[] = { "schema_version", "jobs", "tasks", "nodes", "tokens", "meta",
					    "datasets", "metrics", "metric_cursors", "audit", "blobs",
					    "leader", "experiments", "templates", "provisions" };
/* and the functions, as to_regprocedure names them */
static const char *const yard_functions[] = { "yard_fence(bigint, bigint)" };

/* Adds a program's stderr to sb, its lines joined by "; ", at most max bytes. */
static void add_output(struct strbuf *sb, const char *text, size_t max)
{
	size_t start = sb->len;

	for (const char *p = text; *p && sb->len - start < max;) {
		size_t n = strcspn(p, "\n");
		if (n) {
			if (sb->len > start)
				strbuf_addstr(sb, "; ");
			strbuf_add(sb, p, n);
		}
		p += n;
		if (*p)
			p++;
	}
	if (sb->len == start)
		strbuf_addstr(sb, "no message");
}

/*
 * Runs the PostgreSQL client program args[0] (looked up in PATH) with the
 * arguments args[1..], then, with a conninfo, "-d" and the connection
 * string less its password: the password goes in PGPASSWORD, never in an
 * argv that ps shows. What it prints on stderr is the error when it fails,
 * after what (the program and what it worked on).
 */
static int pg_tool(const char *conninfo, const char *const *args, const char *what, struct errbuf *eb)
{
	extern char **environ;
	PQconninfoOption *opts = conninfo ? PQconninfoParse(conninfo, NULL) : NULL;
	const char *password = NULL;
	char *display = conninfo ? store_pg_display(conninfo) : NULL, *pw_env = NULL;
	char **argv = NULL, **env = NULL;
	struct strbuf out = STRBUF_INIT, msg = STRBUF_INIT;
	struct spawn_opts o;
	size_t n = 0, nenv = 0;
	int fds[2] = { -1, -1 }, status = 0, child_errno = 0, ret = 0;
	pid_t pid;

	for (PQconninfoOption *p = opts; p && p->keyword; p++)
		if (!strcmp(p->keyword, "password") && p->val && *p->val)
			password = p->val;
	while (args[n])
		n++;
	argv = xcalloc(n + 3, sizeof(*argv));
	for (size_t i = 0; i < n; i++)
		argv[i] = (char *)args[i];
	if (display) {
		argv[n] = (char *)"-d";
		argv[n + 1] = display;
	}
	for (char **e = environ; *e; e++)
		nenv++;
	env = xcalloc(nenv + 2, sizeof(*env));
	nenv = 0;
	for (char **e = environ; *e; e++)
		if (!password || strncmp(*e, "PGPASSWORD=", 11))
			env[nenv++] = *e;
	if (password) {
		pw_env = xasprintf("PGPASSWORD=%s", password);
		env[nenv++] = pw_env;
	}
	if (pipe2(fds, O_CLOEXEC)) {
		ret = error(eb, YERR(INTERNAL), "cannot make a pipe: %s", strerror(errno));
		goto out;
	}
	spawn_opts_init(&o);
	o.argv = argv;
	o.env = env;
	o.stderr_fd = fds[1];
	o.flags = SPAWN_SEARCH_PATH;
	if (spawn_process(&o, &pid, &child_errno, eb)) {
		if (child_errno == ENOENT)
			error(eb, YERR(INTERNAL), "cannot run '%s': it is not installed (Debian: postgresql-client)",
			      args[0]);
		ret = YERR(INTERNAL);
		goto out;
	}
	close(fds[1]);
	fds[1] = -1;
	for (;;) {
		char buf[4096];
		ssize_t r = read(fds[0], buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (out.len < 65536)
			strbuf_add(&out, buf, (size_t)r);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		add_output(&msg, out.buf, 1000);
		if (WIFEXITED(status))
			ret = error(eb, YERR(IO), "%s failed (exit %d): %s", what, WEXITSTATUS(status), msg.buf);
		else
			ret = error(eb, YERR(IO), "%s was killed by signal %d: %s", what,
				    WIFSIGNALED(status) ? WTERMSIG(status) : 0, msg.buf);
	}
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	PQconninfoFree(opts);
	free(pw_env);
	free(env);
	free(argv);
	free(display);
	strbuf_release(&out);
	strbuf_release(&msg);
	return ret;
}

/* The first value of one statement without parameters into *out (caller
 * frees; NULL when it answered no row). */
static int pg_value(struct store *st, const char *sql, const char *what, char **out, struct errbuf *eb)
{
	PGresult *res = PQexec(st->conn, sql);
	int ret = 0;

	*out = NULL;
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		ret = pg_error(st, eb, res, what);
	else if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		*out = xstrdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return ret;
}

static int pg_held_conn(struct store *st, bool *out, struct errbuf *eb)
{
	char *v;
	int ret = pg_value(st, "SELECT to_regclass('schema_version') IS NOT NULL", "look for a store", &v, eb);

	*out = !ret && v && !strcmp(v, "t");
	free(v);
	return ret;
}

static int pg_held(const char *conninfo, bool *out, struct errbuf *eb)
{
	struct store *st;
	int ret = pg_connect(conninfo, &st, eb);

	*out = false;
	if (!ret)
		ret = pg_held_conn(st, out, eb);
	pg_close(st);
	return ret;
}

/* pg_dump of the snapshot of a transaction that reads the schema's
 * version, held open until pg_dump ends: the version is the dump's. */
static int pg_snapshot(const char *conninfo, const char *dest, int64_t *version, struct errbuf *eb)
{
	struct store *st;
	char *snap = NULL, *v = NULL, *snap_arg = NULL, *what = NULL;
	bool held;
	int ret = pg_connect(conninfo, &st, eb);

	*version = 0;
	if (ret)
		goto out;
	if ((ret = pg_simple(st, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "begin a snapshot", eb)) ||
	    (ret = pg_held_conn(st, &held, eb)))
		goto out;
	if (!held) {
		ret = error(eb, YERR(NOT_FOUND), "store '%s' holds no yard store (no table schema_version)",
			    st->name);
		goto out;
	}
	if ((ret = pg_value(st, "SELECT version FROM schema_version", "read the schema version", &v, eb)) ||
	    (ret = pg_value(st, "SELECT pg_export_snapshot()", "export a snapshot", &snap, eb)))
		goto out;
	*version = v ? strtoll(v, NULL, 10) : 0;
	snap_arg = xasprintf("--snapshot=%s", snap ? snap : "");
	what = xasprintf("pg_dump of store '%s'", st->name);
	{
		const char *args[] = { "pg_dump", "--format=custom", snap_arg, "--file", dest, NULL };
		ret = pg_tool(conninfo, args, what, eb);
	}
out:
	if (st && st->conn && PQstatus(st->conn) == CONNECTION_OK)
		PQclear(PQexec(st->conn, "ROLLBACK"));
	pg_close(st);
	free(snap);
	free(v);
	free(snap_arg);
	free(what);
	return ret;
}

/* Moves every yard table and function there is into the new schema aside,
 * in one transaction. */
static int pg_move_aside(struct store *st, const char *aside, struct errbuf *eb)
{
	char *schema = PQescapeIdentifier(st->conn, aside, strlen(aside));
	struct strbuf sql = STRBUF_INIT;
	int ret = 0;

	if (!schema)
		return pg_error(st, eb, NULL, "name a schema");
	strbuf_addf(&sql, "BEGIN; CREATE SCHEMA %s;", schema);
	for (size_t i = 0; i < ARRAY_SIZE(yard_tables); i++)
		strbuf_addf(&sql, " ALTER TABLE IF EXISTS %s SET SCHEMA %s;", yard_tables[i], schema);
	for (size_t i = 0; i < ARRAY_SIZE(yard_functions); i++)
		strbuf_addf(&sql,
			    " DO $$ BEGIN IF to_regprocedure('%s') IS NOT NULL THEN"
			    " EXECUTE 'ALTER FUNCTION %s SET SCHEMA ' || quote_ident('%s'); END IF; END $$;",
			    yard_functions[i], yard_functions[i], aside);
	strbuf_addstr(&sql, " COMMIT;");
	ret = pg_simple(st, sql.buf, "move the store aside", eb);
	if (ret)
		PQclear(PQexec(st->conn, "ROLLBACK"));
	PQfreemem(schema);
	strbuf_release(&sql);
	return ret;
}

static bool aside_valid(const char *aside)
{
	for (const char *p = aside; *p; p++)
		if (!(*p == '-' || *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9')))
			return false;
	return *aside && strlen(aside) < 60;
}

static int pg_restore_op(const char *conninfo, const char *src, const char *aside, struct errbuf *eb)
{
	struct store *st = NULL;
	char *what = xasprintf("pg_restore --list of '%s'", src);
	bool held;
	int ret;

	if (aside && !aside_valid(aside)) {
		ret = error(eb, YERR(BAD_REQUEST), "'%s': expected a schema name of letters, digits, '-' and '_'",
			    aside);
		goto out;
	}
	{
		/* a dump pg_restore can read (its table of contents), before
		 * anything is touched; the file alone, no connection */
		const char *args[] = { "pg_restore", "--list", "--file=/dev/null", src, NULL };
		if ((ret = pg_tool(NULL, args, what, eb)))
			goto out;
	}
	if ((ret = pg_connect(conninfo, &st, eb)) || (ret = pg_held_conn(st, &held, eb)))
		goto out;
	if (held && !aside) {
		ret = error(eb, YERR(CONFLICT), "store '%s' holds a yard store already: a restore replaces it"
			    " only when told to (--force keeps it aside)", st->name);
		goto out;
	}
	if (held && (ret = pg_move_aside(st, aside, eb)))
		goto out;
	free(what);
	what = xasprintf("pg_restore into store '%s'", st->name);
	{
		const char *args[] = { "pg_restore", "--no-owner", "--no-privileges", "--exit-on-error",
				       "--single-transaction", src, NULL };
		ret = pg_tool(conninfo, args, what, eb);
	}
	/* the lease of the master that made the backup is over: the next one leads at once */
	if (!ret)
		ret = pg_simple(st, "DO $$ BEGIN IF to_regclass('leader') IS NOT NULL THEN"
				" UPDATE leader SET expires_at = '-infinity', pid = NULL; END IF; END $$",
				"end the old lease", eb);
out:
	pg_close(st);
	free(what);
	return ret;
}

const struct store_ops store_pg_ops = {
	.name = "postgres",
	.open = pg_open,
	.close = pg_close,
	.begin = pg_begin,
	.commit = pg_commit,
	.rollback = pg_rollback,
	.put = pg_put,
	.del = pg_del,
	.get_meta = pg_get_meta,
	.load = pg_load,
	.metrics_append = pg_metrics_append,
	.metrics_last_step = pg_metrics_last_step,
	.metrics_query = pg_metrics_query,
	.metrics_cursor_get = pg_metrics_cursor_get,
	.metrics_cursor_set = pg_metrics_cursor_set,
	.audit_append = pg_audit_append,
	.audit_query = pg_audit_query,
	.lease_acquire = pg_lease_acquire,
	.lease_fence = pg_lease_fence,
	.lease_release = pg_lease_release,
	.blob_append = pg_blob_append,
	.blob_sync = pg_blob_sync,
	.blob_put_file = pg_blob_put_file,
	.blob_put = pg_blob_put,
	.blob_size = pg_blob_size,
	.blob_read = pg_blob_read,
	.blob_delete = pg_blob_delete,
	.blobs_are_files = false,
	.snapshot = pg_snapshot,
	.held = pg_held,
	.restore = pg_restore_op,
};
