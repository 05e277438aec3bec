#include "base/compat.h"
#include "agent/docker.h"

#include <sys/stat.h>

#include "base/fsutil.h"

#include "base/strbuf.h"
#include "common/curllib.h"
#include "common/httpc.h"
#include "base/xalloc.h"

/* The API version every call names: Docker 20.10 speaks it, newer engines
 * still accept it, and Podman's compatible service answers it. */
#define API_PREFIX "/v1.41"
/* Any host name will do: the socket is the address. */
#define API_HOST "http://docker"
/* Replies we keep in memory (inspect documents, errors) stay small. */
#define REPLY_CAP (8u << 20)

void docker_init(struct docker *d, const char *socket)
{
	struct errbuf eb = ERRBUF_INIT;

	/* a missing libcurl is a broken install (the package depends on it) */
	if (curllib_load(&eb))
		die("%s", eb.msg);
	d->curl = curllib.easy_init();
	if (!d->curl)
		die("cannot initialise libcurl");
	d->socket = xstrdup(socket);
	d->stopping = NULL;
}

void docker_release(struct docker *d)
{
	if (d->curl)
		curllib.easy_cleanup(d->curl);
	free(d->socket);
	d->curl = NULL;
	d->socket = NULL;
}

static size_t on_reply(char *data, size_t size, size_t nmemb, void *arg)
{
	struct strbuf *sb = arg;
	size_t n = size * nmemb;
	if (sb->len + n > REPLY_CAP)
		return 0; /* curl fails the transfer: no engine reply is this big */
	strbuf_add(sb, data, n);
	return n;
}

static void prepare(struct docker *d, const char *method, const char *path, struct strbuf *url)
{
	CURL *h = d->curl;
	curllib.easy_reset(h);
	strbuf_addf(url, "%s%s%s", API_HOST, API_PREFIX, path);
	curllib.easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, d->socket);
	curllib.easy_setopt(h, CURLOPT_URL, url->buf);
	httpc_cloexec(h);
	curllib.easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curllib.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curllib.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
}

/* The engine's own words from an error reply ({"message": "..."}). */
static void engine_message(const struct strbuf *body, long status, struct errbuf *eb)
{
	json_t *doc = json_loadb(body->buf, body->len, 0, NULL);
	const char *msg = json_string_value(json_object_get(doc, "message"));
	if (msg)
		error(eb, YERR(BAD_REQUEST), "%s", msg);
	else
		error(eb, YERR(BAD_REQUEST), "the engine answered HTTP %ld", status);
	json_decref(doc);
}

int docker_call(struct docker *d, const char *method, const char *path, const json_t *body,
		long *status, json_t **out, struct errbuf *eb)
{
	struct strbuf url = STRBUF_INIT, reply = STRBUF_INIT;
	struct curl_slist *hdrs = NULL;
	char *text = NULL;
	int ret = 0;

	if (out)
		*out = NULL;
	*status = 0;
	prepare(d, method, path, &url);
	curllib.easy_setopt(d->curl, CURLOPT_WRITEFUNCTION, on_reply);
	curllib.easy_setopt(d->curl, CURLOPT_WRITEDATA, &reply);
	if (body || !strcmp(method, "POST")) {
		text = body ? json_dumps(body, JSON_COMPACT) : NULL;
		hdrs = curllib.slist_append(hdrs, "Content-Type: application/json");
		hdrs = curllib.slist_append(hdrs, "Expect:");
		curllib.easy_setopt(d->curl, CURLOPT_POSTFIELDS, text ? text : "");
		curllib.easy_setopt(d->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(text ? strlen(text) : 0));
		curllib.easy_setopt(d->curl, CURLOPT_HTTPHEADER, hdrs);
	}
	CURLcode rc = curllib.easy_perform(d->curl);
	if (rc != CURLE_OK) {
		ret = error(eb, YERR(UNAVAILABLE), "cannot reach the container engine at '%s': %s",
			    d->socket, curllib.easy_strerror(rc));
		goto out;
	}
	curllib.easy_getinfo(d->curl, CURLINFO_RESPONSE_CODE, status);
	if (*status >= 400)
		engine_message(&reply, *status, eb);
	else if (out && reply.len)
		*out = json_loadb(reply.buf, reply.len, 0, NULL);
out:
	curllib.slist_free_all(hdrs);
	free(text);
	strbuf_release(&url);
	strbuf_release(&reply);
	return ret;
}

