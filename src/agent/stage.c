#include "base/compat.h"
#include "agent/stage.h"

#include <ctype.h>
#include <nettle/nettle-meta.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include "agent/xmllib.h"
#include "base/clock.h"
#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/curllib.h"
#include "common/dataset.h"
#include "common/httpc.h"

#define CHUNK_MAX (8u << 20)
#define CHUNK_TRIES 3
#define PROGRESS_MS 250
#define LIST_MAX (16u << 20)
/* Files (yard) or objects (s3) fetched at once: one request at a time leaves
 * a loopback link mostly idle between many small files. */
#define STAGE_WORKERS 8

/* One staging run: the config, the progress, the current entry. The
 * counters are shared by the workers of an entry (lock). */
struct run {
	const struct stage_config *cfg;
	struct stage_result *out;
	pthread_mutex_t lock;
	uint64_t staged, total;
	uint64_t last_report;    /* mono ms */
	bool failed;             /* a worker failed: the others stop */
	struct errbuf *eb;
};

/* Reports progress; the caller holds r->lock (or is the only thread). */
static void progress_locked(struct run *r, bool force)
{
	uint64_t now = mono_ms();
	if (!r->cfg->progress || (!force && now - r->last_report < PROGRESS_MS))
		return;
	r->last_report = now;
	r->cfg->progress(r->cfg->progress_arg, r->staged, r->total > r->staged ? r->total : r->staged);
}

static void progress(struct run *r, bool force)
{
	pthread_mutex_lock(&r->lock);
	progress_locked(r, force);
	pthread_mutex_unlock(&r->lock);
}

/* Counts bytes that arrived (transferred) and that are in place (staged). */
static void account(struct run *r, uint64_t transferred, uint64_t staged)
{
	pthread_mutex_lock(&r->lock);
	r->out->transferred += transferred;
	r->staged += staged;
	progress_locked(r, false);
	pthread_mutex_unlock(&r->lock);
}

static bool cancelled(struct run *r)
{
	return (r->cfg->cancel && *r->cfg->cancel) || __atomic_load_n(&r->failed, __ATOMIC_RELAXED);
}

/* ---- a pool of workers over the items of one entry ---- */

struct pool {
	struct run *r;
	size_t n, next;          /* items, the next one to take (under r->lock) */
	int (*fn)(void *ctx, size_t i, struct errbuf *eb);
	void *(*ctx_new)(void *arg);
	void (*ctx_free)(void *ctx);
	void *arg;
	int ret;                 /* the first failure */
	struct errbuf eb;        /* and why */
};

static void *pool_worker(void *arg)
{
	struct pool *p = arg;
	void *ctx = p->ctx_new(p->arg);
	for (;;) {
		struct errbuf eb = ERRBUF_INIT;
		size_t i;
		pthread_mutex_lock(&p->r->lock);
		i = p->next < p->n && !p->ret ? p->next++ : p->n;
		pthread_mutex_unlock(&p->r->lock);
		if (i >= p->n)
			break;
		int ret = cancelled(p->r) ? error(&eb, YERR(UNAVAILABLE), "stopped") : p->fn(ctx, i, &eb);
		if (ret) {
			pthread_mutex_lock(&p->r->lock);
			/* the first real failure, not a worker stopped because of it */
			if (!p->ret) {
				p->ret = ret;
				p->eb = eb;
			}
			pthread_mutex_unlock(&p->r->lock);
			__atomic_store_n(&p->r->failed, true, __ATOMIC_RELAXED);
			break;
		}
	}
	p->ctx_free(ctx);
	return NULL;
}

/* Runs fn over items 0..n-1 on up to STAGE_WORKERS threads, each with its
 * own context (a connection); the first failure stops the rest. */
static int pool_run(struct pool *p, struct errbuf *eb)
{
	pthread_t th[STAGE_WORKERS];
	size_t nth = p->n < STAGE_WORKERS ? p->n : STAGE_WORKERS, started = 0;
	p->next = 0;
	p->ret = 0;
	for (; started < nth; started++)
		if (pthread_create(&th[started], NULL, pool_worker, p) != 0)
			break;
	if (!started && p->n) /* no thread at all: do it here */
		pool_worker(p);
	for (size_t k = 0; k < started; k++)
		pthread_join(th[k], NULL);
	__atomic_store_n(&p->r->failed, false, __ATOMIC_RELAXED);
	if (p->ret)
		*eb = p->eb;
	return p->ret;
}

static int io_error(struct errbuf *eb, const char *what, const char *path)
{
	int e = errno;
	return error(eb, yerr_of_errno(e), "cannot %s '%s': %s",
		     what, path, e == ENOSPC ? "disk full (ENOSPC)" : strerror(e));
}

/* A mount: what dataset_path_valid allows, in 1..8 components of [A-Za-z0-9._-]. */
static bool mount_valid(const char *m)
{
	size_t parts = 1;
	if (!dataset_path_valid(m))
		return false;
	for (const char *p = m; *p; p++) {
		if (*p == '/')
			parts++;
		else if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-", *p))
			return false;
	}
	return parts <= 8;
}

