#include "base/compat.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

#include <dirent.h>
#include <ftw.h>
#include <libgen.h>

int mkdir_p(const char *path, unsigned mode)
{
	/* most calls find the parent there: one mkdir, not one a component */
	if (mkdir(path, (mode_t)mode) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return -1;
	char *p = xstrdup(path);
	int ret = 0;
	for (char *s = p + 1; ; s++) {
		if (*s == '/' || !*s) {
			char c = *s;
			*s = '\0';
			if (mkdir(p, (mode_t)mode) < 0 && errno != EEXIST) {
				ret = -1;
				break;
			}
			*s = c;
			if (!c)
				break;
		}
	}
	int saved = errno;
	free(p);
	errno = saved;
	return ret;
}

/* The most one write(2) is given: a file written in pieces of 16 MiB took
 * eight times the CPU of the same bytes in pieces of 1 MiB (Linux 6.x,
 * ext4: 4 s a GiB, where 1 MiB pieces take 0.5 s), and 1 GiB of a task's
 * log came to the master at a fifth of the disk's speed. */
#define WRITE_PIECE_MAX (1 << 20)

int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t n = write(fd, p, len < WRITE_PIECE_MAX ? len : WRITE_PIECE_MAX);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int pwrite_all(int fd, const void *data, size_t len, uint64_t off)
{
	const char *p = data;
	while (len) {
		ssize_t n = pwrite(fd, p, len < WRITE_PIECE_MAX ? len : WRITE_PIECE_MAX, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int fsync_parent_dir(const char *path)
{
	char *copy = xstrdup(path);
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret = -1;
	free(copy);
	if (fd < 0)
		return -1;
	ret = fsync(fd);
	int saved = errno;
	close(fd);
	errno = saved;
	return ret;
}

static int write_file_via_tmp(const char *path, const void *data, size_t len, unsigned mode,
			      int durable)
{
	struct strbuf tmp = STRBUF_INIT;
	int fd, ret = -1, saved;
	strbuf_addf(&tmp, "%s.tmp", path);
	fd = open(tmp.buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
	if (fd < 0)
		goto out;
	if (fchmod(fd, (mode_t)mode) < 0 || write_all(fd, data, len) < 0 || (durable && fsync(fd) < 0)) {
		saved = errno;
		close(fd);
		unlink(tmp.buf);
		errno = saved;
		goto out;
	}
	if (close(fd) < 0 || rename(tmp.buf, path) < 0) {
		saved = errno;
		unlink(tmp.buf);
		errno = saved;
		goto out;
	}
	ret = durable ? fsync_parent_dir(path) : 0;
out:
	saved = errno;
	strbuf_release(&tmp);
	errno = saved;
	return ret;
}

int write_file_atomic(const char *path, const void *data, size_t len, unsigned mode)
{
	return write_file_via_tmp(path, data, len, mode, 1);
}

int write_file_replace(const char *path, const void *data, size_t len, unsigned mode)
{
	return write_file_via_tmp(path, data, len, mode, 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (remove(path) < 0 && errno != ENOENT)
		return -1;
	return 0;
}

int rm_rf(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	return nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

int path_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* chown_tree's walk below the directory open as dirfd (closed here). Each
 * entry is opened without following links and changed through its fd, so
 * that what was checked (its type, its links) is what is changed, whatever
 * the names point to meanwhile. */
static int chown_below(int dirfd, dev_t dev, uid_t uid, gid_t gid)
{
	DIR *d = fdopendir(dirfd);
	struct dirent *de;
	int ret = 0, err = 0;

	if (!d) {
		close(dirfd);
		return -1;
	}
	while ((de = readdir(d))) {
		struct stat st;
		bool is_dir_fd = true;
		int fd;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		fd = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			is_dir_fd = false;
			fd = openat(dirfd, de->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd < 0 || fstat(fd, &st) < 0) {
			ret = -1;
			err = err ? err : errno;
			if (fd >= 0)
				close(fd);
			continue;
		}
		if (st.st_dev != dev || (!S_ISDIR(st.st_mode) && st.st_nlink > 1)) {
			close(fd);
			continue;
		}
		if ((st.st_uid != uid || st.st_gid != gid) && fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0) {
			ret = -1;
			err = err ? err : errno;
		}
		if (S_ISDIR(st.st_mode) && is_dir_fd) {
			if (chown_below(fd, dev, uid, gid) < 0) {
				ret = -1;
				err = err ? err : errno;
			}
		} else {
			close(fd);
		}
	}
	closedir(d);
	if (ret)
		errno = err;
	return ret;
}

int chown_tree(const char *path, uid_t uid, gid_t gid)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0 || fchown(fd, uid, gid) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		errno = e;
		return -1;
	}
	return chown_below(fd, st.st_dev, uid, gid);
}

uint64_t *dir_ids(const char *dir, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t *ids = NULL, id;
	size_t alloc = 0;

	*n = 0;
	while (d && (de = readdir(d)))
		if (!parse_u64_str(de->d_name, &id)) {
			ALLOC_GROW(ids, *n + 1, alloc);
			ids[(*n)++] = id;
		}
	if (d)
		closedir(d);
	return ids;
}

char *self_sibling(const char *name)
{
	char self[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return NULL;
	self[n] = '\0';
	slash = strrchr(self, '/');
	return xasprintf("%.*s/%s", slash ? (int)(slash - self) : 0, self, name);
}

int exec_sibling(const char *name, char **argv)
{
	char *path = self_sibling(name);

	if (!path) {
		fprintf(stderr, "yard: cannot find this program (/proc/self/exe): %s\n", strerror(errno));
		return 1;
	}
	execv(path, argv);
	fprintf(stderr, "yard: cannot run %s: %s (it is installed beside this program)\n", path, strerror(errno));
	free(path);
	return 1;
}
