/*
 * The master's durable store, as a table of operations so that another
 * backend (PostgreSQL) can be added beside SQLite. Every entity is one row:
 * a key and the entity's JSON document (the master's own serialisation).
 *
 * Writes happen only between begin() and commit(); the master groups every
 * change of one event-loop iteration into one transaction (group commit).
 * On a failed commit the backend rolls the transaction back itself: nothing
 * of the batch is stored. A write's failure may be reported late, by a later
 * read of the same transaction or by commit (PostgreSQL sends a batch's
 * writes without waiting for each answer); a transaction with a failed write
 * never commits.
 *
 * Each backend keeps a versioned schema: a table schema_version holds the
 * version of the store, open() upgrades an older store step by step inside
 * one transaction (keeping every row) and refuses, naming both versions, a
 * store newer than STORE_SCHEMA_VERSION. Both backends number their steps
 * alike: one version is the same tables in each.
 *
 * Beside the rows the store keeps blobs: byte strings named by short
 * relative paths ("logs/12.stdout", "code/HEX.tar.gz", "blobs/HEX"), either
 * appended by offset (task logs) or put whole (content-addressed archives,
 * dataset chunks and manifests, whose names are their digests). SQLite
 * keeps each blob as the file of that name under its data dir, written and
 * fdatasync'd at once (what a rollback does not undo: the file is the truth
 * about what is held); PostgreSQL keeps them as rows of the table blobs
 * (name, off, data), written in the transaction like any row, so that
 * whichever master leads reads them and a rolled-back batch leaves none.
 */
#ifndef YARD_MASTER_STORE_H
#define YARD_MASTER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

enum store_kind { STORE_JOB, STORE_TASK, STORE_NODE, STORE_TOKEN, STORE_META, STORE_DATASET,
		  STORE_EXPERIMENT, STORE_TEMPLATE, STORE_PROVISION, STORE_KIND__COUNT };

/* The schema version this master writes (one migration step per version
 * in each backend; docs/design-notes.md lists them). */
#define STORE_SCHEMA_VERSION 6

struct store; /* the backend's private state */

/* load callback: key is the id or name as text, doc the JSON text. Returning
 * non-zero stops the load with that code. Callbacks of loads and queries
 * must not call the store: PostgreSQL's answer is still arriving on the
 * connection while they run. */
typedef int (*store_load_fn)(void *ctx, const char *key, const char *doc);

/* One stored point of a training metric series (src/master/metrics.h). */
struct store_metric {
	const char *name;       /* the series, borrowed */
	int64_t step;           /* >= 0 */
	double value;           /* finite */
	int64_t time;           /* wall clock microseconds, as the agent saw the line */
};

/* metrics query callback, called in (name, step, arrival) order; returning
 * non-zero stops the query with that code. */
typedef int (*store_metric_fn)(void *ctx, const struct store_metric *pt);

/* One entry of the audit log (src/master/audit.h): a request to a route
 * that changes state, and its outcome. Strings are borrowed; those that may
 * be absent are NULL. */
struct store_audit {
	int64_t id;             /* its sequence number (set by the store; ignored by append) */
	int64_t time;           /* wall clock microseconds, when the reply was set */
	const char *user;       /* the caller's user (NULL: no known token) */
	const char *role;       /* its role's name, or NULL */
	const char *token;      /* the public id of its token (auth.h), or NULL */
	const char *addr;       /* the client's IPv4 or IPv6 address as text, or NULL */
	const char *method;
	const char *path;       /* the request's path, valid UTF-8 (audit.c escapes it) */
	int status;             /* the HTTP status of the reply */
	const char *code;       /* the error code of a refusal ("forbidden"), NULL on success */
};

/* audit query callback, newest entry first; returning non-zero stops the
 * query with that code. */
typedef int (*store_audit_fn)(void *ctx, const struct store_audit *e);

/* Who holds the lease of a shared store (store_ops.lease_acquire). */
struct store_lease {
	uint64_t epoch; /* the lease's epoch: one more at every change of holder */
	bool mine;      /* taken by this call: the caller leads at epoch */
	bool live;      /* held by another master whose lease has not expired */
	char *url;      /* the holder's advertised URL, or NULL (owned) */
};
void store_lease_release(struct store_lease *l);
/* What blob_read gives: len bytes of a blob from the offset asked, either
 * as an open file to read them from at that offset (fd >= 0, caller closes;
 * an answer can sendfile() them) or as bytes in memory (fd -1, buf owned by
 * the caller). */
struct store_blob_range {
	int fd;
	char *buf;
	uint64_t len;
};

/* A read into memory gives at most this many bytes; read on for more. */
#define STORE_BLOB_READ_MAX ((uint64_t)4 << 20)