static bool is_hex64(const char *s)
{
	return s && strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

/* Makes every directory above rel inside root. */
static int mkdirs_for(const char *root, const char *rel, struct errbuf *eb)
{
	const char *slash = strrchr(rel, '/');
	if (!slash)
		return 0;
	char *dir = xasprintf("%s/%.*s", root, (int)(slash - rel), rel);
	int ret = mkdir_p(dir, 0755) < 0 ? io_error(eb, "create", dir) : 0;
	free(dir);
	return ret;
}

/* ---- libcurl downloads to a file (s3 objects, https) ---- */

struct sink {
	struct run *r;
	int fd;
	const char *path;
	uint64_t got;
	const struct nettle_hash *md; /* hash of the bytes (sink_hash), NULL: none */
	void *md_ctx;            /* owned: its state */
	int err;                 /* errno of a failed write */
	struct strbuf *mem;      /* instead of fd: into memory (listings) */
};

static size_t sink_write(char *data, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t len = size * n;
	if (s->mem) {
		if (strbuf_add_capped(s->mem, data, len, LIST_MAX) < 0)
			return 0;
		return len;
	}
	if (write_all(s->fd, data, len) < 0) {
		s->err = errno;
		return 0;
	}
	if (s->md)
		s->md->update(s->md_ctx, len, (const uint8_t *)data);
	s->got += len;
	account(s->r, len, len);
	return len;
}

/* s hashes what it writes with alg (nettle_md5, nettle_sha256). */
static void sink_hash(struct sink *s, const struct nettle_hash *alg)
{
	s->md = alg;
	s->md_ctx = xmalloc(alg->context_size);
	alg->init(s->md_ctx);
}

/* The hash of what s wrote, in lowercase hex (2 * digest_size + 1 bytes);
 * the hash is released. */
static void sink_hash_hex(struct sink *s, char *hex)
{
	uint8_t md[SHA256_DIGEST_SIZE]; /* the largest of the two */

	s->md->digest(s->md_ctx, s->md->digest_size, md);
	hex_encode(md, s->md->digest_size, hex);
	free(s->md_ctx);
	s->md_ctx = NULL;
	s->md = NULL;
}

static int sink_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct sink *s = arg;
	return cancelled(s->r) ? 1 : 0;
}

/* GET url into s, signed for S3 when sign; *status gets the HTTP status.
 * With a handle (reuse, borrowed) its connection is kept for the next GET. */
static int curl_get_on(struct run *r, CURL *reuse, const char *url, bool sign, struct sink *s,
		       long *status, struct errbuf *eb)
{
	const struct stage_config *cfg = r->cfg;
	CURL *c = reuse ? reuse : curllib.easy_init();
	char errmsg[CURL_ERROR_SIZE] = "";
	char *sigv4 = NULL, *userpwd = NULL;
	struct curl_slist *hdrs = NULL;
	int ret = 0;

	if (!c)
		return error(eb, YERR(INTERNAL), "cannot start libcurl");
	if (reuse)
		curllib.easy_reset(c);
	curllib.easy_setopt(c, CURLOPT_URL, url);
	httpc_cloexec(c);
	curllib.easy_setopt(c, CURLOPT_WRITEFUNCTION, sink_write);
	curllib.easy_setopt(c, CURLOPT_WRITEDATA, s);
	curllib.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, sink_progress);
	curllib.easy_setopt(c, CURLOPT_XFERINFODATA, s);
	curllib.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curllib.easy_setopt(c, CURLOPT_ERRORBUFFER, errmsg);
	curllib.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curllib.easy_setopt(c, CURLOPT_FOLLOWLOCATION, sign ? 0L : 1L);
	curllib.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	/* a transfer that stalls for a minute is a dead store */
	curllib.easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curllib.easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
	curllib.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (sign) {
		sigv4 = xasprintf("aws:amz:%s:s3", cfg->s3_region ? cfg->s3_region : "us-east-1");
		userpwd = xasprintf("%s:%s", cfg->s3_key ? cfg->s3_key : "", cfg->s3_secret ? cfg->s3_secret : "");
		curllib.easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
		curllib.easy_setopt(c, CURLOPT_USERPWD, userpwd);
		/* S3 wants the payload's hash, which libcurl (before 8.x) does not
		 * add; a GET's payload is empty */
		hdrs = curllib.slist_append(hdrs, "x-amz-content-sha256: "
					 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
		curllib.easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	}
	CURLcode cc = curllib.easy_perform(c);
	curllib.easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	if (cc == CURLE_ABORTED_BY_CALLBACK)
		ret = error(eb, YERR(UNAVAILABLE), "stopped");
	else if (cc == CURLE_WRITE_ERROR && s->err)
		ret = (errno = s->err, io_error(eb, "write", s->path ? s->path : "(memory)"));
	else if (cc != CURLE_OK)
		ret = error(eb, YERR(UNAVAILABLE), "cannot reach '%s': %s", url,
			    *errmsg ? errmsg : curllib.easy_strerror(cc));
	if (!reuse)
		curllib.easy_cleanup(c);
	curllib.slist_free_all(hdrs);
	free(sigv4);
	free(userpwd);
	return ret;
}

static int curl_get(struct run *r, const char *url, bool sign, struct sink *s, long *status,
		    struct errbuf *eb)
{
	return curl_get_on(r, NULL, url, sign, s, status, eb);
}

/* ---- yard: the master's manifests and chunks ---- */

/* res: initialised (httpc_response_init), and released by the caller */
static int yard_get(struct httpc *h, const char *path, struct httpc_response *res, struct errbuf *eb)
{
	int ret = httpc_request(h, "GET", path, NULL, 0, NULL, res, eb);
	if (!ret && res->status != 200) {
		struct errbuf why = ERRBUF_INIT;
		httpc_error_from_reply(res, &why);
		ret = error(eb, res->status == 404 ? YERR(NOT_FOUND) : YERR(UNAVAILABLE),
			    "GET %s: HTTP %ld%s%s", path, res->status, *why.msg ? ": " : "", why.msg);
	}
	return ret;
}

