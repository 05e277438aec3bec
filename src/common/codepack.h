/*
 * Job code archives (tar.gz through libarchive). The CLI packs the directory
 * that holds a spec, honouring .yardignore; the agent unpacks it into each
 * task's fresh working directory.
 */
#ifndef YARD_CODEPACK_H
#define YARD_CODEPACK_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/crypto.h"
#include "base/error.h"
#include "base/strbuf.h"

/* codepack_create packs the regular files, directories and symlinks below dir
 * into a tar.gz in out (appended). .yardignore in dir holds gitignore-style
 * patterns (blank lines and '#' comments skipped; "name", "dir/", "*.ext",
 * "/anchored", "!negation" not needed). The archive is deterministic (sorted
 * names, zero mtimes, uid/gid 0) so that the same tree gives the same digest.
 * Fails with YERR(TOO_LARGE) past max_bytes of input (0 = no limit). */
int codepack_create(const char *dir, struct strbuf *out, uint64_t max_bytes, struct errbuf *eb);

/* codepack_fingerprint hashes what codepack_create would pack of dir
 * without reading a byte of it: each entry's name, mode, size, mtime,
 * ctime, device and inode, in the archive's order (as git's index tells a
 * changed file from its stat data). Any change to the code changes the
 * fingerprint, since every write moves a file's ctime, which nobody can set,
 * except where timestamps are too coarse to tell two changes apart: so
 * *settled is false when an entry changed less than CODEPACK_SETTLE_NS
 * before the walk began, and such a fingerprint vouches for nothing. */
#define CODEPACK_SETTLE_NS 1000000000LL
int codepack_fingerprint(const char *dir, char out[SHA256_HEX_LEN + 1], bool *settled,
			 struct errbuf *eb);

/* codepack_extract unpacks the tar.gz at archive_path into dest (created).
 * Absolute paths, ".." components, and links that point outside dest are
 * refused with YERR(BAD_REQUEST) naming the entry; nothing is written outside dest. */
int codepack_extract(const char *archive_path, const char *dest, struct errbuf *eb);

#endif
