#include "base/compat.h"
#include "master/logs.h"

#include "base/fsutil.h"
#include "base/xalloc.h"
#include "common/logoffset.h"

char *logs_path(const struct master *m, uint64_t task_id, enum log_stream s)
{
	return xasprintf("%s/logs/%" PRIu64 ".%s", m->data_dir, task_id, log_stream_name(s));
}

uint64_t logs_size(const struct master *m, uint64_t task_id, enum log_stream s)
{
	char *path = logs_path(m, task_id, s);
	struct stat st;
	uint64_t size = 0;

	if (!stat(path, &st))
		size = (uint64_t)st.st_size;
	free(path);
	return size;
}

int logs_stream_parse(const char *s)
{
	if (!s || !strcmp(s, "stdout"))
		return LOG_STDOUT;
	if (!strcmp(s, "stderr"))
		return LOG_STDERR;
	return -1;
}

int logs_append(struct master *m, struct task *t, enum log_stream s, uint64_t offset,
		const void *data, size_t len, uint64_t *have, struct errbuf *eb)
{
	char *path = logs_path(m, t->id, s);
	struct log_chunk_decision d;
	struct stat st;
	int fd, ret = 0;

	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = error(eb, yerr_of_errno(errno), "cannot open '%s': %s",
			    path, strerror(errno));
		goto out;
	}
	if (fstat(fd, &st)) {
		ret = error(eb, YERR(IO), "cannot stat '%s': %s", path, strerror(errno));
		goto out_close;
	}
	*have = (uint64_t)st.st_size;
	d = log_chunk_decide(*have, offset, len);
	if (d.action == LOG_CHUNK_GAP) {
		ret = error(eb, YERR(CONFLICT), "log of task %" PRIu64 " %s: offset %" PRIu64
			    " is past the %" PRIu64 " bytes held", t->id, log_stream_name(s), offset, *have);
		goto out_close;
	}
	if (d.action == LOG_CHUNK_APPEND) {
		if (write_all(fd, (const char *)data + d.skip, len - d.skip) || fdatasync(fd)) {
			int e = errno;
			/* leave the file as it was so a retry appends cleanly */
			if (ftruncate(fd, st.st_size)) {
				/* the size stays the truth; nothing more to do */
			}
			ret = error(eb, yerr_of_errno(e), "cannot write '%s': %s",
				    path, strerror(e));
			goto out_close;
		}
		*have += len - d.skip;
		if (!st.st_size && fsync_parent_dir(path)) {
			ret = error(eb, YERR(IO), "cannot sync the directory of '%s': %s", path,
				    strerror(errno));
			goto out_close;
		}
	}
	t->log_size[s] = *have;
out_close:
	/* the job's document shows the file's size */
	core_job_changed(m, t->job);
	close(fd);
out:
	free(path);
	return ret;
}
