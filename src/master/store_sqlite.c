/* The SQLite backend of struct store_ops: WAL, synchronous=FULL; blobs are
 * the files of their names under the data dir (DATA/logs/12.stdout,
 * DATA/code/HEX.tar.gz), the layout of masters before blobs were ops. */
#include "base/compat.h"
#include "master/store.h"

#include <pthread.h>
#include <sqlite3.h>

#include "base/fsutil.h"
#include "base/xalloc.h"
#include "common/logoffset.h"

struct store {
	char *dir;      /* owned: the data dir, which holds state.db and the blobs */
	sqlite3 *db;
	sqlite3_stmt *put[STORE_KIND__COUNT];
	sqlite3_stmt *del[STORE_KIND__COUNT];
	sqlite3_stmt *begin, *commit, *rollback;
	/* training metrics */
	sqlite3_stmt *m_insert, *m_last, *m_query_all, *m_query_one, *m_cursor_get, *m_cursor_set;
	/* the audit log */
	sqlite3_stmt *a_insert, *a_query;
	int in_txn;
	/* The blob appends (task logs) of the open transaction: written at
	 * once, cut back to their size before it at a rollback or a failed
	 * commit, as nothing of it was acknowledged. They are not synced at
	 * its commit (a sync a batch held each append for its bytes to reach
	 * the disk: a task's log reached the master at a fifth of the disk's
	 * speed) but when blob_sync asks, or by the kernel's own writeback:
	 * the agent keeps its copy until then (store.h). */
	struct pending_append {
		char *path;     /* owned */
		int fd;
		uint64_t before, size; /* the file's size before the batch, now */
		bool created;   /* made by the batch: its directory is synced too */
		bool sync;      /* blob_sync asked: fdatasync'd at the commit */
	} *pend;
	size_t npend, apend;
	/* pend by path: open addressing, a slot holds an index + 1 (0: empty),
	 * at most half full (a batch of 10,000 agents' logs walked pend for
	 * every append: a sixth of the master's CPU) */
	size_t *pend_ix, pend_cap;
};

/*
 * The schema, one step per version: migrations[i] takes a store from
 * version i to version i + 1, inside the transaction that records the new
 * version in schema_version. store_pg.c numbers its steps alike. A step that
 * has shipped is never edited; a change is a new step at the end (and
 * STORE_SCHEMA_VERSION one more).
 */
static const char *const migrations[] = {
	/* 1: the documents (one table per kind), metric points as rows (rowid
	 * is their arrival order) and, per task output stream, how far its
	 * points are stored; the audit log, one row per audited request. IF
	 * NOT EXISTS: a state.db written before schema versions has no
	 * schema_version (version 0) and holds these tables, or the older of
	 * them (a master before the audit log had none), which this completes. */
	"CREATE TABLE IF NOT EXISTS jobs (k INTEGER PRIMARY KEY, doc TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS tasks (k INTEGER PRIMARY KEY, doc TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS nodes (k TEXT PRIMARY KEY, doc TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS tokens (k TEXT PRIMARY KEY, doc TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, doc TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS datasets (k TEXT PRIMARY KEY, doc TEXT NOT NULL);"
	"CREATE TABLE IF NOT EXISTS metrics (task_id INTEGER NOT NULL, name TEXT NOT NULL,"
	" step INTEGER NOT NULL, value REAL NOT NULL, time INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS metrics_series ON metrics (task_id, name, step);"
	"CREATE TABLE IF NOT EXISTS metric_cursors (task_id INTEGER NOT NULL,"
	" stream INTEGER NOT NULL, off INTEGER NOT NULL, PRIMARY KEY (task_id, stream)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY, time INTEGER NOT NULL,"
	" user TEXT, role TEXT, token TEXT, addr TEXT, method TEXT NOT NULL, path TEXT NOT NULL,"
	" status INTEGER NOT NULL, code TEXT);"
	"CREATE INDEX IF NOT EXISTS audit_user ON audit (user, id);",
	/* 2: blobs (PostgreSQL's table blobs): none here, they are files under
	 * the data dir as before */
	"",
	/* 3: the leader lease of masters that share a store: PostgreSQL's
	 * alone, as one master alone opens a state.db (nothing to do here) */
	"",
	/* 4: experiments, the documents of sweeps (master/experiments.h) */
	"CREATE TABLE experiments (k INTEGER PRIMARY KEY, doc TEXT NOT NULL);",
	/* 5: templates, jobs run again on each new version of a dataset (master/templates.h) */
	"CREATE TABLE templates (k TEXT PRIMARY KEY, doc TEXT NOT NULL);",
	/* 6: provisioning requests of elastic pools (master/elastic.h) */
	"CREATE TABLE provisions (k INTEGER PRIMARY KEY, doc TEXT NOT NULL);",
};
static_assert(ARRAY_SIZE(migrations) == STORE_SCHEMA_VERSION, "one migration per schema version");

