/* Backups of a master's state: the archive, its checks, the locks (backup.h). */
#include "base/compat.h"
#include "master/backup.h"

#include <dirent.h>
#include <jansson.h>
#include <sys/file.h>

#include "base/clock.h"
#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/archivelib.h"
#include "master/store.h"

#define LOCK_FILE "backup.lock"
#define HEADER_NAME "yard-backup.json"
#define TRAILER_NAME "yard-backup.sums"
#define HEADER_MAX ((size_t)64 << 10)
#define TRAILER_MAX ((size_t)256 << 20)
#define COPY_BUF ((size_t)1 << 20)
#define STAGE_PREFIX ".restore-"
#define DEPTH_MAX 16

/* libarchive once loaded (common/archivelib.h): set by backup_create and
 * backup_restore before they use it */
static const struct archivelib *al;

/* Each backend and the member its snapshot is (the header names the
 * backend by its ops' name). */
static const struct backend {
	const struct store_ops *ops;
	const char *member;
} backends[] = {
	{ &store_sqlite_ops, "store/state.db" },
	{ &store_pg_ops, "store/postgres.dump" },
};

static const struct backend *backend_of(const struct backup_settings *s)
{
	return &backends[s->store ? 1 : 0];
}

static const char *where_of(const struct backup_settings *s)
{
	return s->store ? s->store : s->data_dir;
}

/* What a backup holds of the data dir besides the store (backup.h): the
 * files and dirs the master keeps there. */
static const struct data_entry {
	const char *name;
	bool dir;
} data_entries[] = {
	{ "admin-token", false }, { "join-token", false }, { "tls", true },    { "logs", true },
	{ "code", true },         { "manifests", true },   { "blobs", true },
};

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

/* Files under the entries that are not state: a file being written whole
 * (NAME.tmp, write_file_atomic's) and a code upload in progress
 * (code/upload.XXXXXX, http.c's). */
static bool transient(const char *rel)
{
	return ends_with(rel, ".tmp") || !strncmp(rel, "code/upload.", 12);
}

/* Whether rel (a member's name after "data/") is a file a backup may hold:
 * one of data_entries' files, or a path under one of its dirs whose
 * components are [A-Za-z0-9._-], none starting with '.'. */
static bool data_name_ok(const char *rel)
{
	size_t top = strcspn(rel, "/");
	const struct data_entry *entry = NULL;
	int depth = 0;

	for (size_t i = 0; i < ARRAY_SIZE(data_entries); i++)
		if (strlen(data_entries[i].name) == top && !strncmp(rel, data_entries[i].name, top))
			entry = &data_entries[i];
	if (!entry || entry->dir != (rel[top] == '/'))
		return false;
	for (const char *p = rel;;) {
		size_t n = strcspn(p, "/");
		if (!n || p[0] == '.' || ++depth > DEPTH_MAX)
			return false;
		for (size_t i = 0; i < n; i++)
			if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
			      (p[i] >= '0' && p[i] <= '9') || p[i] == '.' || p[i] == '_' || p[i] == '-'))
				return false;
		p += n;
		if (!*p)
			return true;
		p++;
	}
}

/* ---- locks ---- */

int backup_lock_datadir(const char *data_dir, int *fd, struct errbuf *eb)
{
	*fd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0)
		return error(eb, yerr_of_errno(errno), "--data-dir '%s': %s", data_dir, strerror(errno));
	while (flock(*fd, LOCK_EX | LOCK_NB)) {
		int e = errno;
		if (e == EINTR)
			continue;
		close(*fd);
		*fd = -1;
		if (e == EWOULDBLOCK)
			return error(eb, YERR(CONFLICT),
				     "--data-dir '%s' is in use: a yard master runs on it, or yard admin restore"
				     " is writing it (each holds a lock on the directory)", data_dir);
		return error(eb, YERR(IO), "--data-dir '%s': cannot lock it: %s", data_dir, strerror(e));
	}
	return 0;
}

bool backup_gc_begin(const char *data_dir, int *fd)
{
	char *path = xasprintf("%s/" LOCK_FILE, data_dir);
	bool ok;

	*fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(path);
	if (*fd < 0)
		return errno == ENOENT; /* no backup ever ran here; unreadable: it might run */
	while ((ok = !flock(*fd, LOCK_EX | LOCK_NB)) == false && errno == EINTR)
		;
	if (!ok) {
		close(*fd);
		*fd = -1;
	}
	return ok;
}

