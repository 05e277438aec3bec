/*
 * The node data cache (src/agent/cache.h) and staging (src/agent/stage.h):
 * LRU eviction under a cap that never touches a held entry, the index across
 * a reload, leftovers of a killed agent, path checks; yard staging against a
 * fake master (libmicrohttpd) that can corrupt chunks, https and file
 * staging, an unreachable store; s3 staging against a real s3rver
 * (tests/e2e/s3, `make s3rver`) when it is installed.
 */
#include "base/compat.h"

#include <curl/curl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "agent/cache.h"
#include "agent/stage.h"
#include "common/dataset.h"
#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

static char *key_of(const char *kind, char c)
{
	char hex[65];
	memset(hex, c, 64);
	hex[64] = '\0';
	return xasprintf("%s-%s", kind, hex);
}

static void make_entry(struct cache *c, const char *key, size_t size)
{
	char *p = cache_partial_path(c, key);
	char *f = xasprintf("%s/f", p);
	char *buf = xcalloc(1, size + 1);
	struct errbuf eb = ERRBUF_INIT;
	assert_int_equal(mkdir_p(p, 0755), 0);
	assert_int_equal(write_file_atomic(f, buf, size, 0444), 0);
	assert_int_equal(cache_reserve(c, size, &eb), 0);
	assert_int_equal(cache_commit(c, key, p, size, &eb), 0);
	cache_unreserve(c, size);
	free(buf);
	free(f);
	free(p);
}

static bool entry_exists(struct cache *c, const char *key)
{
	char *p = cache_entry_path(c, key);
	bool r = path_exists(p);
	free(p);
	return r;
}

static void test_cache_lru(void **state)
{
	char dir[] = "/tmp/yard-cache-XXXXXX";
	struct cache c;
	struct errbuf eb = ERRBUF_INIT;
	char *a = key_of("yard", 'a'), *b = key_of("s3", 'b'), *k3 = key_of("https", 'c');

	assert_non_null(mkdtemp(dir));
	assert_int_equal(cache_open(&c, dir, 1000, &eb), 0);
	make_entry(&c, a, 400);   /* held (by its staging) */
	make_entry(&c, b, 400);
	cache_unhold(&c, b);      /* b: free to go */
	assert_int_equal(c.used, 800);
	/* 400 more: b goes (a is held although it is older) */
	assert_int_equal(cache_reserve(&c, 400, &eb), 0);
	assert_true(entry_exists(&c, a));
	assert_false(entry_exists(&c, b));
	cache_unreserve(&c, 400);
	/* more than the cap minus what is held: refused, nothing evicted */
	assert_int_equal(cache_reserve(&c, 700, &eb), YERR(NO_SPACE));
	assert_non_null(strstr(eb.msg, "held by live tasks"));
	assert_true(entry_exists(&c, a));
	/* released: the LRU of two unheld entries goes first */
	cache_unhold(&c, a);
	make_entry(&c, k3, 100);
	cache_unhold(&c, k3);
	assert_int_equal(cache_hold(&c, a), 1); /* a is now the most recent */
	cache_unhold(&c, a);
	assert_int_equal(cache_reserve(&c, 550, &eb), 0);
	assert_false(entry_exists(&c, k3));
	assert_true(entry_exists(&c, a));
	cache_unreserve(&c, 550);
	json_t *keys = cache_keys(&c, "yard-");
	assert_int_equal(json_array_size(keys), 1);
	assert_string_equal(json_string_value(json_array_get(keys, 0)), a);
	json_decref(keys);
	cache_release(&c);
	rm_rf(dir);
	free(a);
	free(b);
	free(k3);
}

/* Two tasks stage the same data at once: each writes a dir of its own, the
 * first to commit makes the entry, the second holds it and its dir goes. */