static const struct {
	size_t offset; /* of the statement in struct store */
	const char *sql;
} row_stmts[] = {
	{ offsetof(struct store, m_insert),
	  "INSERT INTO metrics (task_id, name, step, value, time) VALUES (?1, ?2, ?3, ?4, ?5)" },
	{ offsetof(struct store, m_last), "SELECT MAX(step) FROM metrics WHERE task_id = ?1 AND name = ?2" },
	{ offsetof(struct store, m_query_all),
	  "SELECT name, step, value, time FROM metrics WHERE task_id = ?1 ORDER BY name, step, rowid" },
	{ offsetof(struct store, m_query_one),
	  "SELECT name, step, value, time FROM metrics WHERE task_id = ?1 AND name = ?2"
	  " ORDER BY name, step, rowid" },
	{ offsetof(struct store, m_cursor_get),
	  "SELECT off FROM metric_cursors WHERE task_id = ?1 AND stream = ?2" },
	{ offsetof(struct store, m_cursor_set),
	  "INSERT OR REPLACE INTO metric_cursors (task_id, stream, off) VALUES (?1, ?2, ?3)" },
	{ offsetof(struct store, a_insert),
	  "INSERT INTO audit (time, user, role, token, addr, method, path, status, code)"
	  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)" },
	{ offsetof(struct store, a_query),
	  "SELECT id, time, user, role, token, addr, method, path, status, code FROM audit"
	  " WHERE (?1 IS NULL OR user = ?1) AND time >= ?2 ORDER BY id DESC LIMIT ?3" },
};

static sqlite3_stmt **row_stmt(struct store *st, size_t i)
{
	return (sqlite3_stmt **)((char *)st + row_stmts[i].offset);
}

static const char *const table_names[] = { "jobs", "tasks", "nodes", "tokens", "meta", "datasets",
					    "experiments", "templates", "provisions" };
static_assert(ARRAY_SIZE(table_names) == STORE_KIND__COUNT, "store table names");
/* tables whose keys are integers */
static const int numeric_key[] = { 1, 1, 0, 0, 0, 0, 1, 0, 1 };
static_assert(ARRAY_SIZE(numeric_key) == STORE_KIND__COUNT, "store key kinds");

