#include "base/compat.h"
#include "common/codepack.h"

#include <dirent.h>
#include <fnmatch.h>

#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/xalloc.h"
#include "common/archivelib.h"

/* libarchive once loaded (common/archivelib.h): set by codepack_create and
 * codepack_extract before they use it */
static const struct archivelib *al;

/* Symlink chains longer than this are treated as loops, as the kernel does. */
#define MAX_LINK_HOPS 40

/*
 * One .yardignore pattern. dir_only patterns ("build/") match directories
 * only; anchored patterns ("/out", "docs/tmp") match the whole path relative
 * to the packed directory, the others match the last component at any depth.
 */
struct ignore_rule {
	char *pattern; /* owned, without the leading and trailing '/' */
	bool dir_only;
	bool anchored;
};

struct ignore_list {
	struct ignore_rule *rules; /* owned */
	size_t nr, alloc;
};

static void ignore_list_release(struct ignore_list *il)
{
	for (size_t i = 0; i < il->nr; i++)
		free(il->rules[i].pattern);
	free(il->rules);
	il->rules = NULL;
	il->nr = il->alloc = 0;
}

static void ignore_list_parse(struct ignore_list *il, const char *text, size_t len)
{
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *s = p, *e = eol ? eol : end;
		struct ignore_rule r = { NULL, false, false };

		p = eol ? eol + 1 : end;
		while (e > s && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (e == s || *s == '#')
			continue;
		if (e[-1] == '/') {
			r.dir_only = true;
			e--;
		}
		if (s < e && *s == '/') {
			r.anchored = true;
			s++;
		}
		if (s == e)
			continue;
		if (memchr(s, '/', (size_t)(e - s)))
			r.anchored = true;
		r.pattern = xstrndup(s, (size_t)(e - s));
		ALLOC_GROW(il->rules, il->nr + 1, il->alloc);
		il->rules[il->nr++] = r;
	}
}

/* ignored: whether rel (a path relative to the packed dir) is excluded. */
static bool ignored(const struct ignore_list *il, const char *rel, const char *base, bool is_dir)
{
	if (!strcmp(base, ".git"))
		return true;
	for (size_t i = 0; i < il->nr; i++) {
		const struct ignore_rule *r = &il->rules[i];
		if (r->dir_only && !is_dir)
			continue;
		if (r->anchored ? fnmatch(r->pattern, rel, FNM_PATHNAME) == 0
				: fnmatch(r->pattern, base, 0) == 0)
			return true;
	}
	return false;
}

/* Names are sorted bytewise (not by locale) so that digests are reproducible. */
static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * One walk over the code below a directory: what .yardignore keeps (and
 * never .git), in the archive's order (sorted names, each directory before
 * what it holds). visit sees each entry once; packing and fingerprinting
 * are two visitors of the same walk, so they never disagree on what the
 * code is.
 */
struct walk {
	const char *root;     /* the packed directory */
	struct ignore_list ignore;
	int (*visit)(struct walk *w, const char *path, const char *rel, const struct stat *st);
	struct errbuf *eb;
};

/* walk_open checks that dir is a directory and reads its .yardignore. */
static int walk_open(struct walk *w, const char *dir, struct errbuf *eb)
{
	struct strbuf text = STRBUF_INIT;
	char *ignore_path = xasprintf("%s/.yardignore", dir);
	struct stat st;
	int ret = 0;

	memset(&w->ignore, 0, sizeof(w->ignore));
	w->root = dir;
	w->eb = eb;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		ret = error(eb, YERR(IO), "cannot pack '%s': %s", dir,
			    errno ? strerror(errno) : "not a directory");
	} else if (strbuf_read_file(&text, ignore_path, 1 << 20) < 0) {
		if (errno != ENOENT)
			ret = error(eb, YERR(IO), "cannot read '%s': %s", ignore_path, strerror(errno));
	} else {
		ignore_list_parse(&w->ignore, text.buf, text.len);
	}
	strbuf_release(&text);
	free(ignore_path);
	return ret;
}

static void walk_release(struct walk *w)
{
	ignore_list_release(&w->ignore);
}

