/* Watching a task's checkpoint dir for checkpoints (ckptwatch.h). */
#include "base/compat.h"
#include "agent/ckptwatch.h"

#include <dirent.h>
#include <jansson.h>

#include "agent/taskdir.h"
#include "base/xalloc.h"

struct ckpt_watch {
	char *task_dir;    /* owned: WORK/tasks/ID */
	char *ckpt_dir;    /* owned: its YARD_CHECKPOINT_DIR; NULL until shim.json names it */
	int64_t at;        /* the newest checkpoint found (wall us); 0: none */
	int64_t last_scan; /* wall us of the last walk; 0: none yet */
};

static int64_t stamp_us(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000 + ts->tv_nsec / 1000;
}

/* Names that say a file is still being written, to be renamed when done. */
static bool in_progress_name(const char *name)
{
	static const char *const suffixes[] = {".tmp", ".part"};
	size_t n = strlen(name);

	for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
		size_t k = strlen(suffixes[i]);
		if (n > k && !strcmp(name + n - k, suffixes[i]))
			return true;
	}
	return false;
}

/* Whether the regular file of st, named name, counts as a checkpoint. */
static bool counts(const struct stat *st, const char *name, int64_t floor_us, int64_t now_us)
{
	int64_t m = stamp_us(&st->st_mtim);

	return m > floor_us && stamp_us(&st->st_ctim) > floor_us &&
	       now_us - m >= CKPT_WATCH_SETTLE_US && !in_progress_name(name);
}

/* Walks the dir open as fd (closed here) at depth; the newest counted mtime
 * goes to *best. */
static void walk_dir(int fd, unsigned depth, int64_t floor_us, int64_t now_us,
                     struct ckpt_walk *walk, int64_t *best)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;

	if (!d) {
		close(fd);
		return;
	}
	while (walk->seen < walk->entries && (de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		walk->seen++;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue; /* gone meanwhile */
		if (S_ISREG(st.st_mode)) {
			if (counts(&st, de->d_name, floor_us, now_us) &&
			    stamp_us(&st.st_mtim) > *best)
				*best = stamp_us(&st.st_mtim);
		} else if (S_ISDIR(st.st_mode) && depth < walk->depth) {
			int sub = openat(dirfd(d), de->d_name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				walk_dir(sub, depth + 1, floor_us, now_us, walk, best);
		}
	}
	closedir(d);
}

int64_t ckpt_watch_scan(const char *dir, int64_t floor_us, int64_t now_us, struct ckpt_walk *walk)
{
	int64_t best = 0;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	walk->seen = 0;
	if (fd >= 0)
		walk_dir(fd, 0, floor_us, now_us, walk, &best);
	return best;
}

struct ckpt_watch *ckpt_watch_new(const char *task_dir)
{
	struct ckpt_watch *w = xcalloc(1, sizeof(*w));
	json_t *doc;

	w->task_dir = xstrdup(task_dir);
	if (taskdir_read_json(task_dir, "ckptdir.json", &doc, NULL) == 0) {
		json_t *at = json_object_get(doc, "checkpoint_at");
		if (json_is_integer(at) && json_integer_value(at) > 0)
			w->at = json_integer_value(at);
		json_decref(doc);
	}
	return w;
}

void ckpt_watch_free(struct ckpt_watch *w)
{
	if (!w)
		return;
	free(w->task_dir);
	free(w->ckpt_dir);
	free(w);
}

/* The mtime of path (wall us), or -1 when it has none. */
static int64_t mtime_of(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : stamp_us(&st.st_mtim);
}

/* When the task started or last had a checkpoint restored (wall us); -1
 * while it has not started. Read each walk: a restore may come while the
 * task runs (another task of the job starting from another checkpoint). */
static int64_t floor_of(const struct ckpt_watch *w)
{
	char *pid = xasprintf("%s/task.pid", w->task_dir);
	char *digest = xasprintf("%s.digest", w->ckpt_dir);
	int64_t start = mtime_of(pid), restore = mtime_of(digest);

	free(pid);
	free(digest);
	if (start < 0)
		return -1;
	return restore > start ? restore : start;
}

static void save(const struct ckpt_watch *w)
{
	json_t *doc = json_pack("{s:I}", "checkpoint_at", (json_int_t)w->at);

	/* without fsync, as metrics.json: lost, the next walk finds it again
	 * unless the task removed the file meanwhile */
	taskdir_write_json(w->task_dir, "ckptdir.json", doc, 0, NULL);
	json_decref(doc);
}

int64_t ckpt_watch_poll(struct ckpt_watch *w, int64_t now_us)
{
	struct ckpt_walk walk = {.depth = CKPT_WATCH_DEPTH, .entries = CKPT_WATCH_ENTRIES};
	int64_t floor_us, found;

	if (!w)
		return 0;
	/* a clock set back walks at once rather than after the jump */
	if (w->last_scan && now_us >= w->last_scan && now_us - w->last_scan < CKPT_WATCH_EVERY_US)
		return w->at;
	w->last_scan = now_us;
	if (!w->ckpt_dir) {
		json_t *conf;
		if (taskdir_read_json(w->task_dir, "shim.json", &conf, NULL))
			return w->at;
		const char *dir = json_string_value(json_object_get(conf, "checkpoint_dir"));
		w->ckpt_dir = dir ? xstrdup(dir) : NULL;
		json_decref(conf);
		if (!w->ckpt_dir)
			return w->at;
	}
	floor_us = floor_of(w);
	if (floor_us < 0)
		return w->at;
	found = ckpt_watch_scan(w->ckpt_dir, floor_us, now_us, &walk);
	if (found > w->at) {
		w->at = found;
		save(w);
	}
	return w->at;
}