void backup_gc_end(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* Gives path to the owner of the data dir when this runs as root and the
 * master does not (a master run as a service user must still be able to
 * write what a restore put back, or open the lock a backup made). */
static int give_to_owner(const char *data_dir, const char *path, struct errbuf *eb)
{
	struct stat sb;

	if (geteuid() != 0 || stat(data_dir, &sb) || sb.st_uid == 0)
		return 0;
	if (chown_tree(path, sb.st_uid, sb.st_gid))
		return error(eb, yerr_of_errno(errno), "cannot give '%s' to uid %u: %s", path,
			     (unsigned)sb.st_uid, strerror(errno));
	return 0;
}

/* ---- writing a backup ---- */

struct writer {
	struct archive *a;
	const char *file; /* the archive's name in messages */
	json_t *sums;     /* the trailer's members */
	uint64_t bytes;   /* of the members but the header and the trailer */
	char *buf;        /* COPY_BUF bytes */
};

/* Adds the member name of len bytes, read from fd (src in messages) or,
 * with fd -1, from data. */
static int add_member(struct writer *w, const char *name, int fd, const char *src, const void *data,
		      uint64_t len, time_t mtime, struct errbuf *eb)
{
	struct archive_entry *e = al->archive_entry_new();
	struct sha256_stream *h = sha256_stream_new();
	char hex[SHA256_HEX_LEN + 1];
	uint64_t done = 0;
	int ret = 0;

	al->archive_entry_set_pathname(e, name);
	al->archive_entry_set_filetype(e, AE_IFREG);
	al->archive_entry_set_perm(e, 0600);
	al->archive_entry_set_size(e, (la_int64_t)len);
	al->archive_entry_set_mtime(e, mtime, 0);
	if (al->archive_write_header(w->a, e) != ARCHIVE_OK) {
		ret = error(eb, YERR(IO), "cannot write '%s': %s", w->file, al->archive_error_string(w->a));
		goto out;
	}
	while (done < len) {
		size_t n = len - done > COPY_BUF ? COPY_BUF : (size_t)(len - done);
		const char *p = (const char *)data + done;
		if (fd >= 0) {
			ssize_t r = read(fd, w->buf, n);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				ret = error(eb, YERR(IO), "cannot read '%s': %s", src, strerror(errno));
				goto out;
			}
			if (r == 0) {
				ret = error(eb, YERR(IO), "'%s' shrank while it was copied: %" PRIu64 " of %" PRIu64
					    " bytes", src, done, len);
				goto out;
			}
			n = (size_t)r;
			p = w->buf;
		}
		sha256_stream_add(h, p, n);
		if (al->archive_write_data(w->a, p, n) != (la_ssize_t)n) {
			ret = error(eb, yerr_of_errno(al->archive_errno(w->a)), "cannot write '%s': %s", w->file,
				    al->archive_error_string(w->a));
			goto out;
		}
		done += n;
	}
	sha256_stream_finish(h, hex);
	h = NULL;
	json_array_append_new(w->sums, json_pack("{s:s, s:I, s:s}", "name", name, "size", (json_int_t)len,
						 "sha256", hex));
out:
	if (h)
		sha256_stream_free(h);
	al->archive_entry_free(e);
	return ret;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds the regular files at rel under the data dir (a file, or a dir and
 * everything under it, in name order), but transient ones. A file gone
 * meanwhile is one the snapshot does not refer to (backup.h). */
static int add_tree(struct writer *w, const char *data_dir, const char *rel, int depth, uint64_t *files,
		    struct errbuf *eb)
{
	char *path = xasprintf("%s/%s", data_dir, rel), *name = NULL, **names = NULL;
	size_t n = 0, alloc = 0;
	struct stat sb;
	DIR *d = NULL;
	int fd = -1, ret = 0;

	/* an entry itself may be a link (blobs/ moved to another disk), what is under it not */
	if (depth ? lstat(path, &sb) : stat(path, &sb)) {
		if (errno != ENOENT)
			ret = error(eb, YERR(IO), "cannot read '%s': %s", path, strerror(errno));
		goto out;
	}
	if (S_ISDIR(sb.st_mode) && depth < DEPTH_MAX) {
		struct dirent *de;
		if (!(d = opendir(path))) {
			ret = error(eb, YERR(IO), "cannot read '%s': %s", path, strerror(errno));
			goto out;
		}
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
				ALLOC_GROW(names, n + 1, alloc);
				names[n++] = xasprintf("%s/%s", rel, de->d_name);
			}
		sort_array(names, n, sizeof(*names), cmp_str);
		for (size_t i = 0; !ret && i < n; i++)
			ret = add_tree(w, data_dir, names[i], depth + 1, files, eb);
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		fprintf(stderr, "yard admin backup: '%s' left out: not a regular file\n", path);
		goto out;
	}
	if (transient(rel))
		goto out;
	if (!data_name_ok(rel)) {
		/* a restore would refuse the archive (read_archive) */
		fprintf(stderr, "yard admin backup: '%s' left out: not a name the master gives its files\n", path);
		goto out;
	}
	fd = open(path, depth ? O_RDONLY | O_CLOEXEC | O_NOFOLLOW : O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		goto out;
	if (fd < 0 || fstat(fd, &sb)) {
		ret = error(eb, YERR(IO), "cannot read '%s': %s", path, strerror(errno));
		goto out;
	}
	/* the size now: an appended log is copied up to here, at least what
	 * the snapshot knows */
	name = xasprintf("data/%s", rel);
	ret = add_member(w, name, fd, path, NULL, (uint64_t)sb.st_size, sb.st_mtime, eb);
	if (!ret) {
		w->bytes += (uint64_t)sb.st_size;
		(*files)++;
	}
out:
	if (fd >= 0)
		close(fd);
	if (d)
		closedir(d);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(name);
	free(path);
	return ret;
}

/* The compression the archive's file name asks for (backup.h). */
static int add_filter(struct archive *a, const char *file)
{
	if (ends_with(file, ".gz") || ends_with(file, ".tgz"))
		return al->archive_write_add_filter_gzip(a);
	if (ends_with(file, ".zst"))
		return al->archive_write_add_filter_zstd(a);
	return al->archive_write_add_filter_none(a);
}

/* The header member's JSON (caller frees). */
static char *header_json(const struct backend *be, int64_t version, const char *created,
			 const char *data_dir)
{
	char host[256] = "", *abs = realpath(data_dir, NULL), *text;
	json_t *h;

	gethostname(host, sizeof(host) - 1);
	h = json_pack("{s:i, s:s, s:I, s:s, s:s, s:s, s:s}", "format", BACKUP_FORMAT, "yard_version",
		      YARD_VERSION, "schema_version", (json_int_t)version, "store", be->ops->name,
		      "created_at", created, "host", host, "data_dir", abs ? abs : data_dir);
	text = json_dumps(h, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(h);
	free(abs);
	return text;
}

/* Opens DATA/backup.lock (made readable by the master, as its owner) and
 * holds it shared: the master removes no blob meanwhile (backup.h). A
 * removal in progress ends first. */
static int hold_gc_lock(const char *data_dir, int *fd, struct errbuf *eb)
{
	char *path = xasprintf("%s/" LOCK_FILE, data_dir);
	int ret = 0;

	*fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (*fd < 0) {
		ret = error(eb, yerr_of_errno(errno), "cannot open '%s': %s", path, strerror(errno));
		goto out;
	}
	if ((ret = give_to_owner(data_dir, path, eb)))
		goto out;
	while (flock(*fd, LOCK_SH))
		if (errno != EINTR) {
			ret = error(eb, YERR(IO), "cannot lock '%s': %s", path, strerror(errno));
			goto out;
		}
out:
	free(path);
	return ret;
}

int backup_create(const struct backup_settings *s, const char *file, struct backup_report *rep,
		  struct errbuf *eb)
{
	const struct backend *be = backend_of(s);
	uint64_t t0 = mono_us();
	char *tmp = xasprintf("%s.tmp", file), *snap = xasprintf("%s.store.tmp", file), *text = NULL;
	struct writer w = { .file = file, .sums = json_array(), .buf = xmalloc(COPY_BUF) };
	int64_t version = 0;
	int fd = -1, snap_fd = -1, lock_fd = -1, ret = 0;
	struct stat sb;

	memset(rep, 0, sizeof(*rep));
	if (!(al = archivelib_load(eb))) {
		ret = YERR(INTERNAL);
		goto out;
	}
	snprintf(rep->store, sizeof(rep->store), "%s", be->ops->name);
	snprintf(rep->yard_version, sizeof(rep->yard_version), "%s", YARD_VERSION);
	format_time_utc(wall_us(), rep->created_at, sizeof(rep->created_at));
	if (stat(s->data_dir, &sb)) {
		ret = error(eb, YERR(BAD_REQUEST), "--data-dir '%s': %s", s->data_dir, strerror(errno));
		goto out;
	}
	if (!S_ISDIR(sb.st_mode)) {
		ret = error(eb, YERR(BAD_REQUEST), "--data-dir '%s': not a directory", s->data_dir);
		goto out;
	}
	if (!lstat(file, &sb) || errno != ENOENT) {
		ret = error(eb, YERR(CONFLICT), "'%s' exists: a backup never replaces a file, name a new one",
			    file);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = error(eb, yerr_of_errno(errno), "cannot create '%s': %s", tmp, strerror(errno));
		goto out;
	}
	/* blobs that are files are copied after the snapshot: none may go meanwhile */
	if (be->ops->blobs_are_files && (ret = hold_gc_lock(s->data_dir, &lock_fd, eb)))
		goto out;
	unlink(snap); /* of a backup that crashed */
	if ((ret = be->ops->snapshot(where_of(s), snap, &version, eb)))
		goto out;
	rep->schema_version = version;
	snap_fd = open(snap, O_RDONLY | O_CLOEXEC);
	if (snap_fd < 0 || fstat(snap_fd, &sb)) {
		ret = error(eb, YERR(IO), "cannot read '%s': %s", snap, strerror(errno));
		goto out;
	}
	unlink(snap);
	rep->store_bytes = (uint64_t)sb.st_size;

	w.a = al->archive_write_new();
	if (al->archive_write_set_format_pax_restricted(w.a) != ARCHIVE_OK || add_filter(w.a, file) != ARCHIVE_OK ||
	    al->archive_write_set_bytes_in_last_block(w.a, 1) != ARCHIVE_OK ||
	    al->archive_write_open_fd(w.a, fd) != ARCHIVE_OK) {
		ret = error(eb, YERR(INTERNAL), "cannot start the archive '%s': %s", file,
			    al->archive_error_string(w.a));
		goto out;
	}
	text = header_json(be, version, rep->created_at, s->data_dir);
	if ((ret = add_member(&w, HEADER_NAME, -1, NULL, text, strlen(text), time(NULL), eb)) ||
	    (ret = add_member(&w, be->member, snap_fd, snap, NULL, rep->store_bytes, time(NULL), eb)))
		goto out;
	w.bytes += rep->store_bytes;
	for (size_t i = 0; !ret && i < ARRAY_SIZE(data_entries); i++)
		ret = add_tree(&w, s->data_dir, data_entries[i].name, 0, &rep->files, eb);
	if (ret)
		goto out;
	free(text);
	{
		json_t *t = json_pack("{s:i, s:O}", "format", BACKUP_FORMAT, "members", w.sums);
		text = json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_decref(t);
	}
	if ((ret = add_member(&w, TRAILER_NAME, -1, NULL, text, strlen(text), time(NULL), eb)))
		goto out;
	if (al->archive_write_close(w.a) != ARCHIVE_OK) {
		ret = error(eb, yerr_of_errno(al->archive_errno(w.a)), "cannot write '%s': %s", tmp,
			    al->archive_error_string(w.a));
		goto out;
	}
	if (fsync(fd) || fstat(fd, &sb)) {
		ret = error(eb, yerr_of_errno(errno), "cannot sync '%s': %s", tmp, strerror(errno));
		goto out;
	}
	rep->archive_bytes = (uint64_t)sb.st_size;
	close(fd);
	fd = -1;
	if (rename(tmp, file)) {
		ret = error(eb, yerr_of_errno(errno), "cannot rename '%s' to '%s': %s", tmp, file, strerror(errno));
		goto out;
	}
	if (fsync_parent_dir(file))
		ret = error(eb, YERR(IO), "cannot sync the directory of '%s': %s", file, strerror(errno));
	rep->bytes = w.bytes;
out:
	if (w.a)
		al->archive_write_free(w.a);
	if (fd >= 0)
		close(fd);
	if (ret)
		unlink(tmp);
	if (snap_fd >= 0)
		close(snap_fd);
	else
		unlink(snap);
	if (lock_fd >= 0)
		close(lock_fd);
	json_decref(w.sums);
	free(w.buf);
	free(text);
	free(tmp);
	free(snap);
	rep->seconds = (double)(mono_us() - t0) / 1e6;
	return ret;
}

/* ---- restoring one ---- */

struct reader {
	struct archive *a;
	const char *file;   /* the archive's name in messages */
	char *stage;        /* owned: where members are written, DATA/.restore-XXXXXX */
	json_t *seen;       /* name -> [size, sha256] of each member read but the trailer */
	char *buf;          /* COPY_BUF bytes */
};

/* Reads the current member name: into mem, at most max bytes, or with mem
 * NULL into the new file path. OUT size, hex (its sha256). */
static int read_member(struct reader *r, const char *name, struct strbuf *mem, size_t max, const char *path,
		       uint64_t *size, char hex[SHA256_HEX_LEN + 1], struct errbuf *eb)
{
	struct sha256_stream *h = sha256_stream_new();
	int fd = -1, ret = 0;

	*size = 0;
	if (path) {
		char *dir = xstrdup(path);
		*strrchr(dir, '/') = 0;
		if (mkdir_p(dir, 0700) ||
		    (fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
			ret = error(eb, yerr_of_errno(errno), "cannot write '%s': %s", path, strerror(errno));
		free(dir);
		if (ret)
			goto out;
	}
	for (;;) {
		la_ssize_t got = al->archive_read_data(r->a, r->buf, COPY_BUF);
		if (got < 0) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s': cannot read its member '%s': %s (the archive is"
				    " cut short or damaged)", r->file, name, al->archive_error_string(r->a));
			goto out;
		}
		if (!got)
			break;
		sha256_stream_add(h, r->buf, (size_t)got);
		*size += (uint64_t)got;
		if (mem && strbuf_add_capped(mem, r->buf, (size_t)got, max)) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s': its member '%s' is larger than %zu bytes", r->file,
				    name, max);
			goto out;
		}
		if (!mem && write_all(fd, r->buf, (size_t)got)) {
			ret = error(eb, yerr_of_errno(errno), "cannot write '%s': %s", path, strerror(errno));
			goto out;
		}
	}
	if (fd >= 0 && fsync(fd))
		ret = error(eb, yerr_of_errno(errno), "cannot sync '%s': %s", path, strerror(errno));
out:
	if (fd >= 0)
		close(fd);
	sha256_stream_finish(h, hex);
	return ret;
}

