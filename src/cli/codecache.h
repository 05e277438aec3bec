/*
 * The code cache of `yard submit`: for each directory it packed for a
 * master, the fingerprint of the directory then (codepack_fingerprint) and
 * the digest the master stored its code under. A directory whose
 * fingerprint has not changed since is not packed or uploaded again: its
 * job names the digest the master already has. A researcher submits the
 * same code many times (sweeps, reruns with --set); packing it each time
 * costs a second for a large tree, and loading libarchive alone costs a
 * call more CPU than all the rest of it.
 *
 * One small file per directory and master, in $XDG_CACHE_HOME/yard/code
 * (else ~/.cache/yard/code): "FINGERPRINT DIGEST\n". A file that cannot be
 * read or parsed is a miss; the cache is never needed for correctness.
 */
#ifndef YARD_CLI_CODECACHE_H
#define YARD_CLI_CODECACHE_H

/* codecache_lookup: the digest (caller frees) that dir's code had on master
 * when dir had fingerprint, or NULL. */
char *codecache_lookup(const char *master, const char *dir, const char *fingerprint);
/* codecache_store remembers it (errors are ignored: a cache). */
void codecache_store(const char *master, const char *dir, const char *fingerprint, const char *digest);
/* codecache_forget drops dir's entry for master (the master no longer has
 * the code). */
void codecache_forget(const char *master, const char *dir);

#endif