static int db_error(struct store *st, struct errbuf *eb, int rc, const char *what)
{
	int e = sqlite3_system_errno(st->db);

	if (rc == SQLITE_FULL)
		return error(eb, YERR(NO_SPACE), "store: cannot %s: %s", what, sqlite3_errmsg(st->db));
	if (e && ((rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_READONLY))
		return error(eb, yerr_of_errno(e), "store: cannot %s: %s: %s", what, sqlite3_errmsg(st->db),
			     strerror(e));
	return error(eb, YERR(IO), "store: cannot %s: %s", what, sqlite3_errmsg(st->db));
}

static size_t path_hash(const char *s)
{
	size_t h = 14695981039346656037ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

/* The slot of pend's path, or of the empty one where it goes. */
static size_t *pend_slot(struct store *st, const char *path)
{
	size_t i = path_hash(path) & (st->pend_cap - 1);

	while (st->pend_ix[i] && strcmp(st->pend[st->pend_ix[i] - 1].path, path))
		i = (i + 1) & (st->pend_cap - 1);
	return &st->pend_ix[i];
}

static struct pending_append *pend_find(struct store *st, const char *path)
{
	size_t *slot = st->pend_cap ? pend_slot(st, path) : NULL;

	return slot && *slot ? &st->pend[*slot - 1] : NULL;
}

/* Indexes pend[k], the last one added. */
static void pend_index(struct store *st, size_t k)
{
	if (2 * st->npend > st->pend_cap) {
		free(st->pend_ix);
		st->pend_cap = st->pend_cap ? 2 * st->pend_cap : 64;
		st->pend_ix = xcalloc(st->pend_cap, sizeof(*st->pend_ix));
		for (size_t i = 0; i < st->npend; i++)
			*pend_slot(st, st->pend[i].path) = i + 1;
		return;
	}
	*pend_slot(st, st->pend[k].path) = k + 1;
}

/* A pending append of path (taken) on fd, the file's size before it. */
static struct pending_append *pend_add(struct store *st, char *path, int fd, uint64_t before)
{
	struct pending_append *p;

	ALLOC_GROW(st->pend, st->npend + 1, st->apend);
	p = &st->pend[st->npend++];
	*p = (struct pending_append){ .path = path, .fd = fd, .before = before,
				      .created = !before };
	pend_index(st, st->npend - 1);
	return p;
}

/* Ends the open transaction's appends: each file is cut back to its size
 * before it unless keep, and closed. Their slots are emptied last added
 * first: the probe of each then crosses only slots still held. */
static void pending_end(struct store *st, bool keep)
{
	for (size_t i = st->npend; i-- > 0;)
		*pend_slot(st, st->pend[i].path) = 0;
	for (size_t i = 0; i < st->npend; i++) {
		struct pending_append *p = &st->pend[i];
		if (!keep && p->size != p->before && ftruncate(p->fd, (off_t)p->before)) {
			/* the file's size stays the truth: the agent resends from it */
		}
		close(p->fd);
		free(p->path);
	}
	st->npend = 0;
}

/* One thread's share of a batch's fdatasyncs: every stride-th file from
 * first; err the errno of the first that failed (its index in failed). */
struct sync_share {
	struct pending_append *pend;
	size_t n, first, stride;
	int err;
	size_t failed;
	pthread_t tid;
	bool started;
};

static void *sync_share_run(void *arg)
{
	struct sync_share *s = arg;

	for (size_t i = s->first; i < s->n && !s->err; i += s->stride)
		if (s->pend[i].sync && fdatasync(s->pend[i].fd)) {
			s->err = errno;
			s->failed = i;
		}
	return NULL;
}

#define SYNC_THREADS_MAX 8
/* A batch that appended to more log files than this syncs them with one
 * syncfs() of the data dir's filesystem instead of one fdatasync each: on
 * ext4 without a journal each fdatasync writes its inode on its own, and
 * 10,000 nodes whose tasks print a line a second make thousands of files
 * a second to sync; syncfs writes them all back and flushes the disk's
 * cache once. (It also writes back what else is dirty on that
 * filesystem: a master's data dir is best on a filesystem of its own.) */
#define SYNCFS_FILES_MIN 32

/* Syncs the blobs blob_sync named in the open transaction (their data,
 * the directories of files it made). The files of a batch are synced side by side, a few
 * threads at once: the filesystem then commits them together (one journal
 * commit, one cache flush for all), where one after another each waited
 * for its own, and a batch that took in the logs of a hundred tasks held
 * the loop for a hundred flushes. */
static int pending_sync(struct store *st, struct errbuf *eb)
{
	struct sync_share share[SYNC_THREADS_MAX];
	size_t nsync = 0, nthreads;
	const char *synced_dir = NULL;
	size_t dir_len = 0;

	for (size_t i = 0; i < st->npend; i++)
		nsync += st->pend[i].sync;
	nthreads = nsync < SYNC_THREADS_MAX ? nsync : SYNC_THREADS_MAX;
	if (nsync >= SYNCFS_FILES_MIN) {
		/* writeback errors of the files since they were opened are
		 * reported by syncfs too (Linux 5.8 and later) */
		if (syncfs(st->pend[0].fd))
			return error(eb, yerr_of_errno(errno), "cannot sync the %zu logs of this batch "
				     "(syncfs of '%s'): %s", nsync, st->dir, strerror(errno));
		return 0; /* new files' directories are on that filesystem too */
	}

	for (size_t k = 0; k < nthreads; k++)
		share[k] = (struct sync_share){ .pend = st->pend, .n = st->npend, .first = k,
						.stride = nthreads };
	/* the first share is this thread's; a thread that cannot start leaves
	 * its share to this one */
	for (size_t k = 1; k < nthreads; k++)
		share[k].started = !pthread_create(&share[k].tid, NULL, sync_share_run, &share[k]);
	if (nthreads)
		sync_share_run(&share[0]);
	for (size_t k = 1; k < nthreads; k++) {
		if (share[k].started)
			pthread_join(share[k].tid, NULL);
		else
			sync_share_run(&share[k]);
	}
	for (size_t k = 0; k < nthreads; k++)
		if (share[k].err)
			return error(eb, yerr_of_errno(share[k].err), "cannot write '%s': %s",
				     st->pend[share[k].failed].path, strerror(share[k].err));
	for (size_t i = 0; i < st->npend; i++) {
		const char *path = st->pend[i].path, *slash = strrchr(path, '/');
		size_t len = slash ? (size_t)(slash - path) : 0;
		if (!st->pend[i].sync || !st->pend[i].created ||
		    (synced_dir && len == dir_len && !strncmp(path, synced_dir, len)))
			continue;
		if (fsync_parent_dir(path))
			return error(eb, YERR(IO), "cannot sync the directory of '%s': %s", path,
				     strerror(errno));
		synced_dir = path;
		dir_len = len;
	}
	return 0;
}

static void sqlite_close(struct store *st)
{
	if (!st)
		return;
	pending_end(st, false);
	free(st->pend);
	free(st->pend_ix);
	for (int i = 0; i < STORE_KIND__COUNT; i++) {
		sqlite3_finalize(st->put[i]);
		sqlite3_finalize(st->del[i]);
	}
	sqlite3_finalize(st->begin);
	sqlite3_finalize(st->commit);
	sqlite3_finalize(st->rollback);
	for (size_t i = 0; i < ARRAY_SIZE(row_stmts); i++)
		sqlite3_finalize(*row_stmt(st, i));
	sqlite3_close(st->db);
	free(st->dir);
	free(st);
}

static int step_once(struct store *st, sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);

	sqlite3_reset(s);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* The version schema_version holds (0: none yet), in *out. */
static int schema_version(struct store *st, int64_t *out, struct errbuf *eb)
{
	sqlite3_stmt *s = NULL;
	int rc, rows = 0;

	*out = 0;
	rc = sqlite3_prepare_v2(st->db, "SELECT version FROM schema_version", -1, &s, NULL);
	while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		*out = sqlite3_column_int64(s, 0);
		rows++;
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return db_error(st, eb, rc, "read the schema version");
	if (rows > 1)
		return error(eb, YERR(IO), "store: schema_version holds %d rows, not one", rows);
	return 0;
}

/* Brings the schema of the store at path to STORE_SCHEMA_VERSION, in one
 * transaction; refuses a store of a newer master. */
static int sqlite_migrate(struct store *st, const char *path, struct errbuf *eb)
{
	sqlite3_stmt *s = NULL;
	int64_t version;
	int rc, ret;

	rc = sqlite3_exec(st->db, "BEGIN IMMEDIATE;"
			  "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);",
			  NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return db_error(st, eb, rc, "begin the schema's transaction");
	if ((ret = schema_version(st, &version, eb)))
		goto out;
	if (version > STORE_SCHEMA_VERSION) {
		ret = error(eb, YERR(IO),
			    "store '%s' is at schema version %" PRId64 ", newer than this master's %d:"
			    " it was written by a newer yard master, run that one",
			    path, version, STORE_SCHEMA_VERSION);
		goto out;
	}
	for (int64_t i = version; i < STORE_SCHEMA_VERSION; i++) {
		rc = sqlite3_exec(st->db, migrations[i], NULL, NULL, NULL);
		if (rc != SQLITE_OK) {
			char *what = xasprintf("migrate the schema from version %" PRId64 " to %" PRId64, i, i + 1);
			ret = db_error(st, eb, rc, what);
			free(what);
			goto out;
		}
	}
	rc = sqlite3_exec(st->db, "DELETE FROM schema_version", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(st->db, "INSERT INTO schema_version (version) VALUES (?1)", -1, &s,
					NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int(s, 1, STORE_SCHEMA_VERSION);
		rc = step_once(st, s);
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		ret = db_error(st, eb, rc, "record the schema version");
	else if (version && version < STORE_SCHEMA_VERSION)
		fprintf(stderr, "yard master: store '%s': schema upgraded from version %" PRId64 " to %d\n",
			path, version, STORE_SCHEMA_VERSION);
out:
	sqlite3_finalize(s);
	if (ret)
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	return ret;
}

static int sqlite_open(const char *dir, struct store **out, int *created, struct errbuf *eb)
{
	struct store *st = xcalloc(1, sizeof(*st));
	char *path = xasprintf("%s/state.db", dir);
	char *sql = NULL;
	int rc, ret = 0;

	st->dir = xstrdup(dir);
	*created = !path_exists(path);
	rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc != SQLITE_OK) {
		ret = error(eb, YERR(IO), "cannot open store '%s': %s", path,
			    st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
		goto out;
	}
	sqlite3_busy_timeout(st->db, 5000);
	rc = sqlite3_exec(st->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		ret = db_error(st, eb, rc, "set the journal mode");
		goto out;
	}
	if ((ret = sqlite_migrate(st, path, eb)))
		goto out;
	for (size_t i = 0; i < ARRAY_SIZE(row_stmts); i++) {
		rc = sqlite3_prepare_v2(st->db, row_stmts[i].sql, -1, row_stmt(st, i), NULL);
		if (rc != SQLITE_OK) {
			ret = db_error(st, eb, rc, "prepare");
			goto out;
		}
	}
	for (int i = 0; i < STORE_KIND__COUNT; i++) {
		free(sql);
		sql = xasprintf("INSERT OR REPLACE INTO %s (k, doc) VALUES (?1, ?2)", table_names[i]);
		rc = sqlite3_prepare_v2(st->db, sql, -1, &st->put[i], NULL);
		if (rc == SQLITE_OK) {
			free(sql);
			sql = xasprintf("DELETE FROM %s WHERE k = ?1", table_names[i]);
			rc = sqlite3_prepare_v2(st->db, sql, -1, &st->del[i], NULL);
		}
		if (rc != SQLITE_OK) {
			ret = db_error(st, eb, rc, "prepare");
			goto out;
		}
	}
	if ((rc = sqlite3_prepare_v2(st->db, "BEGIN IMMEDIATE", -1, &st->begin, NULL)) ||
	    (rc = sqlite3_prepare_v2(st->db, "COMMIT", -1, &st->commit, NULL)) ||
	    (rc = sqlite3_prepare_v2(st->db, "ROLLBACK", -1, &st->rollback, NULL))) {
		ret = db_error(st, eb, rc, "prepare");
		goto out;
	}
out:
	free(sql);
	free(path);
	if (ret) {
		sqlite_close(st);
		st = NULL;
	}
	*out = st;
	return ret;
}

static int sqlite_begin(struct store *st, struct errbuf *eb)
{
	int rc = step_once(st, st->begin);

	if (rc != SQLITE_OK)
		return db_error(st, eb, rc, "begin a transaction");
	st->in_txn = 1;
	return 0;
}

static void sqlite_rollback(struct store *st)
{
	if (sqlite3_get_autocommit(st->db) == 0)
		step_once(st, st->rollback);
	st->in_txn = 0;
	pending_end(st, false);
}

static int sqlite_commit(struct store *st, struct errbuf *eb)
{
	int ret = pending_sync(st, eb), rc;

	if (ret) {
		sqlite_rollback(st);
		return ret;
	}
	rc = step_once(st, st->commit);
	if (rc != SQLITE_OK) {
		ret = db_error(st, eb, rc, "commit");
		sqlite_rollback(st);
		return ret;
	}
	st->in_txn = 0;
	pending_end(st, true);
	return 0;
}

static int sqlite_put(struct store *st, enum store_kind kind, const char *key, const char *doc,
		      struct errbuf *eb)
{
	sqlite3_stmt *s = st->put[kind];
	int rc;

	if (numeric_key[kind])
		sqlite3_bind_int64(s, 1, strtoll(key, NULL, 10));
	else
		sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, doc, -1, SQLITE_STATIC);
	rc = step_once(st, s);
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_OK)
		return db_error(st, eb, rc, "write a row");
	return 0;
}

static int sqlite_del(struct store *st, enum store_kind kind, const char *key, struct errbuf *eb)
{
	sqlite3_stmt *s = st->del[kind];
	int rc;

	if (numeric_key[kind])
		sqlite3_bind_int64(s, 1, strtoll(key, NULL, 10));
	else
		sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
	rc = step_once(st, s);
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_OK)
		return db_error(st, eb, rc, "delete a row");
	return 0;
}

static int sqlite_get_meta(struct store *st, const char *key, char **out, struct errbuf *eb)
{
	sqlite3_stmt *s = NULL;
	int rc, ret = 0;

	*out = NULL;
	rc = sqlite3_prepare_v2(st->db, "SELECT doc FROM meta WHERE k = ?1", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return db_error(st, eb, rc, "read meta");
	sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*out = xstrdup((const char *)sqlite3_column_text(s, 0));
	else if (rc != SQLITE_DONE)
		ret = db_error(st, eb, rc, "read meta");
	sqlite3_finalize(s);
	return ret;
}

static int sqlite_load(struct store *st, enum store_kind kind, store_load_fn fn, void *ctx,
		       struct errbuf *eb)
{
	sqlite3_stmt *s = NULL;
	char *sql = xasprintf("SELECT k, doc FROM %s ORDER BY k", table_names[kind]);
	int rc, ret = 0;

	rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
	free(sql);
	if (rc != SQLITE_OK)
		return db_error(st, eb, rc, "load");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *k = (const char *)sqlite3_column_text(s, 0);
		const char *doc = (const char *)sqlite3_column_text(s, 1);
		ret = fn(ctx, k ? k : "", doc ? doc : "");
		if (ret)
			goto out;
	}
	if (rc != SQLITE_DONE)
		ret = db_error(st, eb, rc, "load");
out:
	sqlite3_finalize(s);
	return ret;
}

/* ---- training metrics ---- */

static int sqlite_metrics_append(struct store *st, uint64_t task_id, const struct store_metric *pts,
				 size_t n, struct errbuf *eb)
{
	sqlite3_stmt *s = st->m_insert;

	for (size_t i = 0; i < n; i++) {
		int rc;
		sqlite3_bind_int64(s, 1, (sqlite3_int64)task_id);
		sqlite3_bind_text(s, 2, pts[i].name, -1, SQLITE_STATIC);
		sqlite3_bind_int64(s, 3, pts[i].step);
		sqlite3_bind_double(s, 4, pts[i].value);
		sqlite3_bind_int64(s, 5, pts[i].time);
		rc = step_once(st, s);
		sqlite3_clear_bindings(s);
		if (rc != SQLITE_OK)
			return db_error(st, eb, rc, "store a metric");
	}
	return 0;
}

static int sqlite_metrics_last_step(struct store *st, uint64_t task_id, const char *name,
				    int64_t *out, struct errbuf *eb)
{
	sqlite3_stmt *s = st->m_last;
	int rc;

	*out = -1;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)task_id);
	sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL)
		*out = sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_error(st, eb, rc, "read a metric series");
	return 0;
}

