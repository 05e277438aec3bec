#include "base/compat.h"
#include "agent/imagebuild.h"

#include "base/clock.h"
#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "agent/taskdir.h"
#include "common/codepack.h"

/* The largest context taken. */
#define CONTEXT_MAX ((uint64_t)1 << 30)
/* The lines of a failed build's output its reason ends with: few enough
 * that the job's reason (600 bytes) holds them with the engine's error. */
#define TAIL_LINES 6
#define TAIL_BYTES 280
#define ERROR_BYTES 200

int imagebuild_tag(const char *registry, const char *code, const char *code_dir, const char *dockerfile,
		   const json_t *args, char **out, struct errbuf *eb)
{
	struct strbuf key = STRBUF_INIT;
	char *path = xasprintf("%s/%s", code_dir, dockerfile);
	char *args_text = json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS);
	char df[SHA256_HEX_LEN + 1], hex[SHA256_HEX_LEN + 1];
	int ret = 0;

	*out = NULL;
	if (sha256_file_hex(path, df) < 0) {
		ret = error(eb, YERR(BAD_REQUEST), "image_build_failed: the job's code has no Dockerfile "
			    "'%s' (image.build.dockerfile): %s", dockerfile, strerror(errno));
		goto out;
	}
	/* each part ends with a NUL: no two contents read the same */
	strbuf_addf(&key, "yard image build 1%c%s%c%s%c%s%c%s", 0, code ? code : "", 0, dockerfile, 0, df,
		    0, args_text ? args_text : "{}");
	sha256_hex(key.buf, key.len, hex);
	*out = xasprintf("%s%s%s:%s", registry ? registry : "", registry ? "/" : "", IMAGEBUILD_REPO, hex);
out:
	free(path);
	free(args_text);
	strbuf_release(&key);
	return ret;
}

struct build_out {
	int fd;
	struct strbuf tail;     /* the output's last TAIL_BYTES or so */
};

static int on_output(void *arg, int stream, const char *buf, size_t len)
{
	struct build_out *o = arg;

	(void)stream;
	if (write_all(o->fd, buf, len) < 0)
		fprintf(stderr, "yard shim: cannot write the build's output: %s\n", strerror(errno));
	strbuf_add(&o->tail, buf, len);
	if (o->tail.len > 4 * TAIL_BYTES) {
		size_t keep = TAIL_BYTES;
		memmove(o->tail.buf, o->tail.buf + o->tail.len - keep, keep);
		strbuf_setlen(&o->tail, keep);
	}
	return 0;
}

/* The output's last lines, on one line: "A | B | C". */
static void add_tail(struct strbuf *sb, const struct strbuf *tail)
{
	const char *end = tail->buf ? tail->buf + tail->len : NULL, *p = end;
	int lines = 0;

	if (!end)
		return;
	while (p > tail->buf && (end - p) < TAIL_BYTES) {
		p--;
		if (*p == '\n' && p + 1 < end && ++lines > TAIL_LINES)
			break;
	}
	if (*p == '\n')
		p++;
	for (const char *line = p; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t n = nl ? (size_t)(nl - line) : (size_t)(end - line);
		if (n) {
			strbuf_addstr(sb, sb->len ? " | " : "");
			for (size_t i = 0; i < n; i++)
				strbuf_addch(sb, (unsigned char)line[i] < ' ' ? ' ' : line[i]);
		}
		line += n + 1;
	}
}

static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int fd, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	strbuf_addstr(&sb, "yard: ");
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	strbuf_addch(&sb, '\n');
	if (write_all(fd, sb.buf, sb.len) < 0)
		fprintf(stderr, "yard shim: cannot write the task's output: %s\n", strerror(errno));
	strbuf_release(&sb);
}

/* The engine's description of image tag: 0 and *doc (NULL: it has none),
 * or why it could not be asked. */
static int inspect(struct docker *d, const char *tag, json_t **doc, struct errbuf *eb)
{
	char *path = xasprintf("/images/%s/json", tag);
	long status = 0;
	int ret = docker_call(d, "GET", path, NULL, &status, doc, eb);

	free(path);
	if (!ret && status != 200) {
		json_decref(*doc);
		*doc = NULL;
		errbuf_reset(eb); /* 404: no such image, which is an answer */
	}
	return ret;
}

