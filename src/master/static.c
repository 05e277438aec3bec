#include "base/compat.h"
#include "master/static.h"

#include <fcntl.h>
#include <microhttpd.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "master/http.h"

static const char not_built_page[] =
	"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Trainyard</title></head>\n"
	"<body><h1>Trainyard</h1>\n"
	"<p>The web UI is not built. Run <code>make</code> (it builds web/ into build/web), or start\n"
	"the master with <code>--web-dir DIR</code>. The API is at <code>/v1/</code>.</p>\n"
	"</body></html>\n";

static bool is_dir(const char *path)
{
	struct stat st;
	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

char *static_default_dir(void)
{
	char *dir = self_sibling("web");

	if (dir && is_dir(dir))
		return dir;
	free(dir);
#ifdef YARD_WEB_DIR
	if (is_dir(YARD_WEB_DIR))
		return xstrdup(YARD_WEB_DIR);
#endif
	return NULL;
}

bool static_takes(const char *method, const char *path)
{
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return false;
	return strcmp(path, "/v1") && strncmp(path, "/v1/", 4);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A decoded segment of "." or ".." (segment is [s, e)). */
static bool dot_segment(const char *s, const char *e)
{
	return (e - s == 1 && s[0] == '.') || (e - s == 2 && s[0] == '.' && s[1] == '.');
}

int static_resolve(const char *target, char **out)
{
	struct strbuf path = STRBUF_INIT;
	const char *p = target;
	size_t seg = 0; /* start of the current segment in path */

	if (*p != '/')
		return -1;
	p++;
	for (; *p && *p != '?' && *p != '#'; p++) {
		char c = *p;
		if (c == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
			if (lo < 0)
				goto refuse;
			c = (char)(hi * 16 + lo);
			p += 2;
		}
		if (c == 0 || c == '\\')
			goto refuse;
		if (c == '/') {
			if (dot_segment(path.buf + seg, path.buf + path.len))
				goto refuse;
			seg = path.len + 1;
		}
		strbuf_add(&path, &c, 1);
	}
	if (dot_segment(path.buf + seg, path.buf + path.len))
		goto refuse;
	*out = strbuf_detach(&path, NULL);
	return 0;
refuse:
	strbuf_release(&path);
	return -1;
}

const char *static_mime(const char *name)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
		{ "html", "text/html; charset=utf-8" },
		{ "js", "text/javascript; charset=utf-8" },
		{ "mjs", "text/javascript; charset=utf-8" },
		{ "css", "text/css; charset=utf-8" },
		{ "svg", "image/svg+xml" },
		{ "png", "image/png" },
		{ "ico", "image/x-icon" },
		{ "json", "application/json" },
		{ "map", "application/json" },
		{ "webmanifest", "application/manifest+json" },
		{ "txt", "text/plain; charset=utf-8" },
		{ "woff2", "font/woff2" },
		{ "woff", "font/woff" },
		{ "wasm", "application/wasm" },
	};
	const char *base = strrchr(name, '/'), *dot;

	base = base ? base + 1 : name;
	dot = strrchr(base, '.');
	if (dot && dot != base)
		for (size_t i = 0; i < ARRAY_SIZE(types); i++)
			if (!strcasecmp(dot + 1, types[i].ext))
				return types[i].type;
	return "application/octet-stream";
}

/* Opens web_dir/rel for reading if it is a regular file: the fd, or -1
 * (errno ENOENT for anything that is not a regular file). */
static int open_regular(const char *web_dir, const char *rel, struct stat *st)
{
	char *path = xasprintf("%s/%s", web_dir, rel);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	free(path);
	if (fd < 0)
		return -1;
	if (fstat(fd, st) || !S_ISREG(st->st_mode)) {
		close(fd);
		errno = ENOENT;
		return -1;
	}
	return fd;
}

/*
 * The headers of every answer of the web app (index.html, its assets, the
 * not-built page): the app loads only its own scripts, styles and API
 * (Preact's style props go through the DOM, which CSP allows; index.html
 * has no inline script or style), is never framed, and sends no Referer.
 */
static const char web_csp[] = "default-src 'self'; script-src 'self'; style-src 'self'; "
			      "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
			      "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

static void add_web_headers(struct MHD_Response *resp)
{
	MHD_add_response_header(resp, "Content-Security-Policy", web_csp);
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
}

/* Replies with the open file fd (closed by MHD, or here on error). */
static void reply_file(struct req *r, int fd, const struct stat *st, const char *name,
		       bool immutable)
{
	struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st->st_size, fd);

	if (!resp) {
		struct errbuf eb = ERRBUF_INIT;
		close(fd);
		error(&eb, YERR(INTERNAL), "cannot reply with '%s'", name);
		req_error(r, &eb);
		return;
	}
	MHD_add_response_header(resp, "Content-Type", static_mime(name));
	MHD_add_response_header(resp, "Cache-Control",
				immutable ? "public, max-age=31536000, immutable" : "no-cache");
	add_web_headers(resp);
	req_set_response(r, 200, resp);
}

void static_serve(struct req *r, const char *web_dir, const char *raw_target)
{
	struct errbuf eb = ERRBUF_INIT;
	struct stat st;
	char *rel = NULL;
	bool assets;
	int fd;

	if (static_resolve(raw_target, &rel)) {
		error(&eb, YERR(BAD_REQUEST), "refused path '%s'", r->url);
		req_error(r, &eb);
		return;
	}
	assets = !strncmp(rel, "assets/", 7);
	fd = web_dir && rel[0] ? open_regular(web_dir, rel, &st) : -1;
	if (fd >= 0) {
		reply_file(r, fd, &st, rel, assets);
		goto out;
	}
	if (assets) {
		error(&eb, YERR(NOT_FOUND), "no file '%s'", r->url);
		req_error(r, &eb);
		goto out;
	}
	/* the app's own routes, directories and "/" all get index.html */
	fd = web_dir ? open_regular(web_dir, "index.html", &st) : -1;
	if (fd >= 0) {
		reply_file(r, fd, &st, "index.html", false);
		goto out;
	}
	req_text(r, 200, "text/html; charset=utf-8", not_built_page, sizeof(not_built_page) - 1);
	add_web_headers(r->resp);
out:
	free(rel);
}
