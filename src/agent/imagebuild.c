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

int imagebuild_ensure(struct docker *d, const char *tag, const char *dir, const char *code_dir,
		      const json_t *build, int out_fd, void (*building)(void *arg, const char *tag), void *arg,
		      struct errbuf *eb)
{
	const char *how = NULL;
	const char *dockerfile = json_string_value(json_object_get(build, "dockerfile"));
	const char *registry = json_string_value(json_object_get(build, "registry"));
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
	if (registry) {
		/* another node may have built it: no need to again */
		struct errbuf peb = ERRBUF_INIT;
		if (!docker_pull(d, tag, &peb)) {
			say(out_fd, "pulled image %s from the cluster's registry", tag);
			how = "pulled";
			goto out;
		}
		say(out_fd, "the cluster's registry has no image %s (%.200s)", tag, peb.msg);
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
		if (registry && !docker_push(d, tag, &beb))
			say(out_fd, "pushed image %s to the cluster's registry", tag);
		else if (registry)
			say(out_fd, "cannot push image %s to the cluster's registry (other nodes build it "
			    "again): %.300s", tag, beb.msg);
	}
out:
	/* what the task runs in, for yard images ls: asked once more only
	 * when it was pulled or built */
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
