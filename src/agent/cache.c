#include "base/compat.h"
#include "agent/cache.h"

#include <dirent.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <time.h>

#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

#define INDEX_NAME "index.json"
#define INDEX_MAX (64u << 20)
#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

/* This boot of the machine (Linux's boot id), or "" when unknown. */
static void boot_id(char out[64])
{
	struct strbuf sb = STRBUF_INIT;

	out[0] = '\0';
	if (strbuf_read_file(&sb, BOOT_ID_PATH, 64) == 0) {
		strbuf_trim(&sb);
		if (sb.len && sb.len < 64)
			memcpy(out, sb.buf, sb.len + 1);
	}
	strbuf_release(&sb);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool cache_key_valid(const char *key)
{
	static const char *const kinds[] = { "yard-", "s3-", "https-", "job-" };
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
		size_t n = strlen(kinds[i]);
		if (!strncmp(key, kinds[i], n))
			return strlen(key + n) == 64 && strspn(key + n, "0123456789abcdef") == 64;
	}
	return false;
}

char *cache_entry_path(const struct cache *c, const char *key)
{
	return xasprintf("%s/%s", c->dir, key);
}

char *cache_partial_path(struct cache *c, const char *key)
{
	uint64_t n = __atomic_add_fetch(&c->partials, 1, __ATOMIC_RELAXED);
	return xasprintf("%s/%s.%" PRIu64 ".partial", c->dir, key, n);
}

/* Walks the tree under the directory fd dfd (closed here), calling fn on
 * every regular file. */
static int walk_fd(int dfd, int (*fn)(int dfd, const char *name, const struct stat *st, void *arg), void *arg)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int ret = 0;

	if (!d) {
		close(dfd);
		return -1;
	}
	while (ret == 0 && (de = readdir(d))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			ret = -1;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			ret = sub < 0 ? -1 : walk_fd(sub, fn, arg);
		} else if (S_ISREG(st.st_mode)) {
			ret = fn(dirfd(d), de->d_name, &st, arg);
		}
	}
	closedir(d);
	return ret;
}

static int walk(const char *path, int (*fn)(int, const char *, const struct stat *, void *), void *arg)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -1 : walk_fd(fd, fn, arg);
}

static int add_size(int dfd, const char *name, const struct stat *st, void *arg)
{
	*(uint64_t *)arg += (uint64_t)st->st_size;
	return 0;
}

static int seal_one(int dfd, const char *name, const struct stat *st, void *arg)
{
	return fchmodat(dfd, name, st->st_mode & 0555, 0);
}

int cache_measure(const char *path, uint64_t *size)
{
	*size = 0;
	return walk(path, add_size, size);
}

int cache_seal(const char *path)
{
	return walk(path, seal_one, NULL);
}

static struct cache_entry *find(struct cache *c, const char *key)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->v[i].key, key))
			return &c->v[i];
	return NULL;
}

static struct cache_entry *add(struct cache *c, const char *key, uint64_t size, int64_t last_use)
{
	ALLOC_GROW(c->v, c->n + 1, c->alloc);
	struct cache_entry *e = &c->v[c->n++];
	memset(e, 0, sizeof(*e));
	e->key = xstrdup(key);
	e->size = size;
	e->last_use = last_use;
	c->used += size;
	return e;
}

static void drop(struct cache *c, struct cache_entry *e)
{
	c->used -= e->size;
	free(e->key);
	*e = c->v[--c->n];
}

/* Saves the index (c->lock held). A failure only costs last-use precision
 * after a restart (the directories are the truth), so it is logged. */
static void save_index(struct cache *c)
{
	json_t *entries = json_object();
	for (size_t i = 0; i < c->n; i++) {
		json_t *e = json_pack("{s:I, s:I}", "size", (json_int_t)c->v[i].size, "last_use",
				      (json_int_t)c->v[i].last_use);
		if (c->v[i].unsynced)
			json_object_set_new(e, "unsynced", json_true());
		json_object_set_new(entries, c->v[i].key, e);
	}
	json_t *doc = json_pack("{s:o, s:s}", "entries", entries, "boot_id", c->boot_id);
	char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	char *path = xasprintf("%s/%s", c->dir, INDEX_NAME);
	if (write_file_atomic(path, text, strlen(text), 0644) < 0)
		fprintf(stderr, "yard agent: cannot write '%s': %s\n", path, strerror(errno));
	free(path);
	free(text);
	json_decref(doc);
}