static int sqlite_metrics_query(struct store *st, uint64_t task_id, const char *name,
				store_metric_fn fn, void *ctx, struct errbuf *eb)
{
	sqlite3_stmt *s = name ? st->m_query_one : st->m_query_all;
	int rc, ret = 0;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)task_id);
	if (name)
		sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_metric pt = {
			.name = (const char *)sqlite3_column_text(s, 0),
			.step = sqlite3_column_int64(s, 1),
			.value = sqlite3_column_double(s, 2),
			.time = sqlite3_column_int64(s, 3),
		};
		if (!pt.name)
			pt.name = "";
		ret = fn(ctx, &pt);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = db_error(st, eb, rc, "read metrics");
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return ret;
}

static int sqlite_metrics_cursor_get(struct store *st, uint64_t task_id, int stream, uint64_t *out,
				     struct errbuf *eb)
{
	sqlite3_stmt *s = st->m_cursor_get;
	int rc;

	*out = 0;
	sqlite3_bind_int64(s, 1, (sqlite3_int64)task_id);
	sqlite3_bind_int(s, 2, stream);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW && sqlite3_column_int64(s, 0) > 0)
		*out = (uint64_t)sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_error(st, eb, rc, "read a metrics cursor");
	return 0;
}

static int sqlite_metrics_cursor_set(struct store *st, uint64_t task_id, int stream, uint64_t off,
				     struct errbuf *eb)
{
	sqlite3_stmt *s = st->m_cursor_set;
	int rc;