/* IMAGEBUILD_FILE in dir for tag, as the engine describes it (doc), and
 * how it came; for yard images ls: not the task's failure when it cannot
 * be written, only said. */
static void record(const char *dir, const char *tag, const char *how, const json_t *doc)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *rec;

	if (!json_is_integer(json_object_get(doc, "Size"))) {
		fprintf(stderr, "yard shim: the engine does not describe image %s\n", tag);
		return;
	}
	rec = json_pack("{s:s, s:O, s:s}", "tag", tag, "size", json_object_get(doc, "Size"), "how", how);
	if (taskdir_write_json(dir, IMAGEBUILD_FILE, rec, 0, &eb))
		fprintf(stderr, "yard shim: %s\n", eb.msg);
	json_decref(rec);
}

/* ---- where a built image is shared from: the cluster's registry or the
 * master's store; a task's image_build names at most one ---- */

struct image_source {
	const char *name;       /* "the cluster's registry" */
	const char *fetched;    /* image.json's how once fetched from it, and the verb said */
	/* what share() does, said "pushed image TAG to NAME", or "cannot push
	 * image TAG to NAME" */
	const char *shared, *share_verb, *share_prep;
	/* fetch: 0 once the engine has tag from there, YERR(NOT_FOUND) when
	 * it has none, another error when it could not be asked or the
	 * image did not come whole (the node then builds it) */
	int (*fetch)(struct docker *d, const char *tag, const json_t *build, const char *dir, struct errbuf *eb);
	/* share: tag, just built, made available to the other nodes */
	int (*share)(struct docker *d, const char *tag, const json_t *build, const char *dir, struct errbuf *eb);
};

static int registry_fetch(struct docker *d, const char *tag, const json_t *build, const char *dir,
			  struct errbuf *eb)
{
	(void)dir;
	return docker_pull(d, tag, json_string_value(json_object_get(build, "registry_auth")), eb);
}

static int registry_share(struct docker *d, const char *tag, const json_t *build, const char *dir,
			  struct errbuf *eb)
{
	(void)dir;
	return docker_push(d, tag, json_string_value(json_object_get(build, "registry_auth")), eb);
}

/* The agent fetched the image from the master's store before the task
 * started (agent/imagestore.h): IMAGESTORE_FETCHED says where it is, or
 * why it is not; absent, the store has none. */
static int store_fetch(struct docker *d, const char *tag, const json_t *build, const char *dir,
		       struct errbuf *eb)
{
	json_t *doc = NULL;
	const char *file, *why, *got;
	int ret;

	(void)build;
	if (taskdir_read_json(dir, IMAGESTORE_FETCHED, &doc, NULL))
		return error(eb, YERR(NOT_FOUND), "none was stored");
	file = json_string_value(json_object_get(doc, "file"));
	why = json_string_value(json_object_get(doc, "error"));
	got = json_string_value(json_object_get(doc, "tag"));
	if (why || !file)
		ret = error(eb, YERR(IO), "%s", why ? why : "the agent fetched nothing");
	else if (!got || strcmp(got, tag))
		ret = error(eb, YERR(IO), "the agent fetched '%s', not this image", got ? got : "(none)");
	else
		ret = docker_load(d, file, eb);
	if (file)
		unlink(file); /* loaded, or not to be tried again */
	json_decref(doc);
	return ret;
}

/* Saved where the agent hands it in from once the task runs
 * (agent/imagestore.h): build's "save_dir"/IMAGESTORE_SAVED. */
static int store_share(struct docker *d, const char *tag, const json_t *build, const char *dir,
		       struct errbuf *eb)
{
	const char *save_dir = json_string_value(json_object_get(build, "save_dir"));
	char *path;
	int fd, ret;

	(void)dir;
	if (!save_dir)
		return error(eb, YERR(BAD_REQUEST), "the task names no dir to save the image in");
	if (mkdir_p(save_dir, 0700) < 0)
		return error(eb, YERR(IO), "cannot create '%s': %s", save_dir, strerror(errno));
	path = xasprintf("%s/%s", save_dir, IMAGESTORE_SAVED);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = error(eb, YERR(IO), "cannot create '%s': %s", path, strerror(errno));
		goto out;
	}
	ret = docker_save(d, tag, fd, eb);
	if (!ret && fsync(fd) < 0)
		ret = error(eb, YERR(IO), "cannot write '%s': %s", path, strerror(errno));
	close(fd);
	if (ret)
		rm_rf(save_dir); /* nothing half saved is handed in */
