/*
 * libarchive, loaded at its first use (dlopen) rather than by the dynamic
 * loader at every start. It maps libxml2, ICU and libstdc++ with it, and
 * loading those costs a CLI call about 1.2 ms of CPU, more than a whole
 * `squeue`, while only submissions with code and a master's backups and
 * an agent's code extraction use it (docs/design-notes.md, "A CLI as cheap
 * as sbatch"). The table's members are libarchive's own functions, with
 * their own prototypes from <archive.h>: al->archive_write_new() is
 * archive_write_new().
 */
#ifndef YARD_ARCHIVELIB_H
#define YARD_ARCHIVELIB_H

#include <archive.h>
#include <archive_entry.h>

#include "base/error.h"

/* The shared object the Debian package libarchive13 installs. */
#define ARCHIVELIB_SONAME "libarchive.so.13"

#define ARCHIVELIB_FUNCS(X)                                                                        \
	X(archive_entry_filetype) X(archive_entry_free) X(archive_entry_hardlink)                  \
	X(archive_entry_new) X(archive_entry_pathname) X(archive_entry_set_filetype)               \
	X(archive_entry_set_gid) X(archive_entry_set_hardlink) X(archive_entry_set_mtime)          \
	X(archive_entry_set_pathname) X(archive_entry_set_perm) X(archive_entry_set_size)          \
	X(archive_entry_set_symlink) X(archive_entry_set_uid) X(archive_entry_size)                \
	X(archive_entry_size_is_set) X(archive_entry_symlink) X(archive_errno)                     \
	X(archive_error_string) X(archive_read_data) X(archive_read_data_block)                    \
	X(archive_read_free) X(archive_read_new) X(archive_read_next_header)                       \
	X(archive_read_open_fd) X(archive_read_open_filename) X(archive_read_support_filter_all)    \
	X(archive_read_support_filter_gzip) X(archive_read_support_filter_none)                    \
	X(archive_read_support_format_tar) X(archive_write_add_filter_gzip)                        \
	X(archive_write_add_filter_none) X(archive_write_add_filter_zstd) X(archive_write_close)    \
	X(archive_write_data) X(archive_write_data_block) X(archive_write_disk_new)                \
	X(archive_write_disk_set_options) X(archive_write_finish_entry) X(archive_write_free)      \
	X(archive_write_header) X(archive_write_new) X(archive_write_open2)                        \
	X(archive_write_open_fd) X(archive_write_set_bytes_in_last_block)                          \
	X(archive_write_set_filter_option) X(archive_write_set_format_pax_restricted)

struct archivelib {
#define ARCHIVELIB_MEMBER(f) __typeof__(f) *f;
	ARCHIVELIB_FUNCS(ARCHIVELIB_MEMBER)
#undef ARCHIVELIB_MEMBER
};

/* archivelib_load: the library, loaded once (thread-safe); NULL with eb
 * naming the library and why when it cannot be loaded. */
const struct archivelib *archivelib_load(struct errbuf *eb);

#endif