static void test_cache_two_stagings_of_one_key(void **state)
{
	char dir[] = "/tmp/yard-cache-XXXXXX";
	struct cache c;
	struct errbuf eb = ERRBUF_INIT;
	char *a = key_of("yard", 'a');

	assert_non_null(mkdtemp(dir));
	assert_int_equal(cache_open(&c, dir, 1000, &eb), 0);
	char *p1 = cache_partial_path(&c, a), *p2 = cache_partial_path(&c, a);
	assert_string_not_equal(p1, p2);
	char *f1 = xasprintf("%s/f", p1), *f2 = xasprintf("%s/f", p2);
	assert_int_equal(mkdir_p(p1, 0755), 0);
	assert_int_equal(mkdir_p(p2, 0755), 0);
	assert_int_equal(write_file_atomic(f1, "one", 3, 0444), 0);
	assert_int_equal(write_file_atomic(f2, "one", 3, 0444), 0);
	assert_int_equal(cache_commit(&c, a, p2, 3, &eb), 0);
	assert_int_equal(cache_commit(&c, a, p1, 3, &eb), 0);
	assert_false(path_exists(p1));
	assert_false(path_exists(p2));
	assert_true(entry_exists(&c, a));
	assert_int_equal(c.n, 1);
	assert_int_equal(c.used, 3);
	assert_int_equal(c.v[0].holds, 2);
	cache_release(&c);
	rm_rf(dir);
	free(f1);
	free(f2);
	free(p1);
	free(p2);
	free(a);
}

/* The index as a JSON object (new reference). */
static json_t *read_index(const char *dir)
{
	char *path = xasprintf("%s/index.json", dir);
	json_t *doc = json_load_file(path, 0, NULL);
	free(path);
	assert_non_null(doc);
	return doc;
}

static bool indexed_unsynced(const char *dir, const char *key)
{
	json_t *doc = read_index(dir);
	bool r = json_is_true(json_object_get(json_object_get(json_object_get(doc, "entries"), key),
					      "unsynced"));
	json_decref(doc);
	return r;
}

/* An entry is committed unsynced and synced after (cache_sync); an agent
 * that starts again in the same boot keeps an entry left unsynced (and
 * syncs it), one that starts after a reboot removes it. */
static void test_cache_unsynced_entries(void **state)
{
	char dir[] = "/tmp/yard-cache-XXXXXX";
	struct cache c;
	struct errbuf eb = ERRBUF_INIT;
	char *a = key_of("yard", 'a'), *b = key_of("yard", 'b');

	assert_non_null(mkdtemp(dir));
	assert_int_equal(cache_open(&c, dir, 1 << 20, &eb), 0);
	make_entry(&c, a, 10);
	assert_true(indexed_unsynced(dir, a));
	assert_int_equal(cache_sync(&c), 0);
	assert_false(indexed_unsynced(dir, a));
	make_entry(&c, b, 20);
	assert_true(indexed_unsynced(dir, b));
	cache_release(&c);

	/* the same boot: kept, and synced at open */
	assert_int_equal(cache_open(&c, dir, 1 << 20, &eb), 0);
	assert_int_equal(c.n, 2);
	assert_false(indexed_unsynced(dir, b));
	cache_release(&c);

	/* another boot: b was left unsynced, a was not */
	json_t *doc = read_index(dir);
	json_object_set_new(json_object_get(json_object_get(doc, "entries"), b), "unsynced", json_true());
	json_object_set_new(doc, "boot_id", json_string("an-earlier-boot"));
	char *path = xasprintf("%s/index.json", dir);
	assert_int_equal(json_dump_file(doc, path, 0), 0);
	json_decref(doc);
	free(path);
	assert_int_equal(cache_open(&c, dir, 1 << 20, &eb), 0);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.used, 10);
	assert_true(entry_exists(&c, a));
	assert_false(entry_exists(&c, b));
	cache_release(&c);
	rm_rf(dir);
	free(a);
	free(b);
}