/* Fetches one chunk into fd, verified; CHUNK_TRIES tries on a mismatch or a
 * transport failure. At offset off (want: its length, which it must have)
 * when off >= 0, else at fd's position (any length). path: fd's file, rel:
 * its path in the manifest. res: the connection's response, its buffer
 * used for chunk after chunk. */
static int yard_chunk(struct run *r, struct httpc *h, struct httpc_response *res,
		      const char *digest, int fd, const char *path, const char *rel, int64_t off,
		      uint64_t want, uint64_t *written, struct errbuf *eb)
{
	const char *hex = !strncmp(digest, "sha256:", 7) ? digest + 7 : "";
	char got[SHA256_HEX_LEN + 1];
	int ret = 0;

	if (!is_hex64(hex))
		return error(eb, YERR(BAD_REQUEST), "bad chunk digest '%s'", digest);
	char *url = xasprintf("/v1/blobs/%s", digest);
	for (int attempt = 1;; attempt++) {
		if (cancelled(r)) {
			ret = error(eb, YERR(UNAVAILABLE), "stopped");
			break;
		}
		ret = yard_get(h, url, res, eb);
		if (!ret && res->body.len > CHUNK_MAX)
			ret = error(eb, YERR(IO), "chunk '%s' is larger than 8 MiB", digest);
		if (!ret) {
			sha256_hex(res->body.buf, res->body.len, got);
			if (strcmp(got, hex))
				ret = error(eb, YERR(IO), "checksum mismatch: chunk '%s' arrived as 'sha256:%s'", digest, got);
		}
		if (!ret && off >= 0 && res->body.len != want) {
			/* the digest matched: the manifest cut its file otherwise */
			ret = error(eb, YERR(BAD_REQUEST), "chunk '%s' of '%s' has %zu bytes where the manifest's "
				    "sizes put %" PRIu64, digest, rel, res->body.len, want);
			break;
		}
		if (!ret) {
			if ((off >= 0 ? pwrite_all(fd, res->body.buf, res->body.len, off)
				      : write_all(fd, res->body.buf, res->body.len)) < 0) {
				account(r, res->body.len, 0);
				ret = io_error(eb, "write", path);
			} else {
				*written += res->body.len;
				account(r, res->body.len, res->body.len);
			}
			break;
		}
		if (ret == YERR(NOT_FOUND) || attempt >= CHUNK_TRIES) {
			if (attempt > 1) {
				char *why = xstrdup(eb->msg);
				error(eb, ret, "%s (after %d tries)", why, attempt);
				free(why);
			}
			break;
		}
	}
	free(url);
	return ret;
}

/* A manifest's files, staged by a pool over their chunks: each worker has
 * its own connection to the master, and a large file comes in parallel. A
 * file whose chunks are all DATASET_CHUNK_MAX but its last (what yard data
 * push and every agent cut) is fetched chunk by chunk, each written at its
 * offset; one cut otherwise (a manifest may cut anyhow) is one item,
 * fetched in order. */
struct yard_item {
	size_t file;            /* index in files */
	long chunk;             /* its chunk, or -1: the whole file */
};

struct yard_files {
	struct run *r;
	const char *root;
	json_t *files;
	struct yard_item *items;
	size_t nitems, aitems;
};

struct yard_conn {
	struct yard_files *yf;
	struct httpc h;
	struct httpc_response res; /* its buffer holds chunk after chunk */
};

static void *yard_conn_new(void *arg)
{
	struct yard_files *yf = arg;
	struct yard_conn *c = xcalloc(1, sizeof(*c));
	c->yf = yf;
	httpc_init_bulk(&c->h, yf->r->cfg->master_url, &yf->r->cfg->tls, yf->r->cfg->token);
	c->h.timeout_ms = 120000;
	httpc_response_init(&c->res);
	return c;
}

static void yard_conn_free(void *ctx)
{
	struct yard_conn *c = ctx;
	httpc_response_release(&c->res);
	httpc_release(&c->h);
	free(c);
}

/* Checks file f of the manifest, creates it (empty) under root and adds
 * its items. */
static int yard_file_plan(struct yard_files *yf, size_t i, struct errbuf *eb)
{
	const json_t *f = json_array_get(yf->files, i);
	const char *rel = json_string_value(json_object_get(f, "path"));
	json_t *size = json_object_get(f, "size"), *mode = json_object_get(f, "mode");
	json_t *chunks = json_object_get(f, "chunks"), *c;
	uint64_t sz, least;
	size_t k;
	int ret;

	if (!rel || !dataset_path_valid(rel))
		return error(eb, YERR(BAD_REQUEST), "the manifest names a refused path '%s'", rel ? rel : "(none)");
	if (!json_is_integer(size) || json_integer_value(size) < 0 || !json_is_integer(mode) ||
	    json_integer_value(mode) < 0 || json_integer_value(mode) > 0777 || !json_is_array(chunks))
		return error(eb, YERR(BAD_REQUEST), "the manifest's entry for '%s' is malformed", rel);
	json_array_foreach(chunks, k, c)
		if (!json_is_string(c))
			return error(eb, YERR(BAD_REQUEST), "the manifest's chunks of '%s' are malformed", rel);
	if ((ret = mkdirs_for(yf->root, rel, eb)))
		return ret;
	char *path = xasprintf("%s/%s", yf->root, rel);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	ret = fd < 0 ? io_error(eb, "create", path) : 0;
	if (fd >= 0)
		close(fd);
	free(path);
	if (ret)
		return ret;
	sz = (uint64_t)json_integer_value(size);
	least = (sz + DATASET_CHUNK_MAX - 1) / DATASET_CHUNK_MAX;
	if (json_array_size(chunks) == least) {
		for (k = 0; k < least; k++) {
			ALLOC_GROW(yf->items, yf->nitems + 1, yf->aitems);
			yf->items[yf->nitems++] = (struct yard_item){ i, (long)k };
		}
	} else {
		ALLOC_GROW(yf->items, yf->nitems + 1, yf->aitems);
		yf->items[yf->nitems++] = (struct yard_item){ i, -1 };
	}
	return 0;
}