out:
	free(path);
	return ret;
}

static const struct image_source registry_source = {
	"the cluster's registry", "pulled", "pushed", "push", "to", registry_fetch, registry_share,
};
static const struct image_source store_source = {
	"the master's store", "loaded", "saved", "save", "for", store_fetch, store_share,
};

/* Where build's image is shared from: the registry it names, the master's
 * store when it says "store", or nowhere (NULL: built on each node). */
static const struct image_source *source_of(const json_t *build)
{
	if (json_is_string(json_object_get(build, "registry")))
		return &registry_source;
	if (json_is_true(json_object_get(build, "store")))
		return &store_source;
	return NULL;
}

int imagebuild_ensure(struct docker *d, const char *tag, const char *dir, const char *code_dir,
		      const json_t *build, int out_fd, void (*building)(void *arg, const char *tag), void *arg,
		      struct errbuf *eb)
{
	const struct image_source *src = source_of(build);
	const char *how = NULL;
	const char *dockerfile = json_string_value(json_object_get(build, "dockerfile"));
	struct build_out o = { out_fd, STRBUF_INIT };
	struct strbuf ctx = STRBUF_INIT, tail = STRBUF_INIT;
	struct errbuf beb = ERRBUF_INIT;
	json_t *doc = NULL;
	uint64_t t0 = mono_ms();
	int ret;

	if (!dockerfile)
		dockerfile = "Dockerfile";
	if ((ret = inspect(d, tag, &doc, eb)))
		goto out;
	if (doc) {
		say(out_fd, "image %s is built already (the same code, Dockerfile and args)", tag);
		how = "present";
		goto out;
	}
	if (src) {
		/* another node may have built it: no need to again */
		struct errbuf feb = ERRBUF_INIT;
		int fret = src->fetch(d, tag, build, dir, &feb);
		if (!fret) {
			say(out_fd, "%s image %s from %s", src->fetched, tag, src->name);
			how = src->fetched;
			goto out;
		}
		if (fret == YERR(NOT_FOUND))
			say(out_fd, "%s has no image %s (%.200s)", src->name, tag, feb.msg);
		else
			say(out_fd, "cannot take image %s from %s (it is built here): %.300s", tag, src->name,
			    feb.msg);
	}
	building(arg, tag);
	say(out_fd, "building image %s from %s", tag, dockerfile);
	if ((ret = codepack_create(code_dir, &ctx, CONTEXT_MAX, eb))) {
		ret = error(eb, ret, "image_build_failed: cannot pack the build's context: %s", eb->msg);
		goto out;
	}
	ret = docker_build(d, tag, dockerfile, json_object_get(build, "args"), ctx.buf, ctx.len, on_output,
			   &o, &beb);
	if (ret == YERR(UNAVAILABLE)) {
		ret = error(eb, ret, "image_build_failed: %s", beb.msg);
	} else if (ret) {
		add_tail(&tail, &o.tail);
		ret = error(eb, ret, "image_build_failed: %.*s%s%s", ERROR_BYTES, beb.msg,
			    tail.len ? "; the build's last lines: " : "", tail.buf ? tail.buf : "");
	} else {
		say(out_fd, "built image %s in %.1f s", tag, (double)(mono_ms() - t0) / 1000);
		how = "built";
		/* a share that fails is said, not the task's failure */
		if (src && !src->share(d, tag, build, dir, &beb))
			say(out_fd, "%s image %s %s %s", src->shared, tag, src->share_prep, src->name);
		else if (src)
			say(out_fd, "cannot %s image %s %s %s (other nodes build it again): %.300s", src->share_verb,
			    tag, src->share_prep, src->name, beb.msg);
	}
out:
	/* what the task runs in, for yard images ls: asked once more only
	 * when it was fetched or built */
	if (how && !doc && inspect(d, tag, &doc, &beb))
		fprintf(stderr, "yard shim: %s\n", beb.msg);
	if (how)
		record(dir, tag, how, doc);
	json_decref(doc);
	strbuf_release(&ctx);
	strbuf_release(&tail);
	strbuf_release(&o.tail);
	return ret;
}