static void test_cache_reload(void **state)
{
	char dir[] = "/tmp/yard-cache-XXXXXX";
	struct cache c;
	struct errbuf eb = ERRBUF_INIT;
	char *a = key_of("yard", 'a'), *b = key_of("yard", 'b');

	assert_non_null(mkdtemp(dir));
	assert_int_equal(cache_open(&c, dir, 1 << 20, &eb), 0);
	make_entry(&c, a, 10);
	make_entry(&c, b, 20);
	cache_release(&c);
	/* a killed agent's leftovers: a staging, an eviction, an unindexed entry */
	char *partial = xasprintf("%s/%s.partial", dir, a);
	char *trash = xasprintf("%s/.trash-%s", dir, b);
	char *stray = xasprintf("%s/%s", dir, "yard-cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc");
	char *stray_f = xasprintf("%s/x", stray);
	assert_int_equal(mkdir_p(partial, 0755), 0);
	assert_int_equal(mkdir_p(trash, 0755), 0);
	assert_int_equal(mkdir_p(stray, 0755), 0);
	assert_int_equal(write_file_atomic(stray_f, "12345", 5, 0444), 0);

	assert_int_equal(cache_open(&c, dir, 1 << 20, &eb), 0);
	assert_false(path_exists(partial));
	assert_false(path_exists(trash));
	assert_int_equal(c.n, 3);
	assert_int_equal(c.used, 35);
	assert_int_equal(cache_hold(&c, a), 1);
	cache_release(&c);
	/* an entry whose directory is gone is forgotten */
	char *pa = xasprintf("%s/%s", dir, a);
	rm_rf(pa);
	assert_int_equal(cache_open(&c, dir, 1 << 20, &eb), 0);
	assert_int_equal(c.n, 2);
	assert_int_equal(cache_hold(&c, a), 0);
	cache_release(&c);
	rm_rf(dir);
	free(pa);
	free(partial);
	free(trash);
	free(stray);
	free(stray_f);
	free(a);
	free(b);
}

static void test_paths(void **state)
{
	assert_true(dataset_path_valid("a"));
	assert_true(dataset_path_valid("a/b.txt"));
	assert_true(dataset_path_valid("..a/b.."));
	assert_false(dataset_path_valid(""));
	assert_false(dataset_path_valid("/etc/passwd"));
	assert_false(dataset_path_valid("a/../../b"));
	assert_false(dataset_path_valid(".."));
	assert_false(dataset_path_valid("a//b"));
	assert_false(dataset_path_valid("a/"));
	assert_false(dataset_path_valid("./a"));
	assert_true(cache_key_valid("yard-0000000000000000000000000000000000000000000000000000000000000000"));
	assert_false(cache_key_valid("yard-00"));
	assert_false(cache_key_valid("index.json"));
	assert_false(cache_key_valid("../yard-0000000000000000000000000000000000000000000000000000000000000000"));
}

/* ---- a fake master: GET /v1/manifests/D and /v1/blobs/D, and any other
 * path from a table ---- */

struct route {
	char path[128];
	struct strbuf body;
};

static struct fake {
	struct MHD_Daemon *d;
	char url[64];
	pthread_mutex_t lock;
	struct route routes[16];
	size_t nroutes;
	char corrupt[128];      /* this path is served corrupted ... */
	unsigned corrupt_left;  /* ... this many times */
	uint64_t served;        /* body bytes */
	unsigned requests;
	bool bad_token;
} fake;