static int yard_item(void *ctx, size_t n, struct errbuf *eb)
{
	struct yard_conn *c = ctx;
	const struct yard_item *it = &c->yf->items[n];
	const json_t *f = json_array_get(c->yf->files, it->file), *chunks = json_object_get(f, "chunks"), *ch;
	const char *rel = json_string_value(json_object_get(f, "path"));
	uint64_t size = (uint64_t)json_integer_value(json_object_get(f, "size")), written = 0;
	char *path = xasprintf("%s/%s", c->yf->root, rel);
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	size_t k;
	int ret = 0;

	if (fd < 0) {
		ret = io_error(eb, "open", path);
	} else if (it->chunk >= 0) {
		uint64_t off = (uint64_t)it->chunk * DATASET_CHUNK_MAX;
		uint64_t want = size - off < DATASET_CHUNK_MAX ? size - off : DATASET_CHUNK_MAX;
		ret = yard_chunk(c->yf->r, &c->h, &c->res, json_string_value(json_array_get(chunks, (size_t)it->chunk)), fd,
				 path, rel, (int64_t)off, want, &written, eb);
	} else {
		json_array_foreach(chunks, k, ch)
			if ((ret = yard_chunk(c->yf->r, &c->h, &c->res, json_string_value(ch), fd, path, rel, -1, 0, &written,
					      eb)))
				break;
		if (!ret && written != size)
			ret = error(eb, YERR(IO), "'%s' has %" PRIu64 " bytes, the manifest says %" PRIu64, rel,
				    written, size);
	}
	if (fd >= 0)
		close(fd);
	free(path);
	return ret;
}

/* Every file of the manifest is whole: the manifest's permission bits,
 * less every write bit (entries are shared). */
static int yard_files_finish(struct yard_files *yf, struct errbuf *eb)
{
	const json_t *f;
	size_t i;
	int ret = 0;

	json_array_foreach(yf->files, i, f) {
		char *path = xasprintf("%s/%s", yf->root, json_string_value(json_object_get(f, "path")));
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 || fchmod(fd, (mode_t)json_integer_value(json_object_get(f, "mode")) & 0555) < 0)
			ret = io_error(eb, "chmod", path);
		if (fd >= 0)
			close(fd);
		free(path);
		if (ret)
			break;
	}
	return ret;
}

/* Stages the files of manifest under root. */
static int yard_files_stage(struct run *r, const char *root, json_t *files, struct errbuf *eb)
{
	struct yard_files yf = { .r = r, .root = root, .files = files };
	struct pool pool = { .r = r, .fn = yard_item, .ctx_new = yard_conn_new, .ctx_free = yard_conn_free,
			     .arg = &yf };
	int ret = 0;

	for (size_t i = 0; i < json_array_size(files) && !ret; i++)
		ret = yard_file_plan(&yf, i, eb);
	pool.n = yf.nitems;
	if (!ret)
		ret = pool_run(&pool, eb);
	if (!ret)
		ret = yard_files_finish(&yf, eb);
	free(yf.items);
	return ret;
}

static int stage_yard(struct run *r, const json_t *d, char **key_out, struct errbuf *eb)
{
	const struct stage_config *cfg = r->cfg;
	const char *digest = json_string_value(json_object_get(d, "digest"));
	const char *hex = digest && !strncmp(digest, "sha256:", 7) ? digest + 7 : NULL;
	json_int_t size = json_integer_value(json_object_get(d, "size"));
	struct httpc h;
	struct httpc_response res;
	json_t *manifest = NULL;
	char got[SHA256_HEX_LEN + 1];
	char *partial = NULL;
	int ret;

	if (!is_hex64(hex))
		return error(eb, YERR(BAD_REQUEST), "bad manifest digest '%s'", digest ? digest : "(none)");
	char *key = xasprintf("yard-%s", hex);
	if (size > 0)
		r->total += (uint64_t)size;
	if (cache_hold(cfg->cache, key)) {
		account(r, 0, size > 0 ? (uint64_t)size : 0);
		*key_out = key;
		return 0;
	}
	if ((ret = cache_reserve(cfg->cache, size > 0 ? (uint64_t)size : 0, eb))) {
		free(key);
		return ret;
	}
	httpc_init(&h, cfg->master_url, &cfg->tls, cfg->token);
	h.timeout_ms = 120000;
	char *url = xasprintf("/v1/manifests/%s", digest);
	httpc_response_init(&res);
	ret = yard_get(&h, url, &res, eb);
	free(url);
	if (!ret) {
		json_error_t je;
		manifest = json_loadb(res.body.buf, res.body.len, 0, &je);
		if (!manifest)
			ret = error(eb, YERR(BAD_REQUEST), "the manifest is not JSON: %s", je.text);
	}
	httpc_response_release(&res);
	if (ret)
		goto out;
	char *text = json_dumps(manifest, JSON_COMPACT | JSON_SORT_KEYS);
	sha256_hex(text, strlen(text), got);
	account(r, strlen(text), 0);
	free(text);
	if (strcmp(got, hex)) {
		ret = error(eb, YERR(IO), "checksum mismatch: the manifest arrived as 'sha256:%s'", got);
		goto out;
	}
	partial = cache_partial_path(cfg->cache, key);
	rm_rf(partial);
	if (mkdir_p(partial, 0755) < 0) {
		ret = io_error(eb, "create", partial);
		goto out;
	}
	if (!json_is_array(json_object_get(manifest, "files"))) {
		ret = error(eb, YERR(BAD_REQUEST), "the manifest lacks 'files'");
		goto out;
	}
	if ((ret = yard_files_stage(r, partial, json_object_get(manifest, "files"), eb)))
		goto out;
	uint64_t have = 0;
	cache_measure(partial, &have);
	ret = cache_commit(cfg->cache, key, partial, have, eb); /* synced after (cache_sync) */
out:
	httpc_release(&h);
	cache_unreserve(cfg->cache, size > 0 ? (uint64_t)size : 0);
	if (ret && partial)
		rm_rf(partial);
	free(partial);
	json_decref(manifest);
	if (ret)
		free(key);
	else
		*key_out = key;
	return ret;
}

