/*
 * `yard git-worker`: the git work of one submission with code from git
 * (gitcode.h), in a process of its own. The master starts it (spawn_run,
 * from a worker thread) for each submission and kills it at the
 * git-timeout or when it stops: libgit2 has no network timeout, and a
 * server that accepts and never answers would otherwise hold a thread of
 * the master forever. libgit2 runs only here, never in the master.
 *
 * It reads one JSON object on stdin:
 *   {"dir": DATA/git, "tmp": a directory of this work's own (made by the
 *    master, removed by it), "url", "ref", "path" (or null), "sha" (the
 *    spec's code.sha, or null), "nocache": bool,
 *    "cred": null or {"prefix", "kind": "token-file"|"ssh-key", "path"}}
 * (a credential's file, never its secret), resolves the ref, fetches into
 * the mirror of the URL (DATA/git/mirrors, a flock per mirror) and packs
 * the tree into TMP/code.tar.gz, then writes one JSON object on stdout:
 *   {"rc": 0 or a YERR code, "field", "message" (no secret in it), "sha",
 *    "hex" (the archive's sha256), "cached": bool (the archive of the
 *    cache, DATA/git/packed: nothing in TMP), "fetched": bool}
 * and exits 0; any other exit is a failure of the worker itself.
 */
#ifndef YARD_MASTER_GITWORKER_H
#define YARD_MASTER_GITWORKER_H

/* The hidden subcommand name, and the archive's name in the work's TMP. */
#define GITWORKER_CMD "git-worker"
#define GITWORKER_ARCHIVE "code.tar.gz"

int cmd_git_worker(int argc, char **argv);

#endif