int docker_engine(struct docker *d, char **out, struct errbuf *eb)
{
	json_t *v = NULL;
	long status;
	int ret = docker_call(d, "GET", "/version", NULL, &status, &v, eb);
	if (ret)
		return ret;
	if (status != 200 || !v) {
		json_decref(v);
		return error(eb, YERR(UNAVAILABLE), "'%s' does not answer like a container engine (HTTP %ld)",
			     d->socket, status);
	}
	/* Components[0] names the engine ("Engine" for Docker, "Podman Engine") */
	json_t *c0 = json_array_get(json_object_get(v, "Components"), 0);
	const char *name = json_string_value(json_object_get(c0, "Name"));
	const char *ver = json_string_value(json_object_get(v, "Version"));
	if (!name || !strcmp(name, "Engine"))
		name = "Docker Engine";
	*out = xasprintf("%s %s", name, ver ? ver : "(unknown version)");
	json_decref(v);
	return 0;
}

int docker_demux_feed(struct docker_demux *dm, const char *buf, size_t len, docker_sink_fn sink,
		      void *arg)
{
	while (len) {
		if (dm->left == 0) {
			size_t take = sizeof(dm->hdr) - dm->hdr_len;
			if (take > len)
				take = len;
			memcpy(dm->hdr + dm->hdr_len, buf, take);
			dm->hdr_len += take;
			buf += take;
			len -= take;
			if (dm->hdr_len < sizeof(dm->hdr))
				return 0;
			dm->hdr_len = 0;
			/* 0 is stdin, which a container echoes only with a TTY: count it as stdout */
			dm->stream = dm->hdr[0] == 2 ? 2 : 1;
			dm->left = (size_t)dm->hdr[4] << 24 | (size_t)dm->hdr[5] << 16 |
				   (size_t)dm->hdr[6] << 8 | (size_t)dm->hdr[7];
			continue;
		}
		size_t n = dm->left < len ? dm->left : len;
		int r = sink(arg, dm->stream, buf, n);
		if (r)
			return r;
		dm->left -= n;
		buf += n;
		len -= n;
	}
	return 0;
}

struct attach {
	struct docker_demux dm;
	docker_sink_fn sink;
	void (*on_ready)(void *, bool);
	void *arg;
	void *curl;          /* CURL *, borrowed: to read the status once the body starts */
	bool ready;
	long status;
	struct strbuf err;   /* the body of a refused attach */
	int sink_ret;
};

static size_t on_attach_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct attach *at = arg;
	size_t n = size * nmemb;
	/* the blank line ends the engine's answer: the stream is in place */
	if (!at->ready && n <= 2 && (data[0] == '\r' || data[0] == '\n')) {
		curllib.easy_getinfo(at->curl, CURLINFO_RESPONSE_CODE, &at->status);
		if (at->status >= 200) { /* not a "100 Continue" */
			at->ready = true;
			if (at->on_ready)
				at->on_ready(at->arg, at->status < 300);
		}
	}
	return n;
}

static size_t on_attach_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct attach *at = arg;
	size_t n = size * nmemb;
	if (!at->status)
		curllib.easy_getinfo(at->curl, CURLINFO_RESPONSE_CODE, &at->status);
	if (at->status >= 400) {
		strbuf_add(&at->err, data, n < 4096 ? n : 4096);
		return n;
	}
	at->sink_ret = docker_demux_feed(&at->dm, data, n, at->sink, at->arg);
	return at->sink_ret ? 0 : n;
}

/* One streaming call: the engine's answer, then frames until it closes. */
static int stream_call(struct docker *d, const char *method, const char *path, const char *id,
		       docker_sink_fn sink, void (*on_ready)(void *arg, bool ok), void *arg,
		       struct errbuf *eb)
{
	struct strbuf url = STRBUF_INIT;
	struct curl_slist *hdrs = NULL;
	struct attach at = { .sink = sink, .on_ready = on_ready, .arg = arg, .curl = d->curl };
	int ret = 0;