/* Checks the header against what this yard and s can restore. */
static int check_header(const struct reader *r, const struct backend *be, const struct strbuf *text,
			struct backup_report *rep, struct errbuf *eb)
{
	json_t *h = json_loadb(text->buf, text->len, 0, NULL);
	json_t *format = json_object_get(h, "format"), *version = json_object_get(h, "schema_version");
	const char *store = json_string_value(json_object_get(h, "store"));
	const char *made_by = json_string_value(json_object_get(h, "yard_version"));
	const char *created = json_string_value(json_object_get(h, "created_at"));
	int ret = 0;

	if (!json_is_object(h) || !json_is_integer(format) || !json_is_integer(version) || !store) {
		ret = error(eb, YERR(BAD_REQUEST),
			    "'%s': its header " HEADER_NAME " is not a yard backup's: expected JSON with format,"
			    " schema_version and store", r->file);
		goto out;
	}
	if (json_integer_value(format) != BACKUP_FORMAT) {
		ret = error(eb, YERR(BAD_REQUEST), "'%s': format %" JSON_INTEGER_FORMAT
			    " of " HEADER_NAME " is not %d, the one this yard reads", r->file,
			    json_integer_value(format), BACKUP_FORMAT);
		goto out;
	}
	if (strcmp(store, be->ops->name)) {
		ret = error(eb, YERR(BAD_REQUEST), "'%s': store '%s' of " HEADER_NAME " is not the kind given here"
			    " (%s): restore it %s", r->file, store, be->ops->name,
			    be->ops == &store_pg_ops ? "without --store, into a data dir"
						     : "with --store CONNINFO, into a PostgreSQL database");
		goto out;
	}
	rep->schema_version = json_integer_value(version);
	if (rep->schema_version < 0) {
		ret = error(eb, YERR(BAD_REQUEST), "'%s': schema_version %" PRId64 " of " HEADER_NAME
			    " is not a schema version", r->file, rep->schema_version);
		goto out;
	}
	if (rep->schema_version > STORE_SCHEMA_VERSION) {
		ret = error(eb, YERR(BAD_REQUEST), "'%s': schema_version %" PRId64 " of " HEADER_NAME
			    " is newer than this yard's %d: restore it with the yard that made it (%s) or a"
			    " newer one", r->file, rep->schema_version, STORE_SCHEMA_VERSION,
			    made_by ? made_by : "?");
		goto out;
	}
	snprintf(rep->store, sizeof(rep->store), "%s", store);
	snprintf(rep->created_at, sizeof(rep->created_at), "%s", created ? created : "?");
	snprintf(rep->yard_version, sizeof(rep->yard_version), "%s", made_by ? made_by : "?");
out:
	json_decref(h);
	return ret;
}