/* Removes a directory of the cache for good: renamed first, so that an agent
 * killed half way leaves a .trash-* that the next cache_open removes, never
 * a half-removed entry under its key. */
static void remove_dir(struct cache *c, const char *name)
{
	char *from = xasprintf("%s/%s", c->dir, name);
	char *to = xasprintf("%s/.trash-%s", c->dir, name);
	if (rename(from, to) == 0)
		rm_rf(to);
	else
		rm_rf(from);
	free(from);
	free(to);
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

int cache_open(struct cache *c, const char *dir, uint64_t cap, struct errbuf *eb)
{
	struct strbuf sb = STRBUF_INIT;
	json_t *doc = NULL, *entries, *v;
	DIR *d;
	struct dirent *de;

	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->dir = xstrdup(dir);
	c->cap = cap;
	if (mkdir_p(dir, 0755) < 0)
		return error(eb, YERR(IO), "cannot create '%s': %s", dir, strerror(errno));
	char *index = xasprintf("%s/%s", dir, INDEX_NAME);
	if (strbuf_read_file(&sb, index, INDEX_MAX) == 0)
		doc = json_loadb(sb.buf, sb.len, 0, NULL);
	strbuf_release(&sb);
	free(index);
	entries = json_object_get(doc, "entries");
	boot_id(c->boot_id);
	const char *was = json_string_value(json_object_get(doc, "boot_id"));
	bool same_boot = *c->boot_id && was && !strcmp(was, c->boot_id);
	bool any_unsynced = false;

	/* the directories are the truth; the index adds sizes and last uses */
	if (!(d = opendir(dir))) {
		json_decref(doc);
		return error(eb, YERR(IO), "cannot read '%s': %s", dir, strerror(errno));
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (has_suffix(de->d_name, ".partial") || !strncmp(de->d_name, ".trash-", 7)) {
			char *p = xasprintf("%s/%s", dir, de->d_name);
			rm_rf(p);
			free(p);
			continue;
		}
		if (!cache_key_valid(de->d_name))
			continue; /* index.json and strangers */
		v = json_object_get(entries, de->d_name);
		json_t *size = json_object_get(v, "size"), *last = json_object_get(v, "last_use");
		bool unsynced = json_is_true(json_object_get(v, "unsynced"));
		if (unsynced && !same_boot) {
			/* the machine went down before its files were synced */
			fprintf(stderr, "yard agent: the cache entry %s was not yet on the disk when "
				"the machine restarted: removed, to be staged again\n", de->d_name);
			remove_dir(c, de->d_name);
			continue;
		}
		if (json_is_integer(size) && json_is_integer(last)) {
			add(c, de->d_name, (uint64_t)json_integer_value(size), json_integer_value(last));
		} else {
			struct stat st;
			uint64_t n = 0;
			char *p = xasprintf("%s/%s", dir, de->d_name);
			cache_measure(p, &n);
			int64_t mtime = stat(p, &st) == 0 ? (int64_t)st.st_mtime * 1000 : now_ms();
			free(p);
			add(c, de->d_name, n, mtime);
		}
		c->v[c->n - 1].unsynced = unsynced;
		any_unsynced |= unsynced;
	}
	closedir(d);
	json_decref(doc);
	/* an earlier agent of this boot left entries unsynced: their bytes
	 * are in the page cache */
	if (any_unsynced) {
		if (cache_sync(c) == 0)
			return 0; /* the index is saved */
		fprintf(stderr, "yard agent: cannot sync the cache '%s': %s\n", dir, strerror(errno));
	}
	pthread_mutex_lock(&c->lock);
	save_index(c);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int cache_sync(struct cache *c)
{
	char **keys = NULL;
	size_t n = 0, alloc = 0;
	int fd, ret = 0;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].unsynced) {
			ALLOC_GROW(keys, n + 1, alloc);
			keys[n++] = xstrdup(c->v[i].key);
		}
	pthread_mutex_unlock(&c->lock);
	if (!n)
		return 0;
	/* what is committed meanwhile stays unsynced, for the next call */
	fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || syncfs(fd) < 0)
		ret = -1;
	if (fd >= 0) {
		int e = errno;
		close(fd);
		errno = e;
	}
	pthread_mutex_lock(&c->lock);
	for (size_t k = 0; k < n; k++) {
		struct cache_entry *e = ret ? NULL : find(c, keys[k]);
		if (e)
			e->unsynced = false;
		free(keys[k]);
	}
	if (!ret)
		save_index(c);
	pthread_mutex_unlock(&c->lock);
	free(keys);
	return ret;
}