/* ---- s3: ListObjectsV2 and GETs, path-style, SigV4 by libcurl ---- */

struct s3_object {
	char *key, *etag;
	uint64_t size;
};

struct s3_listing {
	struct s3_object *v;
	size_t n, alloc;
	uint64_t size;
};

static void s3_listing_release(struct s3_listing *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].key);
		free(l->v[i].etag);
	}
	free(l->v);
}

static const char *node_name(xmlNode *n)
{
	return (const char *)n->name;
}

static char *node_text(const struct xmllib *xl, xmlNode *n)
{
	xmlChar *t = xl->xmlNodeGetContent(n);
	char *s = xstrdup(t ? (const char *)t : "");
	(*xl->xmlFree)(t);
	return s;
}

/* Parses one page of a ListObjectsV2 reply: appends its objects, and sets
 * *next to the continuation token when the listing is truncated. */
static int s3_parse_page(const struct strbuf *body, struct s3_listing *l, char **next, struct errbuf *eb)
{
	const struct xmllib *xl = xmllib_load(eb);
	xmlDoc *doc = NULL;
	xmlNode *root = NULL;
	bool truncated = false;
	int ret = 0;

	*next = NULL;
	if (!xl)
		return YERR(INTERNAL);
	doc = xl->xmlReadMemory(body->buf, (int)body->len, "list.xml", NULL,
				XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	root = doc ? xl->xmlDocGetRootElement(doc) : NULL;
	if (!root || strcmp(node_name(root), "ListBucketResult")) {
		ret = error(eb, YERR(BAD_REQUEST), "the store's listing is not a ListBucketResult");
		goto out;
	}
	for (xmlNode *n = root->children; n; n = n->next) {
		if (n->type != XML_ELEMENT_NODE)
			continue;
		if (!strcmp(node_name(n), "IsTruncated")) {
			char *t = node_text(xl, n);
			truncated = !strcmp(t, "true");
			free(t);
		} else if (!strcmp(node_name(n), "NextContinuationToken")) {
			free(*next);
			*next = node_text(xl, n);
		} else if (!strcmp(node_name(n), "Contents")) {
			struct s3_object o = { NULL, NULL, 0 };
			char *size = NULL;
			for (xmlNode *k = n->children; k; k = k->next) {
				if (k->type != XML_ELEMENT_NODE)
					continue;
				if (!strcmp(node_name(k), "Key") && !o.key)
					o.key = node_text(xl, k);
				else if (!strcmp(node_name(k), "ETag") && !o.etag)
					o.etag = node_text(xl, k);
				else if (!strcmp(node_name(k), "Size") && !size)
					size = node_text(xl, k);
			}
			if (!o.key || !size || parse_u64_str(size, &o.size) < 0) {
				free(o.key);
				free(o.etag);
				free(size);
				ret = error(eb, YERR(BAD_REQUEST), "the store's listing has an object without a key or size");
				goto out;
			}
			free(size);
			if (!o.etag)
				o.etag = xstrdup("");
			ALLOC_GROW(l->v, l->n + 1, l->alloc);
			l->v[l->n++] = o;
			l->size += o.size;
		}
	}
	if (!truncated) {
		free(*next);
		*next = NULL;
	} else if (!*next) {
		ret = error(eb, YERR(BAD_REQUEST), "the store's listing is truncated without a continuation token");
	}
out:
	if (doc)
		xl->xmlFreeDoc(doc);
	return ret;
}

static char *s3_escape(const char *s)
{
	char *e = curllib.easy_escape(NULL, s, 0);
	char *r = xstrdup(e ? e : "");
	curllib.free(e);
	return r;
}

/* An object key escaped for a URL path: every byte but unreserved ones and '/'. */
static char *key_escape(const char *key)
{
	struct strbuf sb = STRBUF_INIT;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
		if (isalnum(*p) || strchr("-._~/", *p))
			strbuf_addch(&sb, *p);
		else
			strbuf_addf(&sb, "%%%02X", *p);
	}
	return strbuf_detach(&sb, NULL);
}

