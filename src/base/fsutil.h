/*
 * Small filesystem helpers. All return 0 or -1 with errno set.
 */
#ifndef YARD_FSUTIL_H
#define YARD_FSUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* mkdir_p creates path and its missing parents with mode. */
int mkdir_p(const char *path, unsigned mode);
/* write_file_atomic writes data to "PATH.tmp", fsyncs it, renames it over
 * path and fsyncs the directory, so readers see the old or the new content. */
int write_file_atomic(const char *path, const void *data, size_t len, unsigned mode);
/* write_file_replace is write_file_atomic without the fsyncs: readers still
 * see the old or the new content whatever process dies, but after a power
 * loss the file may be empty. For files whose meaning ends with the boot
 * (pid files, hints that a restart can rebuild). */
int write_file_replace(const char *path, const void *data, size_t len, unsigned mode);
/* self_sibling: the path of name in the directory of this program's own
 * binary (/proc/self/exe: the shim, the web app and yard-core are
 * installed beside yard), caller frees; NULL with errno when the binary
 * cannot be read. */
char *self_sibling(const char *name);
/* exec_sibling runs the program name beside this one (self_sibling) with
 * argv, in this process (same pid, same argv[0]); it returns, 1, only when
 * it cannot, having said why on stderr. */
int exec_sibling(const char *name, char **argv);
/* rm_rf removes path and everything below it; missing is not an error. */
int rm_rf(const char *path);
/* fsync_dir fsyncs the directory that holds path. */
int fsync_parent_dir(const char *path);
/* write_all writes every byte, retrying on EINTR and short writes. */
int write_all(int fd, const void *data, size_t len);
/* pwrite_all writes every byte at offset off (the fd's position unmoved). */
int pwrite_all(int fd, const void *data, size_t len, uint64_t off);
int path_exists(const char *path);
/* chown_tree gives path and everything below it to uid:gid, never following
 * a symbolic link (the link itself changes owner; a path that is a link
 * fails with ELOOP) and never descending into another filesystem. A file
 * with more than one hard link is left as it is: it could be a link to a
 * file outside the tree (someone else's). Each entry is changed through an
 * fd opened without following links, so a tree its owner changes meanwhile
 * cannot redirect it. */
int chown_tree(const char *path, uid_t uid, gid_t gid);
/* dir_ids: the entries of dir named by a decimal number (a task's, an
 * exec's), in no order; NULL and *n 0 when there are none or no dir.
 * Caller frees. */
uint64_t *dir_ids(const char *dir, size_t *n);

#endif