/* walk_dir visits the entries below path (rel is its name in the archive, "" at the root). */
static int walk_dir(struct walk *w, const char *path, const char *rel)
{
	DIR *d = opendir(path);
	char **names = NULL;
	size_t nr = 0, alloc = 0;
	struct dirent *de;
	int ret = 0;

	if (!d)
		return error(w->eb, YERR(IO), "cannot open directory '%s': %s", path,
			     strerror(errno));
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ALLOC_GROW(names, nr + 1, alloc);
		names[nr++] = xstrdup(de->d_name);
	}
	closedir(d);
	if (nr)
		sort_array(names, nr, sizeof(*names), cmp_names);

	for (size_t i = 0; i < nr && !ret; i++) {
		char *full = xasprintf("%s/%s", path, names[i]);
		char *sub = *rel ? xasprintf("%s/%s", rel, names[i]) : xstrdup(names[i]);
		struct stat st;

		if (lstat(full, &st) < 0) {
			ret = error(w->eb, YERR(IO), "cannot stat '%s': %s", full, strerror(errno));
		} else if ((S_ISDIR(st.st_mode) || S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) &&
			   !ignored(&w->ignore, sub, names[i], S_ISDIR(st.st_mode))) {
			/* sockets, fifos and devices are not code: skipped */
			ret = w->visit(w, full, sub, &st);
			if (!ret && S_ISDIR(st.st_mode))
				ret = walk_dir(w, full, sub);
		}
		free(full);
		free(sub);
	}
	for (size_t i = 0; i < nr; i++)
		free(names[i]);
	free(names);
	return ret;
}

/* Packing: a walk that writes each entry into the archive. */
struct pack {
	struct walk w;        /* first: a visit's walk is its pack */
	struct archive *ar;
	uint64_t max_bytes;   /* 0 = no limit */
	uint64_t total;       /* bytes of file content packed so far */
};

static int pack_file(struct pack *pk, const char *path, const char *rel, const struct stat *st)
{
	char buf[65536];
	uint64_t left = (uint64_t)st->st_size;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int ret = 0;

	if (fd < 0)
		return error(pk->w.eb, YERR(IO), "cannot open '%s': %s", path, strerror(errno));
	while (left > 0) {
		ssize_t n = read(fd, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = error(pk->w.eb, YERR(IO), "cannot read '%s': %s", path, strerror(errno));
			goto out_close;
		}
		if (n == 0) {
			ret = error(pk->w.eb, YERR(IO), "'%s' shrank while it was being packed", rel);
			goto out_close;
		}
		if (al->archive_write_data(pk->ar, buf, (size_t)n) != n) {
			ret = error(pk->w.eb, YERR(INTERNAL), "cannot pack '%s': %s", rel,
				    al->archive_error_string(pk->ar));
			goto out_close;
		}
		left -= (uint64_t)n;
	}
out_close:
	close(fd);
	return ret;
}

static int pack_entry(struct walk *w, const char *path, const char *rel, const struct stat *st)
{
	struct pack *pk = (struct pack *)w;
	struct archive_entry *e = al->archive_entry_new();
	char *target = NULL;
	int ret = 0;

	al->archive_entry_set_pathname(e, rel);
	al->archive_entry_set_uid(e, 0);
	al->archive_entry_set_gid(e, 0);
	al->archive_entry_set_mtime(e, 0, 0);
	if (S_ISDIR(st->st_mode)) {
		al->archive_entry_set_filetype(e, AE_IFDIR);
		al->archive_entry_set_perm(e, st->st_mode & 0777);
	} else if (S_ISLNK(st->st_mode)) {
		struct strbuf sb = STRBUF_INIT;
		ssize_t n;
		strbuf_grow(&sb, (size_t)st->st_size + 256);
		n = readlink(path, sb.buf, sb.alloc - 1);
		if (n < 0) {
			strbuf_release(&sb);
			ret = error(w->eb, YERR(IO), "cannot read link '%s': %s", path,
				    strerror(errno));
			goto out;
		}
		strbuf_setlen(&sb, (size_t)n);
		target = strbuf_detach(&sb, NULL);
		al->archive_entry_set_filetype(e, AE_IFLNK);
		al->archive_entry_set_perm(e, 0777);
		al->archive_entry_set_symlink(e, target);
	} else {
		pk->total += (uint64_t)st->st_size;
		if (pk->max_bytes && pk->total > pk->max_bytes) {
			ret = error(w->eb, YERR(TOO_LARGE),
				    "'%s' holds more than %" PRIu64 " bytes of code (see .yardignore)",
				    w->root, pk->max_bytes);
			goto out;
		}
		al->archive_entry_set_filetype(e, AE_IFREG);
		al->archive_entry_set_perm(e, st->st_mode & 0777);
		al->archive_entry_set_size(e, st->st_size);
	}
	if (al->archive_write_header(pk->ar, e) != ARCHIVE_OK) {
		ret = error(w->eb, YERR(INTERNAL), "cannot pack '%s': %s", rel,
			    al->archive_error_string(pk->ar));
		goto out;
	}
	if (S_ISREG(st->st_mode))
		ret = pack_file(pk, path, rel, st);
out:
	free(target);
	al->archive_entry_free(e);
	return ret;
}