	strbuf_init(&at.err, 0);
	prepare(d, method, path, &url);
	curllib.easy_setopt(d->curl, CURLOPT_HEADERFUNCTION, on_attach_header);
	curllib.easy_setopt(d->curl, CURLOPT_HEADERDATA, &at);
	curllib.easy_setopt(d->curl, CURLOPT_WRITEFUNCTION, on_attach_body);
	curllib.easy_setopt(d->curl, CURLOPT_WRITEDATA, &at);
	if (!strcmp(method, "POST")) {
		/* no Upgrade: the engine answers 200 and streams until the container ends */
		hdrs = curllib.slist_append(hdrs, "Content-Type: text/plain");
		curllib.easy_setopt(d->curl, CURLOPT_HTTPHEADER, hdrs);
		curllib.easy_setopt(d->curl, CURLOPT_POSTFIELDS, "");
		curllib.easy_setopt(d->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
	}
	CURLcode rc = curllib.easy_perform(d->curl);
	curllib.easy_getinfo(d->curl, CURLINFO_RESPONSE_CODE, &at.status);
	if (at.status >= 400) {
		engine_message(&at.err, at.status, eb);
		ret = YERR(NOT_FOUND);
	} else if (rc != CURLE_OK && rc != CURLE_PARTIAL_FILE && !at.sink_ret) {
		ret = error(eb, YERR(UNAVAILABLE), "the output stream of container %.12s broke: %s", id,
			    curllib.easy_strerror(rc));
	}
	if (!at.ready && on_ready)
		on_ready(arg, false); /* never leave a waiter hanging */
	curllib.slist_free_all(hdrs);
	strbuf_release(&url);
	strbuf_release(&at.err);
	return ret;
}

int docker_attach(struct docker *d, const char *id, docker_sink_fn sink,
		  void (*on_ready)(void *arg, bool ok), void *arg, struct errbuf *eb)
{
	char *path = xasprintf("/containers/%s/attach?stream=1&stdout=1&stderr=1", id);
	int ret = stream_call(d, "POST", path, id, sink, on_ready, arg, eb);
	free(path);
	return ret;
}

int docker_logs(struct docker *d, const char *id, docker_sink_fn sink,
		void (*on_ready)(void *arg, bool ok), void *arg, struct errbuf *eb)
{
	char *path = xasprintf("/containers/%s/logs?follow=1&stdout=1&stderr=1", id);
	int ret = stream_call(d, "GET", path, id, sink, on_ready, arg, eb);
	free(path);
	return ret;
}

/* ---- builds ---- */

struct build_read {
	struct strbuf buf;      /* what has come of the message being read */
	docker_sink_fn sink;
	void *arg;
	struct errbuf *eb;
	bool failed;
};

/* One message of a build's, a push's or a pull's answer: its text to the
 * sink, its error kept (an answer refused at once is one {"message"}). */
static void build_message(struct build_read *b, const json_t *m)
{
	const char *text = json_string_value(json_object_get(m, "stream"));
	const char *err = json_string_value(json_object_get(m, "error"));

	if (!err)
		err = json_string_value(json_object_get(m, "message"));

	if (text && *text && b->sink)
		b->sink(b->arg, 1, text, strlen(text));
	if (err && !b->failed) {
		b->failed = true;
		error(b->eb, YERR(BAD_REQUEST), "%.*s", (int)strcspn(err, "\n"), err);
	}
}

/* The build's answer: JSON messages one after another (a line each, but a
 * message may arrive in pieces); each whole one is passed on as it comes. */
static size_t on_build(char *data, size_t size, size_t nmemb, void *arg)
{
	struct build_read *b = arg;
	size_t n = size * nmemb, off = 0;
	json_error_t jerr;

	if (b->buf.len + n > REPLY_CAP)
		return 0; /* one message this long is no build's */
	strbuf_add(&b->buf, data, n);
	while (off < b->buf.len) {
		size_t skip = strspn(b->buf.buf + off, " \r\n\t");
		json_t *m;
		off += skip;
		if (off >= b->buf.len)
			break;
		m = json_loadb(b->buf.buf + off, b->buf.len - off, JSON_DISABLE_EOF_CHECK, &jerr);
		if (!m)
			break; /* not whole yet */
		off += (size_t)jerr.position;
		build_message(b, m);
		json_decref(m);
	}
	if (off) {
		memmove(b->buf.buf, b->buf.buf + off, b->buf.len - off);
		strbuf_setlen(&b->buf, b->buf.len - off);
	}
	return n;
}

/* A query value, escaped. */
static void add_escaped(struct docker *d, struct strbuf *sb, const char *key, const char *value)
{
	char *esc = curllib.easy_escape(d->curl, value, 0);
	strbuf_addf(sb, "&%s=%s", key, esc);
	curllib.free(esc);
}

/* POSTs to PATH (escaped) with HDRS (taken) and BODY
 * (or, FILE not NULL, LEN bytes read from FILE), reading the answer as a
 * build's, a push's or a pull's: JSON messages one after another,
 * read as they come, their "stream" text to sink (when not NULL), their
 * "error" the call's failure. 0; YERR(BAD_REQUEST) with the engine's words
 * when it refused (*status) or the work failed; YERR(UNAVAILABLE) when the
 * engine cannot be reached. */
/* CURLOPT_XFERINFOFUNCTION: non-zero (the transfer stops) once the
 * docker's stopping() says so. */
static int on_xfer(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	const struct docker *d = arg;

	(void)dt, (void)dn, (void)ut, (void)un;
	return d->stopping() ? 1 : 0;
}

static int post_json_stream(struct docker *d, const char *path, struct curl_slist *hdrs, const void *body,
			    size_t len, FILE *file, docker_sink_fn sink, void *arg, long *status, struct errbuf *eb)
{
	struct strbuf url = STRBUF_INIT;
	struct build_read b = { STRBUF_INIT, sink, arg, eb, false };
	int ret = 0;

	prepare(d, "POST", path, &url);
	curllib.easy_setopt(d->curl, CURLOPT_WRITEFUNCTION, on_build);
	curllib.easy_setopt(d->curl, CURLOPT_WRITEDATA, &b);
	hdrs = curllib.slist_append(hdrs, "Expect:");
	curllib.easy_setopt(d->curl, CURLOPT_HTTPHEADER, hdrs);
	if (file) {
		/* the body read from file as it goes (libcurl's default read
		 * function is fread): an image is too big to hold */
		curllib.easy_setopt(d->curl, CURLOPT_POST, 1L);
		curllib.easy_setopt(d->curl, CURLOPT_READDATA, file);
	} else {
		curllib.easy_setopt(d->curl, CURLOPT_POSTFIELDS, body ? body : "");
	}
	curllib.easy_setopt(d->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	if (d->stopping) {
		curllib.easy_setopt(d->curl, CURLOPT_XFERINFOFUNCTION, on_xfer);
		curllib.easy_setopt(d->curl, CURLOPT_XFERINFODATA, d);
		curllib.easy_setopt(d->curl, CURLOPT_NOPROGRESS, 0L);
	}
	CURLcode rc = curllib.easy_perform(d->curl);
	curllib.easy_setopt(d->curl, CURLOPT_NOPROGRESS, 1L);
	*status = 0;
	curllib.easy_getinfo(d->curl, CURLINFO_RESPONSE_CODE, status);
	if (rc == CURLE_ABORTED_BY_CALLBACK) {
		ret = error(eb, YERR(UNAVAILABLE), "stopped: the task was asked to stop");
	} else if (*status >= 400) {
		/* refused before it began: its one {"message"} was read as it came */
		if (!b.failed)
			engine_message(&b.buf, *status, eb);
		ret = YERR(BAD_REQUEST);
	} else if (rc != CURLE_OK) {
		ret = error(eb, YERR(UNAVAILABLE), "cannot reach the container engine at '%s': %s",
			    d->socket, curllib.easy_strerror(rc));
	} else if (b.failed) {
		ret = YERR(BAD_REQUEST);
	}
	curllib.slist_free_all(hdrs);
	strbuf_release(&url);
	strbuf_release(&b.buf);
	return ret;
}

int docker_build(struct docker *d, const char *tag, const char *dockerfile, const json_t *args,
		 const void *context, size_t len, docker_sink_fn sink, void *arg, struct errbuf *eb)
{
	struct strbuf path = STRBUF_INIT;
	char *args_text = json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS);
	long status;
	int ret;

	/* the host's network, as the task's: an engine may have no bridge;
	 * its intermediate containers removed, also when a step fails */
	strbuf_addstr(&path, "/build?networkmode=host&rm=1&forcerm=1");
	add_escaped(d, &path, "t", tag);
	add_escaped(d, &path, "dockerfile", dockerfile);
	add_escaped(d, &path, "buildargs", args_text ? args_text : "{}");
	free(args_text);
	ret = post_json_stream(d, path.buf, curllib.slist_append(NULL, "Content-Type: application/x-tar"), context,
			       len, NULL, sink, arg, &status, eb);
	strbuf_release(&path);
	return ret;
}

/* headers plus X-Registry-Auth: AUTH (its value never logged) */
static struct curl_slist *auth_header(struct curl_slist *headers, const char *auth)
{
	char *h = xasprintf("X-Registry-Auth: %s", auth);