/* Checks the trailer: it lists exactly the members read, with their sizes
 * and digests. */
static int check_trailer(const struct reader *r, const struct strbuf *text, struct errbuf *eb)
{
	json_t *t = json_loadb(text->buf, text->len, 0, NULL), *members = json_object_get(t, "members"), *m;
	size_t i;
	int ret = 0;

	if (!json_is_array(members)) {
		ret = error(eb, YERR(BAD_REQUEST), "'%s': its trailer " TRAILER_NAME " is not a yard backup's:"
			    " expected JSON with members", r->file);
		goto out;
	}
	json_array_foreach(members, i, m) {
		const char *name = json_string_value(json_object_get(m, "name"));
		const char *sha = json_string_value(json_object_get(m, "sha256"));
		json_t *size = json_object_get(m, "size"), *got = name ? json_object_get(r->seen, name) : NULL;
		if (!name || !sha || !json_is_integer(size)) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s': members[%zu] of " TRAILER_NAME
				    ": expected name, size and sha256", r->file, i);
			goto out;
		}
		if (!got) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s': member '%s' that " TRAILER_NAME
				    " lists is missing", r->file, name);
			goto out;
		}
		if (json_integer_value(json_array_get(got, 0)) != json_integer_value(size)) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s': member '%s' holds %" JSON_INTEGER_FORMAT
				    " bytes, " TRAILER_NAME " says %" JSON_INTEGER_FORMAT, r->file, name,
				    json_integer_value(json_array_get(got, 0)), json_integer_value(size));
			goto out;
		}
		if (strcmp(json_string_value(json_array_get(got, 1)), sha)) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s': member '%s' has sha256 %s, " TRAILER_NAME
				    " says %s: the archive is damaged", r->file, name,
				    json_string_value(json_array_get(got, 1)), sha);
			goto out;
		}
	}
	if (json_array_size(members) != json_object_size(r->seen))
		ret = error(eb, YERR(BAD_REQUEST), "'%s' holds %zu members, " TRAILER_NAME " lists %zu",
			    r->file, json_object_size(r->seen), json_array_size(members));