static la_ssize_t write_to_strbuf(struct archive *a, void *arg, const void *buf, size_t len)
{
	strbuf_add(arg, buf, len);
	return (la_ssize_t)len;
}

int codepack_create(const char *dir, struct strbuf *out, uint64_t max_bytes, struct errbuf *eb)
{
	struct pack pk = { .w = { .visit = pack_entry }, .max_bytes = max_bytes };
	size_t start = out->len;
	int ret;

	if (!(al = archivelib_load(eb)))
		return YERR(INTERNAL);
	if ((ret = walk_open(&pk.w, dir, eb)))
		goto out;
	pk.ar = al->archive_write_new();
	if (al->archive_write_set_format_pax_restricted(pk.ar) != ARCHIVE_OK ||
	    al->archive_write_add_filter_gzip(pk.ar) != ARCHIVE_OK ||
	    /* no timestamp in the gzip header: same tree, same bytes */
	    al->archive_write_set_filter_option(pk.ar, "gzip", "timestamp", NULL) < ARCHIVE_WARN ||
	    al->archive_write_set_bytes_in_last_block(pk.ar, 1) != ARCHIVE_OK ||
	    al->archive_write_open2(pk.ar, out, NULL, write_to_strbuf, NULL, NULL) != ARCHIVE_OK) {
		ret = error(eb, YERR(INTERNAL), "cannot start an archive: %s",
			    al->archive_error_string(pk.ar));
		goto out_free;
	}
	ret = walk_dir(&pk.w, dir, "");
	if (!ret && al->archive_write_close(pk.ar) != ARCHIVE_OK)
		ret = error(eb, YERR(INTERNAL), "cannot finish the archive of '%s': %s", dir,
			    al->archive_error_string(pk.ar));
out_free:
	al->archive_write_free(pk.ar);
	if (ret)
		strbuf_setlen(out, start);
out:
	walk_release(&pk.w);
	return ret;
}

/* Fingerprinting: a walk that hashes what each entry is, not what it holds. */
struct print {
	struct walk w;            /* first: a visit's walk is its print */
	struct sha256_stream *h;
	int64_t newest_ns;        /* the latest change of any entry (mtime, ctime) */
};

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

static int print_entry(struct walk *w, const char *path, const char *rel, const struct stat *st)
{
	struct print *p = (struct print *)w;
	int64_t mtime = ts_ns(&st->st_mtim), ctime = ts_ns(&st->st_ctim);
	char line[160];
	int n = snprintf(line, sizeof(line), "%o %lld %lld %lld %llu %llu\n", (unsigned)st->st_mode,
			 (long long)st->st_size, (long long)mtime, (long long)ctime,
			 (unsigned long long)st->st_dev, (unsigned long long)st->st_ino);

	sha256_stream_add(p->h, rel, strlen(rel) + 1); /* with its NUL: names cannot run on */
	sha256_stream_add(p->h, line, (size_t)n);
	if (mtime > p->newest_ns)
		p->newest_ns = mtime;
	if (ctime > p->newest_ns)
		p->newest_ns = ctime;
	return 0;
}

int codepack_fingerprint(const char *dir, char out[SHA256_HEX_LEN + 1], bool *settled,
			 struct errbuf *eb)
{
	struct print p = { .w = { .visit = print_entry }, .h = sha256_stream_new() };
	struct timespec now;
	int ret;

	clock_gettime(CLOCK_REALTIME, &now);
	if (!(ret = walk_open(&p.w, dir, eb)))
		ret = walk_dir(&p.w, dir, "");
	walk_release(&p.w);
	if (ret) {
		sha256_stream_free(p.h);
		return ret;
	}
	sha256_stream_finish(p.h, out);
	*settled = p.newest_ns < ts_ns(&now) - CODEPACK_SETTLE_NS;
	return 0;
}

/*
 * Extraction. A first pass reads every entry's header and checks names and
 * link targets; only an archive that passes is written, by a second pass.
 */

struct link_map {
	char **paths;   /* owned, normalised entry paths of symlinks */
	char **targets; /* owned, their targets */
	size_t nr, alloc, talloc;
};

static void link_map_release(struct link_map *m)
{
	for (size_t i = 0; i < m->nr; i++) {
		free(m->paths[i]);
		free(m->targets[i]);
	}
	free(m->paths);
	free(m->targets);
	memset(m, 0, sizeof(*m));
}

