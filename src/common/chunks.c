/* Files in and out of the master's chunk store (chunks.h). */
#include "base/compat.h"
#include "common/chunks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/xalloc.h"
#include "common/dataset.h"

static int cmp_files(const void *a, const void *b)
{
	return strcmp(((const struct chunks_file *)a)->rel, ((const struct chunks_file *)b)->rel);
}

/* Counts rel (at abs) as left out of a lenient walk, or refuses it (why). */
static int leave_out(struct chunks_set *set, bool lenient, const char *abs, const char *rel, const char *why,
		     struct errbuf *eb)
{
	size_t have = strlen(set->skipped_names);

	if (!lenient)
		return error(eb, YERR(BAD_REQUEST), "'%s' %s", abs, why);
	if (set->skipped++ < 3)
		snprintf(set->skipped_names + have, sizeof(set->skipped_names) - have, "%s'%s' (%s)",
			 have ? ", " : "", *rel ? rel : abs, why);
	return 0;
}

static void add_file(struct chunks_set *set, const char *abs, const char *rel, const struct stat *st)
{
	struct chunks_file *f;

	ALLOC_GROW(set->files, set->n + 1, set->alloc);
	f = &set->files[set->n++];
	f->rel = xstrdup(rel);
	f->abs = xstrdup(abs);
	f->size = (uint64_t)st->st_size;
	f->mode = st->st_mode & 0777;
}

/* Collects the regular files under abs (rel its manifest path, "" at the top). */
static int walk(struct chunks_set *set, const char *abs, const char *rel, bool lenient, struct errbuf *eb)
{
	struct stat st;

	if (lstat(abs, &st))
		return error(eb, YERR(BAD_REQUEST), "cannot read '%s': %s", abs, strerror(errno));
	if (S_ISLNK(st.st_mode)) {
		/* lenient: a link to a regular file is that file (its chunks are
		 * held once however many names it has); a dir is not followed */
		if (!lenient)
			return error(eb, YERR(BAD_REQUEST),
				     "'%s' is a symbolic link: datasets hold regular files only", abs);
		if (stat(abs, &st) || !S_ISREG(st.st_mode))
			return leave_out(set, lenient, abs, rel, "a symbolic link to no regular file", eb);
	}
	if (S_ISREG(st.st_mode)) {
		if (strchr(rel, '\n'))
			return leave_out(set, lenient, abs, rel, "a name with a newline", eb);
		if (!dataset_path_valid(rel))
			return leave_out(set, lenient, abs, rel, "not a valid dataset path", eb);
		add_file(set, abs, rel, &st);
		return 0;
	}
	if (!S_ISDIR(st.st_mode))
		return leave_out(set, lenient, abs, rel, "is a special file: datasets hold regular files only", eb);
	DIR *d = opendir(abs);
	struct dirent *de;
	int ret = 0;
	if (!d)
		return error(eb, YERR(BAD_REQUEST), "cannot open '%s': %s", abs, strerror(errno));
	while (!ret && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char *ca = xasprintf("%s/%s", abs, de->d_name);
		char *cr = *rel ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
		ret = walk(set, ca, cr, lenient, eb);
		free(ca);
		free(cr);
	}
	closedir(d);
	return ret;
}

/* Takes (on) or gives back the file-system ids of set's user. */
static void become(const struct chunks_set *set, bool on)
{
	if (!set->as_user)
		return;
	if (on) {
		setfsgid(set->as.gid);
		setfsuid(set->as.uid);
	} else {
		setfsuid(0);
		setfsgid(0);
	}
}

int chunks_walk(struct chunks_set *set, const char *src, bool lenient, const struct chunks_as *as,
		struct errbuf *eb)
{
	struct stat st;
	int ret;

	memset(set, 0, sizeof(*set));
	if (as) {
		set->as_user = true;
		set->as = *as;
	}
	become(set, true);
	if (lstat(src, &st)) {
		int e = errno;
		become(set, false);
		if (e == ENOENT && lenient)
			return 0;
		return error(eb, e == ENOENT ? YERR(NOT_FOUND) : YERR(BAD_REQUEST), "cannot read '%s': %s", src,
			     strerror(e));
	}
	if (S_ISREG(st.st_mode)) {
		const char *base = strrchr(src, '/');
		ret = walk(set, src, base ? base + 1 : src, lenient, eb);
	} else {
		ret = walk(set, src, "", lenient, eb);
	}
	become(set, false);
	if (!ret)
		sort_array(set->files, set->n, sizeof(*set->files), cmp_files);
	return ret;
}

void chunks_set_release(struct chunks_set *set)
{
	for (size_t i = 0; i < set->n; i++) {
		free(set->files[i].rel);
		free(set->files[i].abs);
	}
	free(set->files);
	memset(set, 0, sizeof(*set));
}