out:
	json_decref(t);
	return ret;
}

/* Reads the whole archive into r->stage, checking it (backup_restore). */
static int read_archive(struct reader *r, const struct backend *be, struct backup_report *rep,
			struct errbuf *eb)
{
	struct archive_entry *e;
	struct strbuf text = STRBUF_INIT;
	bool header = false, trailer = false;
	char *path = NULL, hex[SHA256_HEX_LEN + 1];
	uint64_t size;
	int rc, ret = 0;

	while ((rc = al->archive_read_next_header(r->a, &e)) == ARCHIVE_OK) {
		const char *name = al->archive_entry_pathname(e);
		bool is_data = name && !strncmp(name, "data/", 5);
		if (!name) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s': a member without a name", r->file);
			goto out;
		}
		if (trailer) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s': member '%s' after " TRAILER_NAME
				    ", which must be the last", r->file, name);
			goto out;
		}
		if (!header != !strcmp(name, HEADER_NAME)) {
			ret = error(eb, YERR(BAD_REQUEST), header ? "'%s': a second member '%s'" :
				    "'%s': its first member is '%s', not " HEADER_NAME ": not a yard backup",
				    r->file, name);
			goto out;
		}
		if (al->archive_entry_filetype(e) != AE_IFREG) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s': member '%s' is not a regular file", r->file, name);
			goto out;
		}
		if (json_object_get(r->seen, name)) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s': member '%s' comes twice", r->file, name);
			goto out;
		}
		if (strcmp(name, HEADER_NAME) && strcmp(name, TRAILER_NAME) && strcmp(name, be->member) &&
		    !(is_data && data_name_ok(name + 5))) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s': member '%s' is not one a yard backup holds: a name"
				    " outside the data dir's entries", r->file,
				    name);
			goto out;
		}
		strbuf_setlen(&text, 0);
		free(path);
		path = NULL;
		if (!strcmp(name, HEADER_NAME) || !strcmp(name, TRAILER_NAME))
			ret = read_member(r, name, &text, header ? TRAILER_MAX : HEADER_MAX, NULL, &size, hex, eb);
		else
			ret = read_member(r, name, NULL, 0, path = xasprintf("%s/%s", r->stage, name), &size, hex, eb);
		if (ret)
			goto out;
		if (al->archive_entry_size_is_set(e) && (uint64_t)al->archive_entry_size(e) != size) {
			ret = error(eb, YERR(BAD_REQUEST), "'%s': member '%s' holds %" PRIu64 " bytes, its header says"
				    " %" PRId64, r->file, name, size, (int64_t)al->archive_entry_size(e));
			goto out;
		}
		if (!header) {
			if ((ret = check_header(r, be, &text, rep, eb)))
				goto out;
			header = true;
		} else if (!strcmp(name, TRAILER_NAME)) {
			if ((ret = check_trailer(r, &text, eb)))
				goto out;
			trailer = true;
			continue;
		}
		json_object_set_new(r->seen, name, json_pack("[I, s]", (json_int_t)size, hex));
		if (is_data) {
			rep->files++;
			rep->bytes += size;
		} else if (!strcmp(name, be->member)) {
			rep->store_bytes = size;
			rep->bytes += size;
		}
	}
	if (rc != ARCHIVE_EOF) {
		ret = error(eb, YERR(BAD_REQUEST), "'%s': cannot read it: %s (not a yard backup, or one cut short"
			    " or damaged)", r->file, al->archive_error_string(r->a));
		goto out;
	}
	if (!header)
		ret = error(eb, YERR(BAD_REQUEST), "'%s' is empty: not a yard backup", r->file);
	else if (!trailer)
		ret = error(eb, YERR(BAD_REQUEST), "'%s' ends before its trailer " TRAILER_NAME
			    ": the archive is cut short", r->file);
	else if (!json_object_get(r->seen, be->member))
		ret = error(eb, YERR(BAD_REQUEST), "'%s' holds no store snapshot '%s'", r->file, be->member);