struct store_ops {
	const char *name;
	/* open creates or opens the store at where (SQLite: the data dir, which
	 * holds state.db; PostgreSQL: a connection string) and brings its schema
	 * to STORE_SCHEMA_VERSION; *created tells whether it is new */
	int (*open)(const char *where, struct store **out, int *created, struct errbuf *eb);
	void (*close)(struct store *st);
	int (*begin)(struct store *st, struct errbuf *eb);
	/* commit makes the transaction durable; on failure it is rolled back and
	 * the error is YERR(NO_SPACE) for a full disk, YERR(IO) otherwise */
	int (*commit)(struct store *st, struct errbuf *eb);
	void (*rollback)(struct store *st);
	/* put replaces the row of kind with key (inside a transaction) */
	int (*put)(struct store *st, enum store_kind kind, const char *key, const char *doc,
		   struct errbuf *eb);
	/* del removes the row of kind with key, if any (inside a transaction) */
	int (*del)(struct store *st, enum store_kind kind, const char *key, struct errbuf *eb);
	/* get_meta copies the meta value of key into a new string (*out, caller
	 * frees), or sets *out NULL when absent */
	int (*get_meta)(struct store *st, const char *key, char **out, struct errbuf *eb);
	/* load calls fn for every row of kind in key order (numeric keys numerically) */
	int (*load)(struct store *st, enum store_kind kind, store_load_fn fn, void *ctx,
		    struct errbuf *eb);

	/* Training metrics: rows (task, name, step, value, time), not documents,
	 * and never loaded into memory. Writes only inside a transaction. */
	/* metrics_append stores n points of a task, in arrival order */
	int (*metrics_append)(struct store *st, uint64_t task_id, const struct store_metric *pts,
			      size_t n, struct errbuf *eb);
	/* metrics_last_step: the largest step of a task's series (-1 when empty) */
	int (*metrics_last_step)(struct store *st, uint64_t task_id, const char *name, int64_t *out,
				 struct errbuf *eb);
	/* metrics_query calls fn for each point of a task, of one series (name)
	 * or all (name NULL), ordered by name, then step, then arrival */
	int (*metrics_query)(struct store *st, uint64_t task_id, const char *name, store_metric_fn fn,
			     void *ctx, struct errbuf *eb);
	/* metrics_cursor_get/set: the byte offset of a task's output stream up
	 * to which its points are stored (0 when none) */
	int (*metrics_cursor_get)(struct store *st, uint64_t task_id, int stream, uint64_t *out,
				  struct errbuf *eb);
	int (*metrics_cursor_set)(struct store *st, uint64_t task_id, int stream, uint64_t off,
				  struct errbuf *eb);

	/* The audit log: rows, appended and queried, never loaded into memory. */
	/* audit_append stores one entry (inside a transaction) */
	int (*audit_append)(struct store *st, const struct store_audit *e, struct errbuf *eb);
	/* audit_query calls fn for the entries of user (NULL: any) with time >=
	 * since, newest first, at most limit of them */
	int (*audit_query)(struct store *st, const char *user, int64_t since, size_t limit,
			   store_audit_fn fn, void *ctx, struct errbuf *eb);