/* Reads chunk i of f (of set) into buf; returns its length or -1. */
static ssize_t read_chunk(const struct chunks_set *set, const struct chunks_file *f, uint64_t i, char *buf,
			  struct errbuf *eb)
{
	uint64_t off = i * DATASET_CHUNK_MAX, len = f->size - off;
	ssize_t got = 0;
	int fd, e;

	become(set, true);
	fd = open(f->abs, O_RDONLY | O_CLOEXEC);
	e = errno;
	become(set, false);
	if (len > DATASET_CHUNK_MAX)
		len = DATASET_CHUNK_MAX;
	if (fd < 0) {
		error(eb, YERR(IO), "cannot open '%s': %s", f->abs, strerror(e));
		return -1;
	}
	while ((uint64_t)got < len) {
		ssize_t r = pread(fd, buf + got, len - (uint64_t)got, (off_t)off + got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			error(eb, YERR(IO), "cannot read '%s': %s", f->abs, r ? strerror(errno) : "it shrank");
			close(fd);
			return -1;
		}
		got += r;
	}
	close(fd);
	return got;
}

static int put_chunk(struct httpc *h, const char *digest, const char *buf, size_t len, struct errbuf *eb)
{
	struct httpc_response res;
	char path[96];
	int ret;

	snprintf(path, sizeof(path), "/v1/blobs/%s", digest);
	httpc_response_init(&res);
	ret = httpc_request(h, "PUT", path, buf, len, "application/octet-stream", &res, eb);
	if (!ret && res.status >= 400)
		ret = httpc_error_from_reply(&res, eb);
	httpc_response_release(&res);
	return ret;
}

/* The chunks a batch lacks, PUT by up to CHUNKS_PUT_PARALLEL threads at
 * once, each on a connection of its own: a chunk's PUT is a round trip
 * and, at the master, a write synced with its batch, so several in flight
 * keep the wire and the master's disk busy where one would wait. */
struct put_pool {
	const struct chunks_set *set;
	const json_t *missing, *where;  /* borrowed */
	const struct httpc *proto;
	pthread_mutex_t lock;
	size_t next;                    /* the next index of missing to take */
	int ret;                        /* the first failure, eb saying why */
	struct errbuf eb;
	struct chunks_stats *st;
};

static void *put_worker(void *arg)
{
	struct put_pool *p = arg;
	char *buf = xmalloc(DATASET_CHUNK_MAX);
	struct httpc h;

	httpc_init_like(&h, p->proto);
	for (;;) {
		struct errbuf eb = ERRBUF_INIT;
		pthread_mutex_lock(&p->lock);
		size_t k = p->next++;
		bool stop = p->ret || k >= json_array_size(p->missing);
		pthread_mutex_unlock(&p->lock);
		if (stop)
			break;
		const char *digest = json_string_value(json_array_get(p->missing, k));
		const json_t *w = json_object_get(p->where, digest ? digest : "");
		if (!w)
			continue; /* a digest the master named that we did not ask about */
		const struct chunks_file *f = &p->set->files[json_integer_value(json_array_get(w, 0))];
		ssize_t len = read_chunk(p->set, f, (uint64_t)json_integer_value(json_array_get(w, 1)), buf, &eb);
		int ret = len < 0 ? YERR(IO) : put_chunk(&h, digest, buf, (size_t)len, &eb) ? YERR(UNAVAILABLE) : 0;
		pthread_mutex_lock(&p->lock);
		if (ret && !p->ret) {
			p->ret = ret;
			p->eb = eb;
		} else if (!ret) {
			p->st->uploaded++;
			p->st->uploaded_bytes += (uint64_t)len;
		}
		pthread_mutex_unlock(&p->lock);
	}
	httpc_release(&h);
	free(buf);
	return NULL;
}

/* Asks about the digests of batch, and PUTs those missing (where[digest]
 * is [file, chunk] of one copy). */
static int upload_missing(struct httpc *h, const struct chunks_set *set, json_t *batch, const json_t *where,
			  struct chunks_stats *st, struct errbuf *eb)
{
	json_t *req = json_pack("{s:O}", "digests", batch), *missing = NULL;
	struct put_pool p = { set, NULL, where, h, PTHREAD_MUTEX_INITIALIZER, 0, 0, ERRBUF_INIT, st };
	pthread_t threads[CHUNKS_PUT_PARALLEL];
	size_t n, started = 0;
	int ret = httpc_json(h, "POST", "/v1/blobs/missing", req, &missing, NULL, eb);