static void route(const char *path, const void *body, size_t len)
{
	struct route *r = &fake.routes[fake.nroutes++];
	snprintf(r->path, sizeof(r->path), "%s", path);
	strbuf_init(&r->body, len);
	strbuf_add(&r->body, body, len);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	struct MHD_Response *resp = NULL;
	unsigned status = 404;
	pthread_mutex_lock(&fake.lock);
	fake.requests++;
	bool authed = auth && !strcmp(auth, "Bearer yard_a_test");
	for (size_t i = 0; i < fake.nroutes; i++) {
		if (strcmp(fake.routes[i].path, url))
			continue;
		if (!authed && strncmp(url, "/files", 6)) {
			status = 401;
			break;
		}
		struct strbuf *b = &fake.routes[i].body;
		char *copy = xmalloc(b->len + 1);
		memcpy(copy, b->buf, b->len);
		if (!strcmp(fake.corrupt, url) && fake.corrupt_left) {
			fake.corrupt_left--;
			if (b->len)
				copy[0] ^= 1;
		}
		fake.served += b->len;
		resp = MHD_create_response_from_buffer(b->len, copy, MHD_RESPMEM_MUST_FREE);
		status = 200;
		break;
	}
	pthread_mutex_unlock(&fake.lock);
	if (!resp)
		resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

struct fixture {
	char dir[40];
	char *cache_dir, *data_dir;
	struct cache cache;
	struct stage_config cfg;
	char digest[80];
	char big_chunk[80];
	char https_sum[65];
	unsigned progress_calls;
};

static void on_progress(void *arg, uint64_t staged, uint64_t total)
{
	struct fixture *fx = arg;
	fx->progress_calls++;
	assert_true(staged <= total);
}

static void add_chunk(json_t *chunks, const char *data, size_t len, char *digest_out)
{
	char hex[65];
	sha256_hex(data, len, hex);
	char *path = xasprintf("/v1/blobs/sha256:%s", hex);
	route(path, data, len);
	free(path);
	char *d = xasprintf("sha256:%s", hex);
	json_array_append_new(chunks, json_string(d));
	if (digest_out)
		snprintf(digest_out, 80, "%s", d);
	free(d);
}

static void serve_manifest(struct fixture *fx, json_t *manifest)
{
	char hex[65];
	char *text = json_dumps(manifest, JSON_COMPACT | JSON_SORT_KEYS);
	sha256_hex(text, strlen(text), hex);
	snprintf(fx->digest, sizeof(fx->digest), "sha256:%s", hex);
	char *path = xasprintf("/v1/manifests/%s", fx->digest);
	route(path, text, strlen(text));
	free(path);
	free(text);
}

static int setup(void **state)
{
	struct fixture *fx = xcalloc(1, sizeof(*fx));
	struct errbuf eb = ERRBUF_INIT;

	memset(&fake, 0, sizeof(fake));
	pthread_mutex_init(&fake.lock, NULL);
	fake.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
				  handler, NULL, MHD_OPTION_END);
	if (!fake.d)
		return -1;
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(fake.d, MHD_DAEMON_INFO_BIND_PORT);
	snprintf(fake.url, sizeof(fake.url), "http://127.0.0.1:%u", (unsigned)info->port);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/yard-stage-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	fx->cache_dir = xasprintf("%s/cache", fx->dir);
	fx->data_dir = xasprintf("%s/task/data", fx->dir);
	if (cache_open(&fx->cache, fx->cache_dir, 1 << 30, &eb))
		return -1;

	/* a dataset: a.txt, sub/b.bin (two chunks), an empty file */
	json_t *files = json_array(), *chunks;
	chunks = json_array();
	add_chunk(chunks, "hello\n", 6, NULL);
	json_array_append_new(files, json_pack("{s:s, s:i, s:i, s:o}", "path", "a.txt", "size", 6, "mode", 0644,
					       "chunks", chunks));
	json_array_append_new(files, json_pack("{s:s, s:i, s:i, s:[]}", "path", "e", "size", 0, "mode", 0600,
					       "chunks"));
	chunks = json_array();
	add_chunk(chunks, "0123456789", 10, fx->big_chunk);
	add_chunk(chunks, "abcdef", 6, NULL);
	json_array_append_new(files, json_pack("{s:s, s:i, s:i, s:o}", "path", "sub/b.bin", "size", 16, "mode",
					       0755, "chunks", chunks));
	json_t *m = json_pack("{s:o}", "files", files);
	serve_manifest(fx, m);
	json_decref(m);
	/* a file for https staging */
	route("/files/f.tar", "tarball", 7);
	sha256_hex("tarball", 7, fx->https_sum);

	fx->cfg.cache = &fx->cache;
	fx->cfg.master_url = fake.url;
	fx->cfg.token = "yard_a_test";
	fx->cfg.symlinks = true;
	fx->cfg.progress = on_progress;
	fx->cfg.progress_arg = fx;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	MHD_stop_daemon(fake.d);
	for (size_t i = 0; i < fake.nroutes; i++)
		strbuf_release(&fake.routes[i].body);
	cache_release(&fx->cache);
	rm_rf(fx->dir);
	free(fx->cache_dir);
	free(fx->data_dir);
	free(fx);
	return 0;
}

static void assert_file(const char *dir, const char *rel, const char *want, unsigned mode)
{
	struct strbuf sb = STRBUF_INIT;
	struct stat st;
	char *p = xasprintf("%s/%s", dir, rel);
	assert_int_equal(strbuf_read_file(&sb, p, 1 << 20), 0);
	assert_string_equal(sb.buf, want);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, mode);
	strbuf_release(&sb);
	free(p);
}