static int s3_list(struct run *r, const char *bucket, const char *prefix, struct s3_listing *l,
		   struct errbuf *eb)
{
	char *token = NULL;
	int ret = 0;
	const char *ep = r->cfg->s3_endpoint;
	size_t eplen = strlen(ep);
	while (eplen && ep[eplen - 1] == '/')
		eplen--;
	for (int page = 0;; page++) {
		struct strbuf body = STRBUF_INIT;
		struct sink s = { .r = r, .fd = -1, .mem = &body };
		char *p = s3_escape(prefix);
		char *t = token ? s3_escape(token) : NULL;
		char *url = t ? xasprintf("%.*s/%s?continuation-token=%s&list-type=2&prefix=%s", (int)eplen, ep,
					  bucket, t, p)
			      : xasprintf("%.*s/%s?list-type=2&prefix=%s", (int)eplen, ep, bucket, p);
		long status = 0;
		free(p);
		free(t);
		ret = curl_get(r, url, true, &s, &status, eb);
		if (!ret && status != 200) {
			ret = error(eb, status == 404 ? YERR(NOT_FOUND) : status == 403 ? YERR(FORBIDDEN) : YERR(UNAVAILABLE),
				    "listing '%s' answered HTTP %ld%s%.200s", url, status, body.len ? ": " : "", body.buf);
		}
		free(url);
		free(token);
		token = NULL;
		if (!ret)
			ret = s3_parse_page(&body, l, &token, eb);
		strbuf_release(&body);
		if (ret || !token)
			break;
		if (page > 100000) {
			ret = error(eb, YERR(BAD_REQUEST), "the store's listing never ends");
			break;
		}
	}
	free(token);
	return ret;
}

static int s3_object(struct run *r, CURL *conn, const char *bucket, const char *root, const char *rel,
		     const struct s3_object *o, struct errbuf *eb)
{
	const char *ep = r->cfg->s3_endpoint;
	size_t eplen = strlen(ep);
	int ret;
	long status = 0;
	while (eplen && ep[eplen - 1] == '/')
		eplen--;
	if ((ret = mkdirs_for(root, rel, eb)))
		return ret;
	char *path = xasprintf("%s/%s", root, rel);
	char *k = key_escape(o->key);
	char *url = xasprintf("%.*s/%s/%s", (int)eplen, ep, bucket, k);
	free(k);
	struct sink s = { .r = r, .path = path };
	s.fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s.fd < 0) {
		ret = io_error(eb, "create", path);
		goto out;
	}
	sink_hash(&s, &nettle_md5);
	ret = curl_get_on(r, conn, url, true, &s, &status, eb);
	if (!ret && status != 200)
		ret = error(eb, YERR(UNAVAILABLE), "GET '%s' answered HTTP %ld", o->key, status);
	if (!ret && s.got != o->size)
		ret = error(eb, YERR(IO), "object '%s' arrived with %" PRIu64 " bytes, the listing says %" PRIu64,
			    o->key, s.got, o->size);
	/* a plain ETag is the object's MD5; a multipart one ("...-N") is not */
	char etag[64];
	snprintf(etag, sizeof(etag), "%s", o->etag[0] == '"' ? o->etag + 1 : o->etag);
	if (strlen(etag) && etag[strlen(etag) - 1] == '"')
		etag[strlen(etag) - 1] = '\0';
	if (!ret && strlen(etag) == 32 && strspn(etag, "0123456789abcdefABCDEF") == 32) {
		char hex[33];
		sink_hash_hex(&s, hex);
		if (strcasecmp(hex, etag))
			ret = error(eb, YERR(IO), "checksum mismatch: object '%s' has MD5 %s, its ETag says %s",
				    o->key, hex, etag);
	}
	if (!ret && fchmod(s.fd, 0444) < 0)
		ret = io_error(eb, "chmod", path);
	close(s.fd);
	free(s.md_ctx);
out:
	free(url);
	free(path);
	return ret;
}

/* The objects of a listing, staged by a pool: each worker keeps one
 * connection to the store. */
struct s3_objects {
	struct run *r;
	const char *bucket, *root;
	size_t prefix_len;
	const struct s3_listing *l;
};

struct s3_conn {
	struct s3_objects *so;
	CURL *c;
};

static void *s3_conn_new(void *arg)
{
	struct s3_conn *c = xcalloc(1, sizeof(*c));
	c->so = arg;
	c->c = curllib.easy_init();
	return c;
}

static void s3_conn_free(void *ctx)
{
	struct s3_conn *c = ctx;
	if (c->c)
		curllib.easy_cleanup(c->c);
	free(c);
}

static int s3_object_item(void *ctx, size_t i, struct errbuf *eb)
{
	struct s3_conn *c = ctx;
	const struct s3_object *o = &c->so->l->v[i];
	if (!c->c)
		return error(eb, YERR(INTERNAL), "cannot start libcurl");
	return s3_object(c->so->r, c->c, c->so->bucket, c->so->root, o->key + c->so->prefix_len, o, eb);
}