out:
	strbuf_release(&text);
	free(path);
	return ret;
}

/* Whether the data dir entry at path holds anything: a file, or a dir that
 * is not empty. */
static bool entry_in_use(const char *path)
{
	struct stat sb;
	struct dirent *de;
	DIR *d;
	bool used = false;

	if (lstat(path, &sb))
		return false;
	if (!S_ISDIR(sb.st_mode) || !(d = opendir(path)))
		return true;
	while (!used && (de = readdir(d)))
		used = strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return used;
}

/* Removes what restores that stopped half-way left (their stages). */
static void remove_stages(const char *data_dir)
{
	DIR *d = opendir(data_dir);
	struct dirent *de;

	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, STAGE_PREFIX, strlen(STAGE_PREFIX))) {
			char *p = xasprintf("%s/%s", data_dir, de->d_name);
			rm_rf(p);
			free(p);
		}
	if (d)
		closedir(d);
}

/* The name the state a forced restore replaces is kept under: new in the
 * data dir (DATA/NAME). */
static void aside_name(const char *data_dir, char out[64])
{
	char when[32];

	format_time_utc(wall_us(), when, sizeof(when));
	for (char *p = when; *p; p++)
		if (*p == '-' || *p == ':')
			memmove(p, p + 1, strlen(p));
	for (int i = 1;; i++) {
		char *p;
		bool taken;
		if (i == 1)
			snprintf(out, 64, "before-restore-%s", when);
		else
			snprintf(out, 64, "before-restore-%s-%d", when, i);
		p = xasprintf("%s/%s", data_dir, out);
		taken = path_exists(p);
		free(p);
		if (!taken)
			return;
	}
}