	json_decref(req);
	p.missing = json_object_get(missing, "missing");
	n = ret || !json_is_array(p.missing) ? 0 : json_array_size(p.missing);
	if (n > CHUNKS_PUT_PARALLEL)
		n = CHUNKS_PUT_PARALLEL;
	for (size_t i = 0; i < n; i++)
		if (!pthread_create(&threads[i], NULL, put_worker, &p))
			started++;
	if (n && !started)
		put_worker(&p); /* no thread could start: this one does it all */
	for (size_t i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	if (!ret && p.ret) {
		*eb = p.eb;
		ret = p.ret;
	}
	pthread_mutex_destroy(&p.lock);
	json_decref(missing);
	return ret;
}

/* A batch of digests uploaded on a thread of its own while the next is
 * hashed: one in flight at a time. */
struct upload_batch {
	struct httpc *h;
	const struct chunks_set *set;
	json_t *digests, *where;        /* owned: the batch, where[digest] = [file, chunk] */
	struct chunks_stats st;
	int ret;
	struct errbuf eb;
	pthread_t thread;
	bool running;                   /* started, not yet joined */
	bool threaded;                  /* on its thread (else it ran in upload_batch_start) */
};

static void *upload_batch_run(void *arg)
{
	struct upload_batch *b = arg;

	b->ret = upload_missing(b->h, b->set, b->digests, b->where, &b->st, &b->eb);
	return NULL;
}

/* Starts uploading what *digests / *where name (taken; new empty ones
 * take their place); without a thread, uploads them at once. */
static void upload_batch_start(struct upload_batch *b, json_t **digests, json_t **where)
{
	b->digests = *digests;
	b->where = *where;
	*digests = json_array();
	*where = json_object();
	b->st = (struct chunks_stats){ 0, 0, 0 };
	errbuf_reset(&b->eb);
	b->running = true;
	b->threaded = !pthread_create(&b->thread, NULL, upload_batch_run, b);
	if (!b->threaded)
		upload_batch_run(b);
}

/* Waits for the batch started, if any: its result, its counts added to st. */
static int upload_batch_join(struct upload_batch *b, struct chunks_stats *st, struct errbuf *eb)
{
	if (!b->running)
		return 0;
	if (b->threaded)
		pthread_join(b->thread, NULL);
	b->running = false;
	st->uploaded += b->st.uploaded;
	st->uploaded_bytes += b->st.uploaded_bytes;
	json_decref(b->digests);
	json_decref(b->where);
	if (b->ret)
		*eb = b->eb;
	return b->ret;
}

/* The chunks hashed before the first upload starts: uploads begin while
 * the rest is hashed (one 1 GiB file was hashed whole first, 0.7 s, a
 * sixth of its push, before a byte went out). */
#define CHUNKS_FIRST_BATCH 8

int chunks_push(struct httpc *h, const struct chunks_set *set, json_t **manifest, struct chunks_stats *st_out,
		struct errbuf *eb)
{
	json_t *files = json_array(), *seen = json_object();
	json_t *digests = json_array(), *where = json_object();
	struct upload_batch up = { .h = h, .set = set };
	struct chunks_stats st = { 0, 0, 0 };
	char *buf = xmalloc(DATASET_CHUNK_MAX);
	bool uploading = false; /* a first batch was started */
	int ret = 0;

	*manifest = NULL;
	/* chunk and hash; each new digest goes into the next batch to upload
	 * (where[digest] = [file, chunk index] of one copy), which starts as
	 * soon as the one before is done */
	for (size_t i = 0; i < set->n && !ret; i++) {
		const struct chunks_file *f = &set->files[i];
		json_t *chunks = json_array();
		for (uint64_t c = 0; c * DATASET_CHUNK_MAX < f->size; c++) {
			char hex[SHA256_HEX_LEN + 1], digest[80];
			ssize_t len = read_chunk(set, f, c, buf, eb);
			if (len < 0) {
				ret = YERR(IO);
				break;
			}
			sha256_hex(buf, (size_t)len, hex);
			snprintf(digest, sizeof(digest), "sha256:%s", hex);
			json_array_append_new(chunks, json_string(digest));
			st.chunks++;
			if (json_object_get(seen, digest))
				continue;
			json_object_set_new(seen, digest, json_true());
			json_object_set_new(where, digest, json_pack("[I, I]", (json_int_t)i, (json_int_t)c));
			json_array_append_new(digests, json_string(digest));
			size_t n = json_array_size(digests);
			if (up.running && up.threaded && n < CHUNKS_MISSING_BATCH)
				continue; /* one in flight: the next batch grows meanwhile */
			if ((ret = upload_batch_join(&up, &st, eb)))
				break;
			if (n >= (uploading ? 1 : CHUNKS_FIRST_BATCH)) {
				upload_batch_start(&up, &digests, &where);
				uploading = true;
			}
		}
		json_array_append_new(files, json_pack("{s:s, s:I, s:i, s:o}", "path", f->rel, "size",
						       (json_int_t)f->size, "mode", (int)f->mode, "chunks", chunks));
	}
	struct errbuf ignored = ERRBUF_INIT; /* a batch's failure after one of ours */
	int joined = upload_batch_join(&up, &st, ret ? &ignored : eb);
	if (!ret)
		ret = joined;
	if (!ret && json_array_size(digests))
		ret = upload_missing(h, set, digests, where, &st, eb);
	json_decref(digests);
	json_decref(where);
	json_decref(seen);
	free(buf);
	if (ret) {
		json_decref(files);
		return ret;
	}
	*manifest = json_pack("{s:o}", "files", files);
	if (st_out)
		*st_out = st;
	return 0;
}

int chunks_manifest_get(struct httpc *h, const char *digest, json_t **manifest, struct errbuf *eb)
{
	char *path, got[72];
	int ret;

	*manifest = NULL;
	if (!dataset_digest_valid(digest))
		return error(eb, YERR(BAD_REQUEST), "bad manifest digest '%s'", digest ? digest : "(none)");
	path = xasprintf("/v1/manifests/%s", digest);
	ret = httpc_json(h, "GET", path, NULL, manifest, NULL, eb);
	free(path);
	if (ret)
		return ret;
	manifest_digest(*manifest, got);
	if (strcmp(got, digest)) {
		json_decref(*manifest);
		*manifest = NULL;
		return error(eb, YERR(IO), "checksum mismatch: manifest '%s' arrived as '%s'", digest, got);
	}
	return 0;
}

/* Appends chunk digest, fetched and checked, to fd. */
static int fetch_chunk(struct httpc *h, const char *digest, int fd, const char *path, uint64_t *written,
		       struct errbuf *eb)
{
	struct httpc_response res;
	char url[96], got[SHA256_HEX_LEN + 1];
	int ret;