static int stage_s3(struct run *r, const char *source, char **key_out, struct errbuf *eb)
{
	const struct stage_config *cfg = r->cfg;
	struct s3_listing l = { NULL, 0, 0, 0 };
	char *partial = NULL, *key = NULL, *prefix;
	char hex[SHA256_HEX_LEN + 1];
	bool reserved = false;
	int ret = 0;

	if (!cfg->s3_endpoint)
		return error(eb, YERR(BAD_REQUEST), "this agent has no S3 store (--s3-endpoint)");
	const char *b = source + 5, *slash = strchr(b, '/');
	char *bucket = slash ? xstrndup(b, (size_t)(slash - b)) : xstrdup(b);
	/* the prefix is a directory: s3://b/p stages the objects under "p/" */
	const char *p = slash ? slash + 1 : "";
	size_t plen = strlen(p);
	while (plen && p[plen - 1] == '/')
		plen--;
	prefix = plen ? xasprintf("%.*s/", (int)plen, p) : xstrdup("");
	if (!*bucket || strspn(bucket, "abcdefghijklmnopqrstuvwxyz0123456789.-") != strlen(bucket)) {
		ret = error(eb, YERR(BAD_REQUEST), "bad bucket '%s'", bucket);
		goto out;
	}
	if ((ret = s3_list(r, bucket, prefix, &l, eb)))
		goto out;
	/* the content key: every object's key, size and ETag, in order */
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < l.n; i++) {
		const char *rel = l.v[i].key + (strncmp(l.v[i].key, prefix, strlen(prefix)) ? 0 : strlen(prefix));
		if (strncmp(l.v[i].key, prefix, strlen(prefix)) || !dataset_path_valid(rel)) {
			ret = error(eb, YERR(BAD_REQUEST), "object key '%s' would escape the entry", l.v[i].key);
			strbuf_release(&sb);
			goto out;
		}
		strbuf_addf(&sb, "%s\n%" PRIu64 "\n%s\n", l.v[i].key, l.v[i].size, l.v[i].etag);
	}
	sha256_hex(sb.buf, sb.len, hex);
	strbuf_release(&sb);
	key = xasprintf("s3-%s", hex);
	r->total += l.size;
	if (cache_hold(cfg->cache, key)) {
		account(r, 0, l.size);
		goto out;
	}
	if ((ret = cache_reserve(cfg->cache, l.size, eb)))
		goto out;
	reserved = true;
	progress(r, true);
	partial = cache_partial_path(cfg->cache, key);
	rm_rf(partial);
	if (mkdir_p(partial, 0755) < 0) {
		ret = io_error(eb, "create", partial);
		goto out;
	}
	struct s3_objects so = { .r = r, .bucket = bucket, .root = partial, .prefix_len = strlen(prefix),
				 .l = &l };
	struct pool pool = { .r = r, .n = l.n, .fn = s3_object_item, .ctx_new = s3_conn_new,
			     .ctx_free = s3_conn_free, .arg = &so };
	ret = pool_run(&pool, eb);
	if (!ret)
		ret = cache_commit(cfg->cache, key, partial, l.size, eb);
out:
	if (reserved)
		cache_unreserve(cfg->cache, l.size);
	if (ret && partial)
		rm_rf(partial);
	free(partial);
	free(prefix);
	free(bucket);
	s3_listing_release(&l);
	if (ret)
		free(key);
	else
		*key_out = key;
	return ret;
}

/* ---- https/http: one file, its sha256 given ---- */

static int stage_https(struct run *r, const json_t *d, const char *source, char **key_out, struct errbuf *eb)
{
	const struct stage_config *cfg = r->cfg;
	const char *sum = json_string_value(json_object_get(d, "sha256"));
	char got[SHA256_HEX_LEN + 1];
	long status = 0;
	int ret = 0;

	if (!is_hex64(sum))
		return error(eb, YERR(BAD_REQUEST), "'sha256' must be 64 lowercase hex digits");
	char *key = xasprintf("https-%s", sum);
	if (cache_hold(cfg->cache, key)) {
		*key_out = key;
		return 0;
	}
	/* the file keeps the URL's last path component as its name */
	const char *path = strchr(source + strlen("https://") - (source[4] == ':'), '/');
	size_t n = path ? strcspn(path, "?#") : 0;
	const char *last = path ? path : "";
	for (size_t i = 0; i < n; i++)
		if (path[i] == '/')
			last = path + i + 1;
	char *name = xstrndup(last, path ? (size_t)(path + n - last) : 0);
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
		free(name);
		name = xstrdup("download");
	}
	char *partial = cache_partial_path(cfg->cache, key);
	char *file = xasprintf("%s/%s", partial, name);
	struct sink s = { .r = r, .path = file, .fd = -1 };
	rm_rf(partial);
	if (mkdir_p(partial, 0755) < 0) {
		ret = io_error(eb, "create", partial);
		goto out;
	}
	s.fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s.fd < 0) {
		ret = io_error(eb, "create", file);
		goto out;
	}
	sink_hash(&s, &nettle_sha256);
	ret = curl_get(r, source, false, &s, &status, eb);
	if (!ret && status != 200)
		ret = error(eb, YERR(UNAVAILABLE), "GET answered HTTP %ld", status);
	if (!ret) {
		sink_hash_hex(&s, got);
		if (strcmp(got, sum))
			ret = error(eb, YERR(IO), "checksum mismatch: sha256 %s, expected %s", got, sum);
	}
	if (!ret && fchmod(s.fd, 0444) < 0)
		ret = io_error(eb, "chmod", file);
	/* the size is known only now: make room for it before it counts */
	if (!ret && !(ret = cache_reserve(cfg->cache, s.got, eb))) {
		ret = cache_commit(cfg->cache, key, partial, s.got, eb);
		cache_unreserve(cfg->cache, s.got);
	}
out:
	if (s.fd >= 0)
		close(s.fd);
	free(s.md_ctx);
	if (ret)
		rm_rf(partial);
	free(partial);
	free(file);
	free(name);
	if (ret)
		free(key);
	else
		*key_out = key;
	return ret;
}

/* ---- the task's data dir ---- */

/* Makes DATA_DIR/MOUNT point at target: a symlink, or an empty mount point
 * (a dir, or a file when target is one) and a bind. */