/* Moves the data dir's entries aside (force) and the staged ones into it. */
static int install_entries(const char *data_dir, const char *stage, const char *aside, struct errbuf *eb)
{
	int ret = 0;

	for (size_t i = 0; !ret && i < ARRAY_SIZE(data_entries); i++) {
		char *dst = xasprintf("%s/%s", data_dir, data_entries[i].name);
		char *src = xasprintf("%s/data/%s", stage, data_entries[i].name);
		char *old = aside ? xasprintf("%s/%s/%s", data_dir, aside, data_entries[i].name) : NULL;
		struct stat sb;
		if (!lstat(dst, &sb)) {
			if (!entry_in_use(dst) && S_ISDIR(sb.st_mode)) {
				if (rmdir(dst))
					ret = error(eb, YERR(IO), "cannot remove '%s': %s", dst, strerror(errno));
			} else if (!old) {
				ret = error(eb, YERR(CONFLICT), "'%s' exists", dst);
			} else {
				char *dir = xasprintf("%s/%s", data_dir, aside);
				if (mkdir_p(dir, 0700) || rename(dst, old))
					ret = error(eb, yerr_of_errno(errno), "cannot move '%s' to '%s': %s", dst, old,
						    strerror(errno));
				free(dir);
			}
		}
		if (!ret && path_exists(src) && rename(src, dst))
			ret = error(eb, yerr_of_errno(errno), "cannot move '%s' to '%s': %s", src, dst, strerror(errno));
		if (!ret && path_exists(dst))
			ret = give_to_owner(data_dir, dst, eb);
		free(dst);
		free(src);
		free(old);
	}
	return ret;
}

