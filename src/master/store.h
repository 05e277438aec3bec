/*
 * The master's durable store, as a table of operations so that another
 * backend (PostgreSQL) can be added beside SQLite. Every entity is one row:
 * a key and the entity's JSON document (the master's own serialisation).
 *
 * Writes happen only between begin() and commit(); the master groups every
 * change of one event-loop iteration into one transaction (group commit).
 * On a failed commit the backend rolls the transaction back itself: nothing
 * of the batch is stored.
 */
#ifndef YARD_MASTER_STORE_H
#define YARD_MASTER_STORE_H

#include <stdint.h>

#include "base/error.h"

enum store_kind { STORE_JOB, STORE_TASK, STORE_NODE, STORE_TOKEN, STORE_META, STORE_KIND__COUNT };

struct store; /* the backend's private state */

/* load callback: key is the id or name as text, doc the JSON text. Returning
 * non-zero stops the load with that code. */
typedef int (*store_load_fn)(void *ctx, const char *key, const char *doc);

struct store_ops {
	const char *name;
	/* open creates or opens the store under dir; *created tells whether it is new */
	int (*open)(const char *dir, struct store **out, int *created, struct errbuf *eb);
	void (*close)(struct store *st);
	int (*begin)(struct store *st, struct errbuf *eb);
	/* commit makes the transaction durable; on failure it is rolled back and
	 * the error is YERR(NO_SPACE) for a full disk, YERR(IO) otherwise */
	int (*commit)(struct store *st, struct errbuf *eb);
	void (*rollback)(struct store *st);
	/* put replaces the row of kind with key (inside a transaction) */
	int (*put)(struct store *st, enum store_kind kind, const char *key, const char *doc,
		   struct errbuf *eb);
	/* get_meta copies the meta value of key into a new string (*out, caller
	 * frees), or sets *out NULL when absent */
	int (*get_meta)(struct store *st, const char *key, char **out, struct errbuf *eb);
	/* load calls fn for every row of kind in key order (numeric keys numerically) */
	int (*load)(struct store *st, enum store_kind kind, store_load_fn fn, void *ctx,
		    struct errbuf *eb);
};

extern const struct store_ops store_sqlite_ops;

#endif