	/* Leadership, for masters that share one store (master/leader.h). A
	 * backend that one master alone opens (SQLite) leaves both NULL: its
	 * master always leads. Expiry is by the store server's clock, so the
	 * masters' clocks need not agree. */
	/* lease_acquire takes the lease when it is free or has expired, or,
	 * with reclaim, when holder (the master's identity: its host and data
	 * dir) holds it already (this master, started again), advertising url,
	 * for lease_ms; *out says who holds it now (outside a transaction;
	 * release *out). On an error *out holds nothing. */
	int (*lease_acquire)(struct store *st, const char *holder, const char *url, bool reclaim,
			     unsigned lease_ms, struct store_lease *out, struct errbuf *eb);
	/* lease_release ends the lease of epoch at once (a leader stopping),
	 * so that a standby need not wait for it to expire */
	int (*lease_release)(struct store *st, uint64_t epoch, struct errbuf *eb);
	/* lease_fence: from now on every commit checks, inside its own
	 * transaction, that the lease is still at epoch and renews it for
	 * lease_ms; a commit that finds another epoch applies nothing and fails
	 * with YERR(NOT_LEADER). epoch 0: commits check nothing. */
	void (*lease_fence)(struct store *st, uint64_t epoch, unsigned lease_ms);
	/* Blobs (see the head of this file). Names are [A-Za-z0-9._/-]
	 * without "..", checked by the caller. Writes inside a transaction. */
	/* blob_append stores the len bytes of data that start at off of blob
	 * name, idempotent by offset (common/logoffset.h's log_chunk_decide):
	 * bytes the blob holds already are skipped; an off past its size is
	 * refused with YERR(CONFLICT). OUT have: its size afterwards (at a
	 * refusal, the size held). A missing blob is one of 0 bytes. An
	 * append may reach the disk only at blob_sync (SQLite: the file is
	 * written, not synced): a machine that crashes before may come back
	 * holding less, and the one who sent it sends again from the size
	 * held (an agent keeps a task's log until its end is recorded). */
	int (*blob_append)(struct store *st, const char *name, uint64_t off, const void *data,
			   size_t len, uint64_t *have, struct errbuf *eb);
	/* blob_sync: what blob name holds is durable at the commit of the open
	 * transaction (at once outside one). No such blob: nothing to do. */
	int (*blob_sync)(struct store *st, const char *name, struct errbuf *eb);
	/* blob_put_file makes the whole file at path the blob name, unless a
	 * blob of that name exists (content-addressed names: it holds the same
	 * bytes). path is taken: it is gone after the call, even on error; it
	 * must be on the data dir's filesystem (SQLite renames it into place). */
	int (*blob_put_file)(struct store *st, const char *name, const char *path,
			     struct errbuf *eb);
	/* blob_put is blob_put_file of len bytes in memory (a dataset chunk, a
	 * manifest) */
	int (*blob_put)(struct store *st, const char *name, const void *data, size_t len,
			struct errbuf *eb);
	/* blob_size: *out the size of blob name; YERR(NOT_FOUND) when there is
	 * no such blob (*out 0) */
	int (*blob_size)(struct store *st, const char *name, uint64_t *out, struct errbuf *eb);
	/* blob_read: the bytes of blob name from off, at most len of them (and
	 * at most STORE_BLOB_READ_MAX when they come in memory), into *out;
	 * fewer (0 at or past the end) where the blob ends. YERR(NOT_FOUND)
	 * when there is no such blob. */
	int (*blob_read)(struct store *st, const char *name, uint64_t off, uint64_t len,
			 struct store_blob_range *out, struct errbuf *eb);
	/* blob_delete removes blob name, if there is one. Unlike the other
	 * writes it may also run outside a transaction, taking effect at once
	 * (garbage collected after the commit that dropped the last use). */
	int (*blob_delete)(struct store *st, const char *name, struct errbuf *eb);

	/* Backups (master/backup.h): whole stores, each op with a connection
	 * of its own, never through an open struct store. */
	/* blobs_are_files: the blobs are files of the data dir (SQLite), which
	 * a snapshot does not hold: a backup copies them after it, and the
	 * master's garbage collection waits while a backup runs; false: the
	 * blobs are in the store and in its snapshots (PostgreSQL) */
	bool blobs_are_files;
	/* snapshot writes a consistent copy of the store at where, as of one
	 * moment, to the new file dest (SQLite: a state.db made by SQLite's
	 * online backup, from a connection of its own, while a master writes;
	 * PostgreSQL: pg_dump -Fc of one snapshot of the database, blobs
	 * included). OUT version: the copy's schema version. YERR(NOT_FOUND)
	 * when where holds no store. */
	int (*snapshot)(const char *where, const char *dest, int64_t *version, struct errbuf *eb);
	/* held: *out whether where holds a store (SQLite: a state.db;
	 * PostgreSQL: a schema_version table) */
	int (*held)(const char *where, bool *out, struct errbuf *eb);
	/* restore makes the snapshot file src (what snapshot wrote, of any
	 * schema version up to STORE_SCHEMA_VERSION: the master upgrades it
	 * when it opens it) the store at where, checking it first (SQLite:
	 * its integrity; PostgreSQL: that pg_restore can read it). No master
	 * may have where open. A store where holds already is refused with
	 * YERR(CONFLICT) unless aside is given, a name to keep it under:
	 * SQLite moves state.db (and its -wal, -shm) into the dir where/aside;
	 * PostgreSQL moves the yard tables into the schema aside. src must be
	 * on the data dir's filesystem (SQLite renames it into place); it is
	 * gone after a SQLite restore that succeeded. */
	int (*restore)(const char *where, const char *src, const char *aside, struct errbuf *eb);
};

extern const struct store_ops store_sqlite_ops;
/* PostgreSQL (libpq): where is a postgres:// or postgresql:// URI or a
 * keyword string ("host=... dbname=..."); what it leaves out comes from the
 * PG* environment variables, as libpq has it. A connection lost outside a
 * transaction is made again at the next begin(). */
extern const struct store_ops store_pg_ops;

/* store_pg_display: how messages name a PostgreSQL store, its connection
 * string without the password (a URI's user:password@ and password
 * parameters are cut; a keyword string is written again without its
 * password keywords). Caller frees. */
char *store_pg_display(const char *conninfo);

#endif