void cache_release(struct cache *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->v[i].key);
	free(c->v);
	free(c->dir);
	pthread_mutex_destroy(&c->lock);
	memset(c, 0, sizeof(*c));
}

int cache_hold(struct cache *c, const char *key)
{
	int ret = 0;
	pthread_mutex_lock(&c->lock);
	struct cache_entry *e = find(c, key);
	if (e) {
		e->holds++;
		e->last_use = now_ms();
		save_index(c);
		ret = 1;
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

void cache_unhold(struct cache *c, const char *key)
{
	pthread_mutex_lock(&c->lock);
	struct cache_entry *e = find(c, key);
	if (e && e->holds > 0) {
		e->holds--;
		e->last_use = now_ms();
		save_index(c);
	}
	pthread_mutex_unlock(&c->lock);
}

int cache_reserve(struct cache *c, uint64_t need, struct errbuf *eb)
{
	int ret = 0;
	pthread_mutex_lock(&c->lock);
	uint64_t evictable = 0, held = 0;
	for (size_t i = 0; i < c->n; i++) {
		if (c->v[i].holds)
			held += c->v[i].size;
		else
			evictable += c->v[i].size;
	}
	uint64_t want = c->used + c->reserved + need;
	if (want > c->cap && want - evictable > c->cap) {
		ret = error(eb, YERR(NO_SPACE),
			    "the node cache (--cache-size %" PRIu64 " bytes) cannot hold %" PRIu64
			    " more bytes: %" PRIu64 " are held by live tasks and %" PRIu64 " by stagings",
			    c->cap, need, held, c->reserved);
		goto out;
	}
	while (c->used + c->reserved + need > c->cap) {
		struct cache_entry *lru = NULL;
		for (size_t i = 0; i < c->n; i++)
			if (!c->v[i].holds && (!lru || c->v[i].last_use < lru->last_use))
				lru = &c->v[i];
		if (!lru)
			break; /* cannot happen: checked above */
		fprintf(stderr, "yard agent: cache: evicting %s (%" PRIu64 " bytes)\n", lru->key, lru->size);
		char *name = xstrdup(lru->key);
		drop(c, lru);
		remove_dir(c, name);
		free(name);
	}
	c->reserved += need;
	save_index(c);
out:
	pthread_mutex_unlock(&c->lock);
	return ret;
}

void cache_unreserve(struct cache *c, uint64_t n)
{
	pthread_mutex_lock(&c->lock);
	c->reserved = n > c->reserved ? 0 : c->reserved - n;
	pthread_mutex_unlock(&c->lock);
}

int cache_commit(struct cache *c, const char *key, const char *partial, uint64_t size, struct errbuf *eb)
{
	int ret = 0;
	char *final = cache_entry_path(c, key);
	pthread_mutex_lock(&c->lock);
	struct cache_entry *e = find(c, key);
	if (e) {
		rm_rf(partial);
	} else if (rename(partial, final) < 0 || fsync_parent_dir(final) < 0) {
		ret = error(eb, yerr_of_errno(errno), "cannot rename '%s': %s",
			    partial, strerror(errno));
		goto out;
	} else {
		e = add(c, key, size, now_ms());
		e->unsynced = true;
	}
	e->holds++;
	e->last_use = now_ms();
	save_index(c);
out:
	pthread_mutex_unlock(&c->lock);
	free(final);
	return ret;
}

json_t *cache_keys(struct cache *c, const char *prefix)
{
	json_t *a = json_array();
	size_t n = strlen(prefix);
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n; i++)
		if (!strncmp(c->v[i].key, prefix, n))
			json_array_append_new(a, json_string(c->v[i].key));
	pthread_mutex_unlock(&c->lock);
	return a;
}
