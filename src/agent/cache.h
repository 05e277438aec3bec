/*
 * The node's data cache (docs/datasets.md, "The node cache"): WORK/cache
 * holds one directory per staged dataset, named by its content key
 * ("yard-HEX", "s3-HEX", "https-HEX", "job-HEX"), read-only and shared by every task
 * that uses it. WORK/cache/index.json keeps each entry's size and last use,
 * so that least recently used entries can be evicted under a cap.
 *
 * A staging writes KEY.N.partial/ (cache_partial_path: N its own, so that
 * two stagings of the same data, for two tasks at once, never write into
 * one dir), then cache_commit() renames it to KEY and holds it; the second
 * to commit finds KEY there and holds that. A task holds its entries while it lives
 * (cache_hold / cache_unhold); a held entry is never evicted. Holds are in
 * memory: an agent that restarts holds again what its live tasks name.
 *
 * An entry is committed before its files are synced, so that its task
 * starts without waiting for the disk; cache_sync syncs them after. The
 * index marks such an entry "unsynced" with the machine's boot id: an
 * agent that starts again in the same boot (the page cache holds every
 * byte) syncs it then, one started after a reboot removes it (its last
 * pages may never have reached the disk), and it is staged again.
 *
 * Every function is thread safe (stagings run on worker threads).
 */
#ifndef YARD_AGENT_CACHE_H
#define YARD_AGENT_CACHE_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

#define CACHE_DEFAULT_CAP ((uint64_t)50 << 30)

struct cache_entry {
	char *key;          /* owned: "yard-HEX" */
	uint64_t size;      /* bytes of its files */
	int64_t last_use;   /* unix ms */
	unsigned holds;     /* live tasks (or stagings) that use it */
	bool unsynced;      /* committed, its files not yet synced (cache_sync) */
};

struct cache {
	pthread_mutex_t lock;
	char *dir;                  /* owned: WORK/cache */
	uint64_t cap;               /* bytes */
	uint64_t used;              /* sum of the entries' sizes */
	uint64_t reserved;          /* bytes promised to stagings under way */
	uint64_t partials;          /* staging dirs named so far (cache_partial_path) */
	char boot_id[64];           /* this boot of the machine, as the index records it ("": unknown) */
	struct cache_entry *v;      /* owned */
	size_t n, alloc;
};

/* cache_open makes dir if needed, reads index.json, removes the leftovers
 * of stagings or evictions an earlier agent did not finish (*.partial,
 * .trash-*), forgets index entries whose directory is gone and adopts
 * directories the index lacks (measured, last use = their mtime). */
int cache_open(struct cache *c, const char *dir, uint64_t cap, struct errbuf *eb);
void cache_release(struct cache *c);

/* cache_key_valid: "yard-", "s3-", "https-" or "job-" and 64 lowercase hex digits. */
bool cache_key_valid(const char *key);

/* Paths of an entry and of a new staging dir of it, one per call. Caller
 * frees. */
char *cache_entry_path(const struct cache *c, const char *key);
char *cache_partial_path(struct cache *c, const char *key);

/* cache_hold: when key is cached, holds it, marks it used now and returns
 * 1; returns 0 when it is not cached. */
int cache_hold(struct cache *c, const char *key);
/* cache_unhold releases one hold. */
void cache_unhold(struct cache *c, const char *key);

/* cache_reserve makes room for need more bytes: evicts least recently used
 * entries that nobody holds until used + reserved + need <= cap, then adds
 * need to reserved. YERR(NO_SPACE) when even evicting every unheld entry is
 * not enough (nothing is evicted then). */
int cache_reserve(struct cache *c, uint64_t need, struct errbuf *eb);
/* cache_unreserve gives back what cache_reserve promised. */
void cache_unreserve(struct cache *c, uint64_t n);

/* cache_commit renames partial (cache_partial_path's of key) to KEY,
 * records it with size bytes, held once, unsynced, and saves the index.
 * When KEY appeared meanwhile (another staging of the same data won),
 * partial is removed and that entry is held. */
int cache_commit(struct cache *c, const char *key, const char *partial, uint64_t size, struct errbuf *eb);
/* cache_sync syncs the files of the entries committed unsynced (one
 * syncfs of the cache's filesystem) and saves the index that says so;
 * -1 with errno when the sync fails (they stay unsynced). */
int cache_sync(struct cache *c);

/* cache_keys: a new array of the keys that start with prefix ("" for all). */
json_t *cache_keys(struct cache *c, const char *prefix);

/* cache_measure sums the sizes of the regular files under path; and
 * cache_seal makes them read-only (a-w). -1 with errno on error. */
int cache_measure(const char *path, uint64_t *size);
int cache_seal(const char *path);

#endif