	sqlite3_bind_int64(s, 1, (sqlite3_int64)task_id);
	sqlite3_bind_int(s, 2, stream);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)off);
	rc = step_once(st, s);
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_OK)
		return db_error(st, eb, rc, "store a metrics cursor");
	return 0;
}

/* ---- the audit log ---- */

static void bind_text_or_null(sqlite3_stmt *s, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, i);
}

static int sqlite_audit_append(struct store *st, const struct store_audit *e, struct errbuf *eb)
{
	sqlite3_stmt *s = st->a_insert;
	int rc;

	sqlite3_bind_int64(s, 1, e->time);
	bind_text_or_null(s, 2, e->user);
	bind_text_or_null(s, 3, e->role);
	bind_text_or_null(s, 4, e->token);
	bind_text_or_null(s, 5, e->addr);
	sqlite3_bind_text(s, 6, e->method, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 7, e->path, -1, SQLITE_STATIC);
	sqlite3_bind_int(s, 8, e->status);
	bind_text_or_null(s, 9, e->code);
	rc = step_once(st, s);
	sqlite3_clear_bindings(s);
	if (rc != SQLITE_OK)
		return db_error(st, eb, rc, "store an audit entry");
	return 0;
}

static int sqlite_audit_query(struct store *st, const char *user, int64_t since, size_t limit,
			      store_audit_fn fn, void *ctx, struct errbuf *eb)
{
	sqlite3_stmt *s = st->a_query;
	int rc, ret = 0;

	bind_text_or_null(s, 1, user);
	sqlite3_bind_int64(s, 2, since);
	sqlite3_bind_int64(s, 3, limit > INT64_MAX ? INT64_MAX : (sqlite3_int64)limit);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_audit e = {
			.id = sqlite3_column_int64(s, 0),
			.time = sqlite3_column_int64(s, 1),
			.user = (const char *)sqlite3_column_text(s, 2),
			.role = (const char *)sqlite3_column_text(s, 3),
			.token = (const char *)sqlite3_column_text(s, 4),
			.addr = (const char *)sqlite3_column_text(s, 5),
			.method = (const char *)sqlite3_column_text(s, 6),
			.path = (const char *)sqlite3_column_text(s, 7),
			.status = sqlite3_column_int(s, 8),
			.code = (const char *)sqlite3_column_text(s, 9),
		};
		if (!e.method)
			e.method = "";
		if (!e.path)
			e.path = "";
		ret = fn(ctx, &e);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = db_error(st, eb, rc, "read the audit log");
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return ret;
}