	headers = curllib.slist_append(headers, h);
	explicit_bzero(h, strlen(h));
	free(h);
	return headers;
}

int docker_push(struct docker *d, const char *image, const char *auth, struct errbuf *eb)
{
	const char *slash = strrchr(image, '/'), *colon = strrchr(image, ':');
	struct strbuf path = STRBUF_INIT;
	long status;
	int ret;

	if (!colon || (slash && colon < slash))
		return error(eb, YERR(BAD_REQUEST), "'%s' has no tag to push", image);
	strbuf_addf(&path, "/images/%.*s/push?", (int)(colon - image), image);
	add_escaped(d, &path, "tag", colon + 1);
	/* the engine wants credentials even for a registry that takes none: {} */
	ret = post_json_stream(d, path.buf, auth_header(NULL, auth ? auth : "e30="), NULL, 0, NULL, NULL, NULL,
			       &status, eb);
	strbuf_release(&path);
	return ret;
}

int docker_pull(struct docker *d, const char *image, const char *auth, struct errbuf *eb)
{
	char *esc = curllib.easy_escape(d->curl, image, 0);
	char *path = xasprintf("/images/create?fromImage=%s", esc);
	struct curl_slist *headers;
	long status;
	int ret;

	curllib.free(esc);
	/* its progress messages are read as they come: a long pull's are many */
	headers = curllib.slist_append(NULL, "Content-Type: application/json");
	if (auth)
		headers = auth_header(headers, auth);
	ret = post_json_stream(d, path, headers, NULL, 0, NULL, NULL, NULL, &status, eb);
	free(path);
	/* 404: no registry has it; anything else: the pull itself failed */
	if (ret == YERR(BAD_REQUEST))
		ret = status == 404 ? YERR(NOT_FOUND) : YERR(UNAVAILABLE);
	return ret;
}

/* ---- save and load ---- */

struct save_to {
	int fd;
	long status;
	void *curl;             /* CURL *, borrowed: the status once the body starts */
	struct strbuf err;      /* the body of a refused save */
	int write_errno;        /* the fd's failure, 0: none */
};

static size_t on_save(char *data, size_t size, size_t nmemb, void *arg)
{
	struct save_to *s = arg;
	size_t n = size * nmemb;

	if (!s->status)
		curllib.easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &s->status);
	if (s->status >= 400) {
		strbuf_add(&s->err, data, n < 4096 ? n : 4096);
		return n;
	}
	if (write_all(s->fd, data, n) < 0) {
		s->write_errno = errno;
		return 0;
	}
	return n;
}