	if (!dataset_digest_valid(digest))
		return error(eb, YERR(BAD_REQUEST), "bad chunk digest '%s'", digest ? digest : "(none)");
	snprintf(url, sizeof(url), "/v1/blobs/%s", digest);
	httpc_response_init(&res);
	ret = httpc_request(h, "GET", url, NULL, 0, NULL, &res, eb);
	if (!ret && res.status != 200)
		ret = httpc_error_from_reply(&res, eb);
	if (!ret) {
		sha256_hex(res.body.buf, res.body.len, got);
		if (strcmp(got, digest + 7))
			ret = error(eb, YERR(IO), "checksum mismatch: chunk '%s' arrived as 'sha256:%s'", digest, got);
	}
	if (!ret && write_all(fd, res.body.buf, res.body.len) < 0)
		ret = error(eb, YERR(IO), "cannot write '%s': %s", path, strerror(errno));
	if (!ret)
		*written += res.body.len;
	httpc_response_release(&res);
	return ret;
}

static int fetch_file(struct httpc *h, const json_t *f, const char *dir, struct errbuf *eb)
{
	const char *rel = json_string_value(json_object_get(f, "path"));
	json_int_t size = json_integer_value(json_object_get(f, "size"));
	const json_t *chunks = json_object_get(f, "chunks"), *c;
	uint64_t written = 0;
	size_t i;
	int ret = 0;

	if (!rel || !dataset_path_valid(rel))
		return error(eb, YERR(BAD_REQUEST), "the manifest names a refused path '%s'", rel ? rel : "(none)");
	char *path = xasprintf("%s/%s", dir, rel);
	char *slash = strrchr(path, '/');
	*slash = '\0';
	if (mkdir_p(path, 0755) < 0)
		ret = error(eb, YERR(IO), "cannot create '%s': %s", path, strerror(errno));
	*slash = '/';
	int fd = ret ? -1 : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (!ret && fd < 0)
		ret = error(eb, YERR(IO), "cannot create '%s': %s", path, strerror(errno));
	json_array_foreach(chunks, i, c)
		if (!ret)
			ret = fetch_chunk(h, json_string_value(c), fd, path, &written, eb);
	if (!ret && written != (uint64_t)size)
		ret = error(eb, YERR(IO), "'%s' has %" PRIu64 " bytes, the manifest says %" JSON_INTEGER_FORMAT,
			    rel, written, size);
	if (!ret && fchmod(fd, (mode_t)json_integer_value(json_object_get(f, "mode")) & 0777) < 0)
		ret = error(eb, YERR(IO), "cannot chmod '%s': %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	free(path);
	return ret;
}

int chunks_fetch(struct httpc *h, const json_t *manifest, const char *dir, struct errbuf *eb)
{
	const json_t *f;
	size_t i;
	int ret;

	if ((ret = manifest_validate(manifest, NULL, NULL, eb)))
		return ret;
	if (mkdir_p(dir, 0755) < 0)
		return error(eb, YERR(IO), "cannot create '%s': %s", dir, strerror(errno));
	json_array_foreach(json_object_get(manifest, "files"), i, f)
		if ((ret = fetch_file(h, f, dir, eb)))
			return ret;
	return 0;
}