/* ---- blobs: files under the data dir ---- */

static char *blob_path(const struct store *st, const char *name)
{
	return xasprintf("%s/%s", st->dir, name);
}

/* Makes the dir that holds path (a blob's dir the master did not make). */
static int make_parent(const char *path)
{
	char *dir = xstrdup(path), *slash = strrchr(dir, '/');
	int ret = -1;

	if (slash) {
		*slash = 0;
		ret = mkdir_p(dir, 0700);
	}
	free(dir);
	return ret;
}

/* Opens path with flags, making its parent dir when it is missing. */
static int open_making_dir(const char *path, int flags)
{
	int fd = open(path, flags, 0644);

	if (fd < 0 && errno == ENOENT && (flags & O_CREAT) && !make_parent(path))
		fd = open(path, flags, 0644);
	return fd;
}

/* An append is written at once, not synced (blob_sync); a failed write is
 * cut off again so that a retry appends cleanly. The file's size is the
 * truth about what is held. */
static int sqlite_blob_append(struct store *st, const char *name, uint64_t off, const void *data,
			      size_t len, uint64_t *have, struct errbuf *eb)
{
	char *path = blob_path(st, name);
	struct pending_append *p = NULL;
	struct log_chunk_decision d;
	struct stat sb;
	int fd = -1, ret = 0;

	*have = 0;
	if (st->in_txn)
		p = pend_find(st, path);
	if (p) {
		fd = p->fd;
		*have = p->size;
	} else {
		fd = open_making_dir(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC);
		if (fd < 0) {
			ret = error(eb, yerr_of_errno(errno), "cannot open '%s': %s", path, strerror(errno));
			goto out;
		}
		if (fstat(fd, &sb)) {
			ret = error(eb, YERR(IO), "cannot stat '%s': %s", path, strerror(errno));
			goto out_close;
		}
		*have = (uint64_t)sb.st_size;
	}
	d = log_chunk_decide(*have, off, len);
	if (d.action == LOG_CHUNK_GAP) {
		ret = error(eb, YERR(CONFLICT), "blob '%s': offset %" PRIu64 " is past the %" PRIu64
			    " bytes held", name, off, *have);
		goto out_close;
	}
	if (d.action == LOG_CHUNK_APPEND) {
		uint64_t before = *have;
		if (write_all(fd, (const char *)data + d.skip, len - d.skip)) {
			int e = errno;
			if (ftruncate(fd, (off_t)before)) {
				/* the size stays the truth; nothing more to do */
			}
			ret = error(eb, yerr_of_errno(e), "cannot write '%s': %s", path, strerror(e));
			goto out_close;
		}
		*have += len - d.skip;
		if (st->in_txn && !p) {
			/* cut back with the transaction, or synced at its commit */
			p = pend_add(st, path, fd, before);
			path = NULL;
		}
		if (p)
			p->size = *have;
	}
out_close:
	if (!p)
		close(fd);
out:
	free(path);
	return ret;
}