static int link_mount(struct run *r, const char *data_dir, const char *mount, const char *target,
		      struct errbuf *eb)
{
	struct stat st;
	int ret = 0;
	if ((ret = mkdirs_for(data_dir, mount, eb)))
		return ret;
	char *link = xasprintf("%s/%s", data_dir, mount);
	if (lstat(link, &st) == 0)
		rm_rf(link); /* a restart staging again */
	if (r->cfg->symlinks) {
		if (symlink(target, link) < 0)
			ret = io_error(eb, "link", link);
	} else {
		bool dir = stat(target, &st) == 0 && S_ISDIR(st.st_mode);
		int fd = dir ? mkdir(link, 0755) : open(link, O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
		if (fd < 0)
			ret = io_error(eb, "create", link);
		else if (!dir)
			close(fd);
		if (!ret)
			json_array_append_new(r->out->binds, json_pack("[s,s]", target, link));
	}
	free(link);
	return ret;
}

static int stage_one(struct run *r, const json_t *d, const char *data_dir, struct errbuf *eb)
{
	const char *kind = json_string_value(json_object_get(d, "kind"));
	const char *source = json_string_value(json_object_get(d, "source"));
	const char *mount = json_string_value(json_object_get(d, "mount"));
	char *key = NULL, *target = NULL;
	int ret;

	if (!kind || !source || !mount)
		return error(eb, YERR(BAD_REQUEST), "the entry lacks 'kind', 'source' or 'mount'");
	if (!mount_valid(mount))
		return error(eb, YERR(BAD_REQUEST), "refused mount '%s'", mount);
	if (!strcmp(kind, "file")) {
		const char *path = !strncmp(source, "file://", 7) ? source + 7 : "";
		struct stat st;
		if (path[0] != '/' || (path[1] && !dataset_path_valid(path + 1)))
			return error(eb, YERR(BAD_REQUEST), "refused path '%s'", path);
		if (stat(path, &st) < 0)
			return error(eb, YERR(NOT_FOUND), "'%s' does not exist on this node: %s", path, strerror(errno));
		return link_mount(r, data_dir, mount, path, eb);
	}
	if (!strcmp(kind, "yard"))
		ret = stage_yard(r, d, &key, eb);
	else if (!strcmp(kind, "s3") && !strncmp(source, "s3://", 5))
		ret = stage_s3(r, source, &key, eb);
	else if (!strcmp(kind, "https") && (!strncmp(source, "https://", 8) || !strncmp(source, "http://", 7)))
		ret = stage_https(r, d, source, &key, eb);
	else if (!strcmp(kind, "job") && !strncmp(source, "yard-job://", 11))
		ret = stage_yard(r, d, &key, eb); /* one manifest, as a dataset version (master/jobsource.h) */
	else
		ret = error(eb, YERR(BAD_REQUEST), "unknown kind '%s'", kind);
	if (ret)
		return ret;
	json_array_append_new(r->out->keys, json_string(key));
	target = cache_entry_path(r->cfg->cache, key);
	ret = link_mount(r, data_dir, mount, target, eb);
	free(target);
	free(key);
	return ret;
}

void stage_result_init(struct stage_result *r)
{
	memset(r, 0, sizeof(*r));
	r->keys = json_array();
	r->binds = json_array();
}

void stage_result_release(struct stage_result *r)
{
	json_decref(r->keys);
	json_decref(r->binds);
	memset(r, 0, sizeof(*r));
}

void stage_unhold(struct cache *c, const json_t *keys)
{
	size_t i;
	json_t *k;
	json_array_foreach(keys, i, k)
		if (json_is_string(k))
			cache_unhold(c, json_string_value(k));
}

int stage_data(const struct stage_config *cfg, const json_t *data, const char *data_dir,
	       struct stage_result *out, struct errbuf *eb)
{
	struct run r = { .cfg = cfg, .out = out, .eb = eb };
	size_t i;
	json_t *d;
	int ret = 0;

	if (curllib_load(eb))
		return YERR(INTERNAL);
	if (mkdir_p(data_dir, 0755) < 0)
		return io_error(eb, "create", data_dir);
	pthread_mutex_init(&r.lock, NULL);
	/* the yard sizes are known up front, so the first report has a total */
	json_array_foreach(data, i, d)
		if (json_integer_value(json_object_get(d, "size")) > 0)
			r.total += (uint64_t)json_integer_value(json_object_get(d, "size"));
	progress(&r, true);
	r.total = 0; /* each entry adds its own as it goes */
	json_array_foreach(data, i, d) {
		struct errbuf why = ERRBUF_INIT;
		if ((ret = stage_one(&r, d, data_dir, &why))) {
			const char *src = json_string_value(json_object_get(d, "source"));
			error(eb, ret, "data[%zu] (%s): %s", i, src ? src : "?", why.msg);
			break;
		}
	}
	if (ret) {
		stage_unhold(cfg->cache, out->keys);
		json_array_clear(out->keys);
		json_array_clear(out->binds);
	}
	out->staged = r.staged;
	progress(&r, true);
	pthread_mutex_destroy(&r.lock);
	return ret;
}

int stage_s3_credentials(const char *path, char **key, char **secret, struct errbuf *eb)
{
	struct strbuf sb = STRBUF_INIT;
	*key = *secret = NULL;
	if (strbuf_read_file(&sb, path, 65536) < 0)
		return error(eb, YERR(IO), "cannot read '%s': %s", path, strerror(errno));
	for (char *line = sb.buf; *line;) {
		size_t n = strcspn(line, "\r\n");
		char *eq = memchr(line, '=', n);
		if (eq) {
			size_t kl = (size_t)(eq - line);
			char *val = xstrndup(eq + 1, n - kl - 1);
			if (kl == 17 && !strncmp(line, "AWS_ACCESS_KEY_ID", kl)) {
				free(*key);
				*key = val;
			} else if (kl == 21 && !strncmp(line, "AWS_SECRET_ACCESS_KEY", kl)) {
				free(*secret);
				*secret = val;
			} else {
				free(val);
			}
		}
		line += n;
		while (*line == '\r' || *line == '\n')
			line++;
	}
	strbuf_release(&sb);
	if (!*key || !*secret) {
		free(*key);
		free(*secret);
		*key = *secret = NULL;
		return error(eb, YERR(BAD_REQUEST), "'%s' lacks AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY", path);
	}
	return 0;
}