static const char *link_map_get(const struct link_map *m, const char *path)
{
	for (size_t i = m->nr; i-- > 0;)
		if (!strcmp(m->paths[i], path))
			return m->targets[i];
	return NULL;
}

/* entry_path_ok: a relative name without ".." components. Empty and "."
 * components are allowed ("./a" is how many tar tools write names). */
static bool entry_path_ok(const char *name)
{
	const char *p = name;

	if (!name || !*name || *name == '/')
		return false;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return false;
		p += n;
		if (*p == '/')
			p++;
	}
	return true;
}

/* normalise: drop "." and empty components ("./a//b/" -> "a/b"); caller frees. */
static char *normalise(const char *name)
{
	struct strbuf sb = STRBUF_INIT;
	const char *p = name;

	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (n && !(n == 1 && *p == '.')) {
			if (sb.len)
				strbuf_addch(&sb, '/');
			strbuf_add(&sb, p, n);
		}
		p += n;
		if (*p == '/')
			p++;
	}
	return strbuf_detach(&sb, NULL);
}

/*
 * resolves_inside: whether following the symlink target from the directory
 * that holds link (both relative to dest) stays inside dest, following the
 * archive's other symlinks on the way, as the kernel would. Components are
 * kept on a stack of offsets into one strbuf.
 */
static bool resolves_inside(const struct link_map *m, const char *link, const char *target)
{
	struct strbuf path = STRBUF_INIT, todo = STRBUF_INIT;
	const char *slash = strrchr(link, '/');
	unsigned hops = 0;
	bool ok = true;

	if (*target == '/')
		return false;
	/* todo: the components still to walk, starting in link's directory */
	if (slash)
		strbuf_add(&todo, link, (size_t)(slash - link) + 1);
	strbuf_addstr(&todo, target);

	while (todo.len && ok) {
		char *p = todo.buf;
		char *sep = strchr(p, '/');
		size_t n = sep ? (size_t)(sep - p) : strlen(p);
		char *comp = xstrndup(p, n);
		char *rest = xstrdup(sep ? sep + 1 : "");

		strbuf_reset(&todo);
		strbuf_addstr(&todo, rest);
		free(rest);
		if (!n || !strcmp(comp, ".")) {
			/* nothing */
		} else if (!strcmp(comp, "..")) {
			char *up = strrchr(path.buf, '/');
			if (!path.len)
				ok = false;
			else
				strbuf_setlen(&path, up ? (size_t)(up - path.buf) : 0);
		} else {
			size_t before = path.len;
			const char *t;
			if (path.len)
				strbuf_addch(&path, '/');
			strbuf_addstr(&path, comp);
			t = link_map_get(m, path.buf);
			if (t) {
				struct strbuf next = STRBUF_INIT;
				if (*t == '/' || ++hops > MAX_LINK_HOPS) {
					ok = false;
				} else {
					/* the link's target replaces it, from its directory */
					strbuf_setlen(&path, before);
					strbuf_addf(&next, "%s/%s", t, todo.buf);
					strbuf_reset(&todo);
					strbuf_add(&todo, next.buf, next.len);
				}
				strbuf_release(&next);
			}
		}
		free(comp);
	}
	strbuf_release(&path);
	strbuf_release(&todo);
	return ok;
}

static int open_reader(const char *archive_path, struct archive **out, struct errbuf *eb)
{
	struct archive *a = al->archive_read_new();

	al->archive_read_support_filter_gzip(a);
	al->archive_read_support_filter_none(a);
	al->archive_read_support_format_tar(a);
	if (al->archive_read_open_filename(a, archive_path, 65536) != ARCHIVE_OK) {
		int ret = error(eb, YERR(BAD_REQUEST), "cannot open archive '%s': %s",
				archive_path, al->archive_error_string(a));
		al->archive_read_free(a);
		return ret;
	}
	*out = a;
	return 0;
}