int docker_save(struct docker *d, const char *image, int fd, struct errbuf *eb)
{
	struct strbuf url = STRBUF_INIT;
	struct save_to s = { .fd = fd, .curl = d->curl };
	char *path = xasprintf("/images/%s/get", image);
	int ret = 0;

	strbuf_init(&s.err, 0);
	prepare(d, "GET", path, &url);
	curllib.easy_setopt(d->curl, CURLOPT_WRITEFUNCTION, on_save);
	curllib.easy_setopt(d->curl, CURLOPT_WRITEDATA, &s);
	CURLcode rc = curllib.easy_perform(d->curl);
	curllib.easy_getinfo(d->curl, CURLINFO_RESPONSE_CODE, &s.status);
	if (s.status >= 400) {
		engine_message(&s.err, s.status, eb);
		ret = error(eb, YERR(BAD_REQUEST), "the engine cannot save image '%s': %s", image, eb->msg);
	} else if (s.write_errno) {
		ret = error(eb, YERR(IO), "cannot write image '%s': %s", image, strerror(s.write_errno));
	} else if (rc != CURLE_OK) {
		ret = error(eb, YERR(UNAVAILABLE), "cannot reach the container engine at '%s': %s", d->socket,
			    curllib.easy_strerror(rc));
	}
	free(path);
	strbuf_release(&url);
	strbuf_release(&s.err);
	return ret;
}

int docker_load(struct docker *d, const char *tar_path, struct errbuf *eb)
{
	FILE *f = fopen(tar_path, "rbe");
	struct stat st;
	long status;
	int ret;

	if (!f)
		return error(eb, YERR(IO), "cannot open '%s': %s", tar_path, strerror(errno));
	if (fstat(fileno(f), &st) < 0) {
		ret = error(eb, YERR(IO), "cannot look at '%s': %s", tar_path, strerror(errno));
		goto out;
	}
	/* its answer is a build's: {"stream": "Loaded image: ..."} or {"error"} */
	ret = post_json_stream(d, "/images/load?quiet=1", curllib.slist_append(NULL, "Content-Type: application/x-tar"),
			       NULL, (size_t)st.st_size, f, NULL, NULL, &status, eb);
out:
	fclose(f);
	return ret;
}
