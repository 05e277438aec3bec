/*
 * Backups of a master's state (docs/operations.md, "Backups and upgrades"):
 * `yard admin backup FILE` makes one archive of the store and of the data
 * dir's files while a master runs; `yard admin restore FILE` puts it back
 * while none does. Both run on the master's host, beside it, reading its
 * data dir and store connection string (struct backup_settings).
 *
 * The archive is a POSIX (pax) tar, compressed as FILE's name says (.gz or
 * .tgz: gzip, .zst: zstd, anything else: none), of these members in order:
 *
 *   yard-backup.json   the header: {"format": 1, "yard_version",
 *                      "schema_version", "store": "sqlite" | "postgres",
 *                      "created_at" (UTC, RFC 3339), "host", "data_dir"}
 *   store/state.db     the store's snapshot (store_ops.snapshot): SQLite's
 *   store/postgres.dump   or pg_dump's custom format
 *   data/PATH          the data dir's files the master keeps: admin-token,
 *                      join-token, tls/, and with SQLite logs/, code/,
 *                      blobs/ and manifests/ (the blobs; with PostgreSQL
 *                      they are in the store and these dirs are empty)
 *   yard-backup.sums   the trailer: {"members": [{"name", "size",
 *                      "sha256"}]} of every member before it
 *
 * Consistency with a master running: the store is snapshot first, then the
 * files copied. A log is append-only, so the copy of its file holds at
 * least the bytes the snapshot knows (each file is copied up to the size it
 * had when opened). Blobs other than logs are written whole (renamed into
 * place) before the commit that refers to them, so each one the snapshot
 * refers to exists when the copy runs, unless the master removed it since:
 * the backup holds DATA/backup.lock (a shared flock) from before the
 * snapshot to the end, and the master removes blobs only while it can take
 * that lock exclusively (backup_gc_begin), so a removal happens wholly
 * before the snapshot (which then no longer refers to the blob) or after
 * the backup.
 *
 * A master holds an exclusive flock on its data dir for its lifetime
 * (backup_lock_datadir), as a restore does while it writes: a second
 * master on the same data dir, and a restore into one in use, are refused.
 */
#ifndef YARD_MASTER_BACKUP_H
#define YARD_MASTER_BACKUP_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

/* The archive's format: one more at every change a reader must know of. */
#define BACKUP_FORMAT 1

/* Where the master keeps its state: what `yard master` was given. */
struct backup_settings {
	const char *data_dir; /* --data-dir */
	const char *store;    /* --store, a PostgreSQL connection string; NULL: SQLite in data_dir */
};

/* What a backup or a restore did, for its closing line. */
struct backup_report {
	char store[16];         /* the store's kind: "sqlite" or "postgres" */
	int64_t schema_version; /* the snapshot's */
	char created_at[32];    /* when the backup was made (UTC, RFC 3339) */
	char yard_version[32];  /* by which yard */
	uint64_t files;         /* the data dir's files in the archive */
	uint64_t bytes;         /* their bytes, and the snapshot's */
	uint64_t store_bytes;   /* the snapshot's bytes */
	uint64_t archive_bytes; /* the archive file's size */
	double seconds;         /* how long it took */
	char aside[64];         /* restore --force: the name the old state was kept under, or "" */
};

/* backup_create writes the backup of the master of s to file (as
 * FILE.tmp, fsync'd, then renamed; an existing file is refused). Runs
 * beside a running master or without one. OUT report. */
int backup_create(const struct backup_settings *s, const char *file, struct backup_report *report,
		  struct errbuf *eb);

/* backup_restore makes the state of the backup file the state of a master
 * of s, whose data dir (created if missing) no master may use meanwhile.
 * The archive is read and checked whole (its header, every member's size
 * and sha256 against the trailer, the snapshot itself) before anything of
 * the data dir or store is touched. A backup of a newer schema than this
 * yard's is refused (an older one is upgraded by the master when it
 * opens it), and so is one of the other kind of store. A data dir or
 * store that holds a master's state already is refused unless force:
 * then that state is moved aside, never deleted (the report names where:
 * the dir DATA/NAME, or with PostgreSQL also the schema NAME). OUT report. */
int backup_restore(const struct backup_settings *s, const char *file, bool force,
		   struct backup_report *report, struct errbuf *eb);

/* backup_lock_datadir takes the exclusive flock of data_dir that a master
 * holds for its lifetime; OUT *fd, which holds it until closed. Another
 * holder is YERR(CONFLICT), named in the message. */
int backup_lock_datadir(const char *data_dir, int *fd, struct errbuf *eb);

/* backup_gc_begin: whether the master may remove blobs of data_dir now.
 * false while a backup holds DATA/backup.lock; true otherwise, with *fd
 * holding that lock (or -1: there is no lock file) until backup_gc_end,
 * so that a backup starting meanwhile waits for the removals to end. */
bool backup_gc_begin(const char *data_dir, int *fd);
void backup_gc_end(int fd);

#endif