/* check_archive: the first pass. */
static int check_archive(const char *archive_path, struct errbuf *eb)
{
	struct archive *a = NULL;
	struct archive_entry *e;
	struct link_map links;
	int ret, r;

	memset(&links, 0, sizeof(links));
	ret = open_reader(archive_path, &a, eb);
	if (ret)
		return ret;
	while ((r = al->archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = al->archive_entry_pathname(e);
		const char *hard = al->archive_entry_hardlink(e);
		mode_t type = al->archive_entry_filetype(e);

		if (!entry_path_ok(name)) {
			ret = error(eb, YERR(BAD_REQUEST), "archive entry '%s' is outside the destination",
				    name ? name : "");
			goto out;
		}
		if (hard && !entry_path_ok(hard)) {
			ret = error(eb, YERR(BAD_REQUEST),
				    "archive entry '%s' links to '%s', outside the destination", name, hard);
			goto out;
		}
		if (type == AE_IFLNK) {
			const char *target = al->archive_entry_symlink(e);
			ALLOC_GROW(links.paths, links.nr + 1, links.alloc);
			ALLOC_GROW(links.targets, links.nr + 1, links.talloc);
			links.paths[links.nr] = normalise(name);
			links.targets[links.nr] = xstrdup(target ? target : "");
			links.nr++;
		} else if (type != AE_IFREG && type != AE_IFDIR && !hard) {
			ret = error(eb, YERR(BAD_REQUEST), "archive entry '%s' is not a file, directory or link",
				    name);
			goto out;
		}
	}
	if (r != ARCHIVE_EOF) {
		ret = error(eb, YERR(BAD_REQUEST), "cannot read archive '%s': %s", archive_path,
			    al->archive_error_string(a));
		goto out;
	}
	/* every link is checked once all are known: a later link may redirect an earlier one */
	for (size_t i = 0; i < links.nr; i++)
		if (!resolves_inside(&links, links.paths[i], links.targets[i])) {
			ret = error(eb, YERR(BAD_REQUEST),
				    "archive entry '%s' links to '%s', outside the destination",
				    links.paths[i], links.targets[i]);
			goto out;
		}
out:
	link_map_release(&links);
	al->archive_read_free(a);
	return ret;
}

int codepack_extract(const char *archive_path, const char *dest, struct errbuf *eb)
{
	struct archive *a = NULL, *w = NULL;
	struct archive_entry *e;
	int ret, r;

	if (!(al = archivelib_load(eb)))
		return YERR(INTERNAL);
	ret = check_archive(archive_path, eb);
	if (ret)
		return ret;
	if (mkdir_p(dest, 0755) < 0)
		return error(eb, YERR(IO), "cannot create '%s': %s", dest, strerror(errno));
	ret = open_reader(archive_path, &a, eb);
	if (ret)
		return ret;
	w = al->archive_write_disk_new();
	/* Names reach libarchive prefixed with dest (no chdir: the agent is
	 * threaded), so the absolute-path refusal only applies to a relative
	 * dest; check_archive() refused absolute names already. */
	al->archive_write_disk_set_options(w, ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
					   ARCHIVE_EXTRACT_SECURE_SYMLINKS |
					   (*dest == '/' ? 0 : ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS));
	while ((r = al->archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		char *name = normalise(al->archive_entry_pathname(e));
		char *full = xasprintf("%s/%s", dest, name);
		const char *hard = al->archive_entry_hardlink(e);

		if (!*name) {
			/* "./" itself: dest already exists */
			free(name);
			free(full);
			continue;
		}
		al->archive_entry_set_pathname(e, full);
		if (hard) {
			char *h = normalise(hard);
			char *hfull = xasprintf("%s/%s", dest, h);
			al->archive_entry_set_hardlink(e, hfull);
			free(h);
			free(hfull);
		}
		r = al->archive_write_header(w, e);
		if (r == ARCHIVE_OK && al->archive_entry_size(e) > 0) {
			const void *buf;
			size_t len;
			la_int64_t off;
			while ((r = al->archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK)
				if (al->archive_write_data_block(w, buf, len, off) != ARCHIVE_OK) {
					r = ARCHIVE_FATAL;
					break;
				}
			r = r == ARCHIVE_EOF ? ARCHIVE_OK : r;
		}
		if (r == ARCHIVE_OK)
			r = al->archive_write_finish_entry(w);
		if (r != ARCHIVE_OK) {
			struct archive *bad = al->archive_error_string(w) ? w : a;
			ret = error(eb, YERR(BAD_REQUEST), "cannot extract archive entry '%s': %s",
				    name, al->archive_error_string(bad) ? al->archive_error_string(bad) : "unknown error");
		}
		free(name);
		free(full);
		if (ret)
			goto out;
	}
	if (r != ARCHIVE_EOF)
		ret = error(eb, YERR(BAD_REQUEST), "cannot read archive '%s': %s", archive_path,
			    al->archive_error_string(a));
out:
	al->archive_write_close(w);
	al->archive_write_free(w);
	al->archive_read_free(a);
	return ret;
}