int backup_restore(const struct backup_settings *s, const char *file, bool force, struct backup_report *rep,
		   struct errbuf *eb)
{
	const struct backend *be = backend_of(s);
	uint64_t t0 = mono_us();
	struct reader r = { .file = file, .seen = json_object(), .buf = xmalloc(COPY_BUF) };
	struct strbuf used = STRBUF_INIT;
	char *snap = NULL, *db = NULL;
	bool held = false;
	int lock_fd = -1, fd = -1, ret = 0;

	memset(rep, 0, sizeof(*rep));
	if (!(al = archivelib_load(eb))) {
		ret = YERR(INTERNAL);
		goto out;
	}
	if (mkdir_p(s->data_dir, 0700)) {
		ret = error(eb, yerr_of_errno(errno), "--data-dir '%s': cannot create it: %s", s->data_dir,
			    strerror(errno));
		goto out;
	}
	if ((ret = backup_lock_datadir(s->data_dir, &lock_fd, eb)))
		goto out;
	remove_stages(s->data_dir);
	/* refused early, before reading the archive, when not forced */
	if ((ret = be->ops->held(where_of(s), &held, eb)))
		goto out;
	for (size_t i = 0; i < ARRAY_SIZE(data_entries); i++) {
		char *p = xasprintf("%s/%s", s->data_dir, data_entries[i].name);
		if (entry_in_use(p))
			strbuf_addf(&used, "%s%s%s", used.len ? ", " : "", data_entries[i].name,
				    data_entries[i].dir ? "/" : "");
		free(p);
	}
	if (!force && held && s->store) {
		char *name = store_pg_display(s->store);
		ret = error(eb, YERR(CONFLICT), "--store '%s' holds a yard store already (a table schema_version):"
			    " restore into an empty database, or give --force to move its tables aside", name);
		free(name);
		goto out;
	}
	if (!force && (held || used.len)) {
		ret = error(eb, YERR(CONFLICT), "--data-dir '%s' holds a master's state already (%s%s%s):"
			    " restore into a new data dir, or give --force to move that state aside",
			    s->data_dir, held ? "state.db" : "", held && used.len ? ", " : "", used.buf);
		goto out;
	}
	r.stage = xasprintf("%s/" STAGE_PREFIX "XXXXXX", s->data_dir);
	if (!mkdtemp(r.stage)) {
		ret = error(eb, yerr_of_errno(errno), "cannot create '%s': %s", r.stage, strerror(errno));
		goto out;
	}
	r.a = al->archive_read_new();
	al->archive_read_support_filter_all(r.a);
	al->archive_read_support_format_tar(r.a);
	if ((fd = open(file, O_RDONLY | O_CLOEXEC)) < 0) {
		ret = error(eb, yerr_of_errno(errno), "cannot open '%s': %s", file, strerror(errno));
		goto out;
	}
	if (al->archive_read_open_fd(r.a, fd, 65536) != ARCHIVE_OK) {
		ret = error(eb, YERR(BAD_REQUEST), "'%s': %s: not a yard backup", file, al->archive_error_string(r.a));
		goto out;
	}
	if ((ret = read_archive(&r, be, rep, eb)))
		goto out;
	/* the archive is whole: from here on the data dir and the store change */
	if (force && (held || used.len))
		aside_name(s->data_dir, rep->aside);
	snap = xasprintf("%s/%s", r.stage, be->member);
	if ((ret = be->ops->restore(where_of(s), snap, rep->aside[0] ? rep->aside : NULL, eb)))
		goto out;
	db = xasprintf("%s/state.db", s->data_dir);
	if (!s->store && (ret = give_to_owner(s->data_dir, db, eb)))
		goto out;
	if ((ret = install_entries(s->data_dir, r.stage, rep->aside[0] ? rep->aside : NULL, eb)))
		goto out;
	if (fsync_parent_dir(db))
		ret = error(eb, YERR(IO), "cannot sync '%s': %s", s->data_dir, strerror(errno));
out:
	if (r.a)
		al->archive_read_free(r.a);
	if (fd >= 0)
		close(fd);
	if (r.stage)
		rm_rf(r.stage);
	if (lock_fd >= 0)
		close(lock_fd);
	json_decref(r.seen);
	strbuf_release(&used);
	free(r.stage);
	free(r.buf);
	free(snap);
	free(db);
	rep->seconds = (double)(mono_us() - t0) / 1e6;
	return ret;
}