/* Outside a transaction the file is synced at once. */
static int sqlite_blob_sync(struct store *st, const char *name, struct errbuf *eb)
{
	char *path = blob_path(st, name);
	struct pending_append *p = st->in_txn ? pend_find(st, path) : NULL;
	struct stat sb;
	int fd, ret = 0;

	if (p) {
		p->sync = p->created = true;
		free(path);
		return 0;
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			ret = error(eb, yerr_of_errno(errno), "cannot open '%s': %s", path, strerror(errno));
	} else if (fstat(fd, &sb)) {
		ret = error(eb, YERR(IO), "cannot stat '%s': %s", path, strerror(errno));
	} else if (st->in_txn) {
		/* a file made earlier has its directory synced too: whether
		 * that was done is not known here */
		p = pend_add(st, path, fd, (uint64_t)sb.st_size);
		p->size = p->before;
		p->sync = p->created = true;
		return 0;
	} else if (fdatasync(fd) || fsync_parent_dir(path)) {
		ret = error(eb, yerr_of_errno(errno), "cannot sync '%s': %s", path, strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	free(path);
	return ret;
}

/* The file is synced, then renamed into place (the dir synced): a blob is
 * whole or absent after a crash. */
static int sqlite_blob_put_file(struct store *st, const char *name, const char *path,
				struct errbuf *eb)
{
	char *dst = blob_path(st, name);
	int fd, ret = 0;

	if (path_exists(dst)) {
		unlink(path);
		goto out;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fsync(fd)) {
		ret = error(eb, yerr_of_errno(errno), "cannot sync '%s': %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(path);
		goto out;
	}
	close(fd);
	if (rename(path, dst) && !(errno == ENOENT && !make_parent(dst) && !rename(path, dst))) {
		ret = error(eb, yerr_of_errno(errno), "cannot store '%s': %s", dst, strerror(errno));
		unlink(path);
	} else if (fsync_parent_dir(dst)) {
		ret = error(eb, YERR(IO), "cannot sync the directory of '%s': %s", dst, strerror(errno));
	}
out:
	free(dst);
	return ret;
}

/* Written as NAME.tmp, fsync'd, renamed, the dir fsync'd (write_file_atomic). */
static int sqlite_blob_put(struct store *st, const char *name, const void *data, size_t len,
			   struct errbuf *eb)
{
	char *path = blob_path(st, name);
	int ret = 0;

	if (path_exists(path))
		goto out;
	if (write_file_atomic(path, data, len, 0600) &&
	    !(errno == ENOENT && !make_parent(path) && !write_file_atomic(path, data, len, 0600)))
		ret = error(eb, yerr_of_errno(errno), "cannot write '%s': %s", path, strerror(errno));
out:
	free(path);
	return ret;
}

static int sqlite_blob_delete(struct store *st, const char *name, struct errbuf *eb)
{
	char *path = blob_path(st, name);
	int ret = 0;

	if (unlink(path) && errno != ENOENT)
		ret = error(eb, yerr_of_errno(errno), "cannot remove '%s': %s", path, strerror(errno));
	free(path);
	return ret;
}

static int sqlite_blob_size(struct store *st, const char *name, uint64_t *out, struct errbuf *eb)
{
	char *path = blob_path(st, name);
	struct stat sb;
	int ret = 0;

	*out = 0;
	if (!stat(path, &sb))
		*out = (uint64_t)sb.st_size;
	else if (errno == ENOENT)
		ret = error(eb, YERR(NOT_FOUND), "no blob '%s'", name);
	else
		ret = error(eb, yerr_of_errno(errno), "cannot stat '%s': %s", path, strerror(errno));
	free(path);
	return ret;
}

/* The file itself, for sendfile(). */
static int sqlite_blob_read(struct store *st, const char *name, uint64_t off, uint64_t len,
			    struct store_blob_range *out, struct errbuf *eb)
{
	char *path = blob_path(st, name);
	struct stat sb;
	int ret = 0;

	out->buf = NULL;
	out->len = 0;
	out->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (out->fd < 0 || fstat(out->fd, &sb)) {
		ret = error(eb, errno == ENOENT ? YERR(NOT_FOUND) : yerr_of_errno(errno),
			    "cannot read '%s': %s", path, strerror(errno));
		if (out->fd >= 0)
			close(out->fd);
		out->fd = -1;
	} else if ((uint64_t)sb.st_size > off) {
		out->len = (uint64_t)sb.st_size - off;
		if (out->len > len)
			out->len = len;
	}
	free(path);
	return ret;
}

/* ---- backups: whole state.db files ---- */

/* The version a state.db's schema_version holds (0: no such table, a store
 * from before versions), in *out; an SQLite result code. */
static int read_version(sqlite3 *db, int64_t *out)
{
	sqlite3_stmt *s = NULL;
	int rc;

	*out = 0;
	rc = sqlite3_prepare_v2(db, "SELECT version FROM schema_version", -1, &s, NULL);
	if (rc == SQLITE_ERROR && strstr(sqlite3_errmsg(db), "no such table"))
		return SQLITE_OK;
	if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		*out = sqlite3_column_int64(s, 0);
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return rc;
}

/* SQLite's online backup, all pages in one step: one read transaction of
 * the source (WAL: the master goes on writing meanwhile), so the copy is
 * the store as of one commit. The copy leaves WAL mode (it is one file).
 * The -wal and -shm files a reader makes when the master is not running
 * are given by SQLite, run as root, to the owner of state.db: a master
 * run as a service user can still open them. */
static int sqlite_snapshot(const char *dir, const char *dest, int64_t *version, struct errbuf *eb)
{
	char *path = xasprintf("%s/state.db", dir);
	sqlite3 *src = NULL, *dst = NULL;
	sqlite3_backup *b;
	struct stat db_st;
	int rc, fd, ret = 0;

	*version = 0;
	if (stat(path, &db_st)) {
		ret = error(eb, errno == ENOENT ? YERR(NOT_FOUND) : yerr_of_errno(errno),
			    "cannot read store '%s': %s", path, strerror(errno));
		goto out;
	}
	rc = sqlite3_open_v2(path, &src, SQLITE_OPEN_READONLY, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_open_v2(dest, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc != SQLITE_OK) {
		sqlite3 *db = dst ? dst : src;
		ret = error(eb, YERR(IO), "cannot open '%s': %s", dst ? dest : path,
			    db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		goto out;
	}
	sqlite3_busy_timeout(src, 5000);
	b = sqlite3_backup_init(dst, "main", src, "main");
	if (!b) {
		ret = error(eb, YERR(IO), "cannot copy store '%s': %s", path, sqlite3_errmsg(dst));
		goto out;
	}
	/* busy only while the master recovers its WAL: a little later */
	for (int tries = 0; (rc = sqlite3_backup_step(b, -1)) == SQLITE_BUSY || rc == SQLITE_LOCKED; tries++) {
		if (tries == 100)
			break;
		sqlite3_sleep(50);
	}
	sqlite3_backup_finish(b);
	if (rc != SQLITE_DONE) {
		ret = error(eb, rc == SQLITE_FULL ? YERR(NO_SPACE) : YERR(IO), "cannot copy store '%s' to '%s': %s",
			    path, dest, sqlite3_errstr(rc));
		goto out;
	}
	rc = sqlite3_exec(dst, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = read_version(dst, version);
	if (rc != SQLITE_OK) {
		ret = error(eb, YERR(IO), "cannot read the copy '%s' of store '%s': %s", dest, path,
			    sqlite3_errmsg(dst));
		goto out;
	}
	rc = sqlite3_close(dst);
	dst = NULL;
	fd = rc == SQLITE_OK ? open(dest, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0 || fsync(fd)) {
		ret = error(eb, YERR(IO), "cannot sync '%s': %s", dest,
			    rc != SQLITE_OK ? sqlite3_errstr(rc) : strerror(errno));
	}
	if (fd >= 0)
		close(fd);
out:
	sqlite3_close(dst);
	sqlite3_close(src);
	free(path);
	return ret;
}

static int sqlite_held(const char *dir, bool *out, struct errbuf *eb)
{
	char *path = xasprintf("%s/state.db", dir);
	struct stat sb;
	int ret = 0;

	*out = !lstat(path, &sb);
	if (!*out && errno != ENOENT)
		ret = error(eb, yerr_of_errno(errno), "cannot read '%s': %s", path, strerror(errno));
	free(path);
	return ret;
}

/* Checks that the file at src is a whole SQLite database of a schema this
 * master can open (at most STORE_SCHEMA_VERSION). */
static int check_copy(const char *src, struct errbuf *eb)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	int64_t version = 0;
	int rc, ret = 0;

	rc = sqlite3_open_v2(src, &db, SQLITE_OPEN_READONLY, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &s, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *v = (const char *)sqlite3_column_text(s, 0);
		if (!v || strcmp(v, "ok")) {
			ret = error(eb, YERR(BAD_REQUEST), "store copy '%s' is damaged: %s", src, v ? v : "?");
			goto out;
		}
		rc = SQLITE_OK;
	}
	if (rc == SQLITE_OK)
		rc = read_version(db, &version);
	if (rc != SQLITE_OK) {
		ret = error(eb, YERR(BAD_REQUEST), "store copy '%s' is not a yard state.db: %s", src,
			    db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		goto out;
	}
	if (version > STORE_SCHEMA_VERSION)
		ret = error(eb, YERR(BAD_REQUEST),
			    "store copy '%s' is at schema version %" PRId64 ", newer than this yard's %d:"
			    " restore it with the yard that made it", src, version, STORE_SCHEMA_VERSION);
out:
	sqlite3_finalize(s);
	sqlite3_close(db);
	return ret;
}

/* Moves state.db, with its -wal and -shm, into dir/aside. */
static int move_aside(const char *dir, const char *aside, struct errbuf *eb)
{
	static const char *const names[] = { "state.db", "state.db-wal", "state.db-shm" };
	char *to_dir = xasprintf("%s/%s", dir, aside);
	int ret = 0;

	if (mkdir_p(to_dir, 0700)) {
		ret = error(eb, yerr_of_errno(errno), "cannot create '%s': %s", to_dir, strerror(errno));
		goto out;
	}
	for (size_t i = 0; !ret && i < ARRAY_SIZE(names); i++) {
		char *from = xasprintf("%s/%s", dir, names[i]), *to = xasprintf("%s/%s", to_dir, names[i]);
		if (rename(from, to) && errno != ENOENT)
			ret = error(eb, yerr_of_errno(errno), "cannot move '%s' to '%s': %s", from, to,
				    strerror(errno));
		free(from);
		free(to);
	}
	if (!ret && fsync_parent_dir(to_dir))
		ret = error(eb, YERR(IO), "cannot sync '%s': %s", dir, strerror(errno));
out:
	free(to_dir);
	return ret;
}

static int sqlite_restore(const char *dir, const char *src, const char *aside, struct errbuf *eb)
{
	char *dst = xasprintf("%s/state.db", dir);
	bool held;
	int fd, ret;

	if ((ret = check_copy(src, eb)) || (ret = sqlite_held(dir, &held, eb)))
		goto out;
	if (held && !aside) {
		ret = error(eb, YERR(CONFLICT), "store '%s' exists: a restore replaces it only when told to"
			    " (--force keeps it aside)", dst);
		goto out;
	}
	if (held && (ret = move_aside(dir, aside, eb)))
		goto out;
	fd = open(src, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fsync(fd)) {
		ret = error(eb, yerr_of_errno(errno), "cannot sync '%s': %s", src, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	if (rename(src, dst))
		ret = error(eb, yerr_of_errno(errno), "cannot move '%s' to '%s': %s", src, dst, strerror(errno));
	else if (fsync_parent_dir(dst))
		ret = error(eb, YERR(IO), "cannot sync the directory of '%s': %s", dst, strerror(errno));
out:
	free(dst);
	return ret;
}

const struct store_ops store_sqlite_ops = {
	.name = "sqlite",
	.open = sqlite_open,
	.close = sqlite_close,
	.begin = sqlite_begin,
	.commit = sqlite_commit,
	.rollback = sqlite_rollback,
	.put = sqlite_put,
	.del = sqlite_del,
	.get_meta = sqlite_get_meta,
	.load = sqlite_load,
	.metrics_append = sqlite_metrics_append,
	.metrics_last_step = sqlite_metrics_last_step,
	.metrics_query = sqlite_metrics_query,
	.metrics_cursor_get = sqlite_metrics_cursor_get,
	.metrics_cursor_set = sqlite_metrics_cursor_set,
	.audit_append = sqlite_audit_append,
	.audit_query = sqlite_audit_query,
	.blob_append = sqlite_blob_append,
	.blob_sync = sqlite_blob_sync,
	.blob_put_file = sqlite_blob_put_file,
	.blob_put = sqlite_blob_put,
	.blob_size = sqlite_blob_size,
	.blob_read = sqlite_blob_read,
	.blob_delete = sqlite_blob_delete,
	.blobs_are_files = true,
	.snapshot = sqlite_snapshot,
	.held = sqlite_held,
	.restore = sqlite_restore,
};