static json_t *yard_data(struct fixture *fx, const char *mount)
{
	return json_pack("[{s:s, s:s, s:s, s:s, s:i}]", "kind", "yard", "source", "yard://digits@1", "mount", mount,
			 "digest", fx->digest, "size", 22);
}

static void test_yard(void **state)
{
	struct fixture *fx = *state;
	struct stage_result res;
	struct errbuf eb = ERRBUF_INIT;
	json_t *data = yard_data(fx, "data/digits");

	/* one chunk arrives corrupted twice: fetched again, the third try is good */
	snprintf(fake.corrupt, sizeof(fake.corrupt), "/v1/blobs/%s", fx->big_chunk);
	fake.corrupt_left = 2;
	stage_result_init(&res);
	int ret = stage_data(&fx->cfg, data, fx->data_dir, &res, &eb);
	if (ret)
		fail_msg("staging: %s", eb.msg);
	assert_int_equal(json_array_size(res.keys), 1);
	assert_true(res.transferred >= 22);
	assert_true(fx->progress_calls >= 2);
	char *mnt = xasprintf("%s/data/digits", fx->data_dir);
	assert_file(mnt, "a.txt", "hello\n", 0444);
	assert_file(mnt, "sub/b.bin", "0123456789abcdef", 0555);
	assert_file(mnt, "e", "", 0400);
	struct stat st;
	assert_int_equal(lstat(mnt, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	stage_result_release(&res);

	/* a second task with the same data: a cache hit, nothing transferred */
	uint64_t served = fake.served;
	char *data2 = xasprintf("%s/task2/data", fx->dir);
	stage_result_init(&res);
	assert_int_equal(stage_data(&fx->cfg, data, data2, &res, &eb), 0);
	assert_int_equal(res.transferred, 0);
	assert_int_equal(fake.served, served);
	assert_int_equal(res.staged, 22);
	char *mnt2 = xasprintf("%s/data/digits", data2);
	assert_file(mnt2, "sub/b.bin", "0123456789abcdef", 0555);
	/* both tasks hold it */
	assert_int_equal(fx->cache.v[0].holds, 2);
	stage_unhold(&fx->cache, res.keys);
	stage_unhold(&fx->cache, res.keys);
	assert_int_equal(fx->cache.v[0].holds, 0);
	stage_result_release(&res);
	free(mnt);
	free(mnt2);
	free(data2);
	json_decref(data);
}

static void test_yard_failures(void **state)
{
	struct fixture *fx = *state;
	struct stage_result res;
	struct errbuf eb = ERRBUF_INIT;
	json_t *data = yard_data(fx, "digits");

	/* a chunk that never matches */
	snprintf(fake.corrupt, sizeof(fake.corrupt), "/v1/blobs/%s", fx->big_chunk);
	fake.corrupt_left = 100;
	stage_result_init(&res);
	assert_int_equal(stage_data(&fx->cfg, data, fx->data_dir, &res, &eb), YERR(IO));
	assert_non_null(strstr(eb.msg, "data[0] (yard://digits@1): "));
	assert_non_null(strstr(eb.msg, "checksum mismatch"));
	assert_non_null(strstr(eb.msg, "after 3 tries"));
	assert_int_equal(json_array_size(res.keys), 0);
	assert_int_equal(fx->cache.n, 0);
	char *partial = xasprintf("%s/yard-%s.partial", fx->cache_dir, fx->digest + 7);
	assert_false(path_exists(partial));
	free(partial);
	stage_result_release(&res);
	fake.corrupt_left = 0;

	/* a manifest with a path that escapes: refused */
	json_t *m = json_pack("{s:[{s:s, s:i, s:i, s:[]}]}", "files", "path", "../../evil", "size", 0, "mode",
			      0644, "chunks");
	serve_manifest(fx, m);
	json_decref(m);
	json_decref(data);
	data = yard_data(fx, "digits");
	stage_result_init(&res);
	assert_int_equal(stage_data(&fx->cfg, data, fx->data_dir, &res, &eb), YERR(BAD_REQUEST));
	assert_non_null(strstr(eb.msg, "refused path '../../evil'"));
	stage_result_release(&res);

	/* a master that cannot be reached */
	fx->cfg.master_url = "http://127.0.0.1:1";
	stage_result_init(&res);
	assert_int_equal(stage_data(&fx->cfg, data, fx->data_dir, &res, &eb), YERR(UNAVAILABLE));
	assert_non_null(strstr(eb.msg, "data[0] (yard://digits@1): "));
	stage_result_release(&res);
	json_decref(data);
}

/* A file of more than one DATASET_CHUNK_MAX, cut there (as yard data push
 * and the agents cut): its chunks come at once, each written at its offset;
 * a chunk whose length is not the one the file's cut puts there fails the
 * staging naming it. */
static void test_yard_large_file_in_chunks(void **state)
{
	struct fixture *fx = *state;
	struct stage_result res;
	struct errbuf eb = ERRBUF_INIT;
	size_t size = 2 * DATASET_CHUNK_MAX + 5;
	char *big = xmalloc(size), hex[65];
	json_t *chunks = json_array(), *m, *data;

	for (size_t i = 0; i < size; i++)
		big[i] = (char)('a' + (i * 7 + i / 4096) % 26);
	for (size_t off = 0; off < size; off += DATASET_CHUNK_MAX)
		add_chunk(chunks, big + off, size - off < DATASET_CHUNK_MAX ? size - off : DATASET_CHUNK_MAX, NULL);
	m = json_pack("{s:[{s:s, s:I, s:i, s:o}]}", "files", "path", "big.bin", "size", (json_int_t)size, "mode", 0644,
		      "chunks", chunks);
	serve_manifest(fx, m);
	json_decref(m);
	data = json_pack("[{s:s, s:s, s:s, s:s, s:I}]", "kind", "yard", "source", "yard://big@1", "mount", "big",
			 "digest", fx->digest, "size", (json_int_t)size);
	stage_result_init(&res);
	if (stage_data(&fx->cfg, data, fx->data_dir, &res, &eb))
		fail_msg("staging: %s", eb.msg);
	assert_int_equal(res.staged, size);
	struct strbuf sb = STRBUF_INIT;
	char *path = xasprintf("%s/big/big.bin", fx->data_dir);
	assert_true(strbuf_read_file(&sb, path, 64 << 20) >= 0);
	assert_int_equal(sb.len, size);
	assert_memory_equal(sb.buf, big, size);
	strbuf_release(&sb);
	free(path);
	stage_result_release(&res);
	json_decref(data);

	/* a manifest that cuts its first 8 MiB as 4 bytes: the digest holds, the
	 * place does not */
	chunks = json_array();
	add_chunk(chunks, big, 4, NULL);
	add_chunk(chunks, big + 4, 1, NULL);
	m = json_pack("{s:[{s:s, s:I, s:i, s:o}]}", "files", "path", "lies.bin", "size",
		      (json_int_t)DATASET_CHUNK_MAX + 1, "mode", 0644, "chunks", chunks);
	serve_manifest(fx, m);
	json_decref(m);
	sha256_hex(big, 4, hex);
	data = json_pack("[{s:s, s:s, s:s, s:s, s:I}]", "kind", "yard", "source", "yard://lies@1", "mount", "lies",
			 "digest", fx->digest, "size", (json_int_t)DATASET_CHUNK_MAX + 1);
	stage_result_init(&res);
	assert_int_equal(stage_data(&fx->cfg, data, fx->data_dir, &res, &eb), YERR(BAD_REQUEST));
	assert_non_null(strstr(eb.msg, hex));
	if (!strstr(eb.msg, "of 'lies.bin' has 4 bytes where the manifest's sizes put 8388608"))
		fail_msg("%s", eb.msg);
	stage_result_release(&res);
	json_decref(data);
	free(big);
}

static void test_https_and_file(void **state)
{
	struct fixture *fx = *state;
	struct stage_result res;
	struct errbuf eb = ERRBUF_INIT;
	char *url = xasprintf("%s/files/f.tar", fake.url);
	char *shared = xasprintf("%s/shared", fx->dir);
	char *furl = xasprintf("file://%s", shared);
	assert_int_equal(mkdir_p(shared, 0755), 0);
	json_t *data = json_pack("[{s:s, s:s, s:s, s:s}, {s:s, s:s, s:s}]", "kind", "https", "source", url, "mount", "f",
				 "sha256", fx->https_sum, "kind", "file", "source", furl, "mount", "x");

	stage_result_init(&res);
	if (stage_data(&fx->cfg, data, fx->data_dir, &res, &eb))
		fail_msg("staging: %s", eb.msg);
	char *f = xasprintf("%s/f", fx->data_dir);
	assert_file(f, "f.tar", "tarball", 0444);
	char *x = xasprintf("%s/x", fx->data_dir);
	char target[PATH_MAX];
	ssize_t n = readlink(x, target, sizeof(target) - 1);
	assert_true(n > 0);
	target[n] = '\0';
	assert_string_equal(target, shared);
	stage_result_release(&res);

	/* a wrong checksum; a file:// path that does not exist */
	json_t *bad = json_pack("[{s:s, s:s, s:s, s:s}]", "kind", "https", "source", url, "mount", "f", "sha256",
				"0000000000000000000000000000000000000000000000000000000000000000");
	stage_result_init(&res);
	assert_int_equal(stage_data(&fx->cfg, bad, fx->data_dir, &res, &eb), YERR(IO));
	assert_non_null(strstr(eb.msg, "checksum mismatch"));
	stage_result_release(&res);
	json_decref(bad);
	bad = json_pack("[{s:s, s:s, s:s}]", "kind", "file", "source", "file:///nonexistent/yard", "mount", "x");
	stage_result_init(&res);
	assert_int_equal(stage_data(&fx->cfg, bad, fx->data_dir, &res, &eb), YERR(NOT_FOUND));
	assert_non_null(strstr(eb.msg, "data[0] (file:///nonexistent/yard): "));
	stage_result_release(&res);
	json_decref(bad);
	json_decref(data);
	free(f);
	free(x);
	free(url);
	free(furl);
	free(shared);
}

/* An S3 listing with a key that would escape the entry (s3rver normalises
 * keys, so a fake store serves it): refused before anything is fetched. */
static void test_s3_escape(void **state)
{
	struct fixture *fx = *state;
	struct stage_result res;
	struct errbuf eb = ERRBUF_INIT;
	static const char listing[] =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
		"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>files</Name>"
		"<IsTruncated>false</IsTruncated>"
		"<Contents><Key>pre/ok.txt</Key><ETag>&quot;x&quot;</ETag><Size>3</Size></Contents>"
		"<Contents><Key>pre/../../evil.txt</Key><ETag>&quot;x&quot;</ETag><Size>5</Size></Contents>"
		"</ListBucketResult>";
	route("/files", listing, strlen(listing));
	fx->cfg.s3_endpoint = fake.url;
	fx->cfg.s3_key = "k";
	fx->cfg.s3_secret = "s";
	json_t *data = json_pack("[{s:s, s:s, s:s}]", "kind", "s3", "source", "s3://files/pre", "mount", "raw");
	unsigned before = fake.requests;
	stage_result_init(&res);
	assert_int_equal(stage_data(&fx->cfg, data, fx->data_dir, &res, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "data[0] (s3://files/pre): object key 'pre/../../evil.txt' would escape the entry");
	assert_int_equal(fake.requests, before + 1); /* the listing only */
	stage_result_release(&res);
	/* no store configured */
	fx->cfg.s3_endpoint = NULL;
	stage_result_init(&res);
	assert_int_equal(stage_data(&fx->cfg, data, fx->data_dir, &res, &eb), YERR(BAD_REQUEST));
	assert_non_null(strstr(eb.msg, "--s3-endpoint"));
	stage_result_release(&res);
	json_decref(data);
}

/* ---- s3 against s3rver (tests/e2e/s3/node_modules; skipped when absent) ---- */

static pid_t s3rver_start(const char *dir, char *url, size_t len)
{
	char *bin = xasprintf("%s/tests/e2e/s3/node_modules/.bin/s3rver", SOURCE_ROOT);
	char *log = xasprintf("%s/s3rver.log", dir);
	char *data = xasprintf("%s/s3data", dir);
	pid_t pid = -1;
	if (access(bin, X_OK) != 0)
		goto out;
	mkdir_p(data, 0755);
	pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(bin, bin, "-d", data, "-a", "127.0.0.1", "-p", "0", "--configure-bucket", "bkt", (char *)NULL);
		_exit(127);
	}
	/* its readiness line names the port */
	for (int i = 0; i < 300; i++) {
		struct strbuf sb = STRBUF_INIT;
		usleep(50000);
		if (strbuf_read_file(&sb, log, 1 << 20) == 0) {
			char *p = strstr(sb.buf, "listening on 127.0.0.1:");
			if (p) {
				unsigned port = (unsigned)strtoul(p + strlen("listening on 127.0.0.1:"), NULL, 10);
				snprintf(url, len, "http://127.0.0.1:%u", port);
				strbuf_release(&sb);
				goto out;
			}
		}
		strbuf_release(&sb);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	pid = -1;
out:
	free(bin);
	free(log);
	free(data);
	return pid;
}

static void s3_put(const char *endpoint, const char *key, const char *body)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	char *url = xasprintf("%s/bkt/%s", endpoint, key);
	long status = 0;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
	curl_easy_setopt(c, CURLOPT_USERPWD, "S3RVER:S3RVER");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	assert_int_equal(status, 200);
	curl_easy_cleanup(c);
	curl_slist_free_all(h);
	free(url);
}

static void test_s3(void **state)
{
	struct fixture *fx = *state;
	struct stage_result res;
	struct errbuf eb = ERRBUF_INIT;
	char endpoint[64];
	pid_t pid = s3rver_start(fx->dir, endpoint, sizeof(endpoint));
	if (pid < 0) {
		print_message("s3rver is not installed (make s3rver): skipped\n");
		skip();
	}
	s3_put(endpoint, "pre/a.txt", "alpha\n");
	s3_put(endpoint, "pre/d/b.txt", "beta\n");
	s3_put(endpoint, "prefixed/not-mine.txt", "no\n");
	fx->cfg.s3_endpoint = endpoint;
	fx->cfg.s3_key = "S3RVER";
	fx->cfg.s3_secret = "S3RVER";
	json_t *data = json_pack("[{s:s, s:s, s:s}]", "kind", "s3", "source", "s3://bkt/pre", "mount", "raw");
	stage_result_init(&res);
	if (stage_data(&fx->cfg, data, fx->data_dir, &res, &eb))
		fail_msg("staging: %s", eb.msg);
	char *raw = xasprintf("%s/raw", fx->data_dir);
	assert_file(raw, "a.txt", "alpha\n", 0444);
	assert_file(raw, "d/b.txt", "beta\n", 0444);
	char *stray = xasprintf("%s/fixed/not-mine.txt", raw);
	assert_false(path_exists(stray));
	assert_int_equal(res.transferred, 11);
	assert_int_equal(strncmp(json_string_value(json_array_get(res.keys, 0)), "s3-", 3), 0);
	stage_result_release(&res);
	/* again: the listing is the same, nothing is downloaded */
	stage_result_init(&res);
	assert_int_equal(stage_data(&fx->cfg, data, fx->data_dir, &res, &eb), 0);
	assert_int_equal(res.transferred, 0);
	stage_result_release(&res);
	/* the store gone */
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	stage_result_init(&res);
	assert_int_equal(stage_data(&fx->cfg, data, fx->data_dir, &res, &eb), YERR(UNAVAILABLE));
	assert_non_null(strstr(eb.msg, "data[0] (s3://bkt/pre): cannot reach"));
	stage_result_release(&res);
	json_decref(data);
	free(raw);
	free(stray);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_lru),
		cmocka_unit_test(test_cache_two_stagings_of_one_key),
		cmocka_unit_test(test_cache_reload),
		cmocka_unit_test(test_cache_unsynced_entries),
		cmocka_unit_test(test_paths),
		cmocka_unit_test_setup_teardown(test_yard, setup, teardown),
		cmocka_unit_test_setup_teardown(test_yard_failures, setup, teardown),
		cmocka_unit_test_setup_teardown(test_yard_large_file_in_chunks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_https_and_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_s3_escape, setup, teardown),
		cmocka_unit_test_setup_teardown(test_s3, setup, teardown),
	};
	httpc_global_init(&httpc_curl);
	int r = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return r;
}
