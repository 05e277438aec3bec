/*
 * The Docker Engine API client (src/agent/docker.h): the demultiplexer of
 * the attach stream, cut at every possible place, and the client against a
 * fake engine (libmicrohttpd on a unix socket) that answers as Docker does:
 * the engine's name, pull failures told apart, error messages passed on,
 * and an attach stream delivered byte for byte per stream.
 */
#include "base/compat.h"

#include <curl/curl.h>
#include <microhttpd.h>
#include <setjmp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <cmocka.h>

#include "agent/docker.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

struct got {
	struct strbuf s[3];
};

static int collect(void *arg, int stream, const char *buf, size_t len)
{
	struct got *g = arg;
	strbuf_add(&g->s[stream], buf, len);
	return 0;
}

static void frame(struct strbuf *sb, int stream, const char *payload, size_t len)
{
	unsigned char h[8] = { (unsigned char)stream, 0, 0, 0, (unsigned char)(len >> 24),
			       (unsigned char)(len >> 16), (unsigned char)(len >> 8), (unsigned char)len };
	strbuf_add(sb, h, 8);
	strbuf_add(sb, payload, len);
}

/* The stream the fake engine sends and the demux tests cut: stdout and
 * stderr interleaved, an empty frame, a frame of NUL and high bytes, a
 * frame longer than 64 KiB (its length needs the third header byte). */
static void sample_stream(struct strbuf *sb, struct strbuf *want_out, struct strbuf *want_err)
{
	static const char bin[] = { 'a', '\0', (char)0xff, '\n', (char)0x80 };
	char *big = xmalloc(70000);
	for (size_t i = 0; i < 70000; i++)
		big[i] = (char)('A' + i % 26);
	frame(sb, 1, "hello\n", 6);
	strbuf_add(want_out, "hello\n", 6);
	frame(sb, 2, "oops\n", 5);
	strbuf_add(want_err, "oops\n", 5);
	frame(sb, 1, "", 0);
	frame(sb, 1, bin, sizeof(bin));
	strbuf_add(want_out, bin, sizeof(bin));
	frame(sb, 2, big, 70000);
	strbuf_add(want_err, big, 70000);
	frame(sb, 1, "no newline", 10);
	strbuf_add(want_out, "no newline", 10);
	free(big);
}

static void assert_same(const struct strbuf *got, const struct strbuf *want)
{
	assert_int_equal(got->len, want->len);
	assert_memory_equal(got->buf, want->buf, want->len);
}

static void test_demux_every_cut(void **state)
{
	struct strbuf in = STRBUF_INIT, out = STRBUF_INIT, err = STRBUF_INIT;
	sample_stream(&in, &out, &err);
	/* two cuts anywhere in the first frames, and feeds of every small size */
	for (size_t cut = 0; cut <= 40; cut++) {
		for (size_t step = 1; step <= 9; step += 4) {
			struct docker_demux dm = { 0 };
			struct got g;
			for (int i = 0; i < 3; i++)
				strbuf_init(&g.s[i], 0);
			assert_int_equal(docker_demux_feed(&dm, in.buf, cut, collect, &g), 0);
			for (size_t off = cut; off < in.len; off += step) {
				size_t n = in.len - off < step ? in.len - off : step;
				if (off > 200)
					n = in.len - off; /* the rest at once */
				assert_int_equal(docker_demux_feed(&dm, in.buf + off, n, collect, &g), 0);
				if (off > 200)
					break;
			}
			assert_same(&g.s[1], &out);
			assert_same(&g.s[2], &err);
			assert_int_equal(dm.left, 0);
			assert_int_equal(dm.hdr_len, 0);
			for (int i = 0; i < 3; i++)
				strbuf_release(&g.s[i]);
		}
	}
	strbuf_release(&in);
	strbuf_release(&out);
	strbuf_release(&err);
}

static int stop_at_first(void *arg, int stream, const char *buf, size_t len)
{
	(*(int *)arg)++;
	return 7;
}

static void test_demux_sink_stops(void **state)
{
	struct strbuf in = STRBUF_INIT, out = STRBUF_INIT, err = STRBUF_INIT;
	struct docker_demux dm = { 0 };
	int calls = 0;
	sample_stream(&in, &out, &err);
	assert_int_equal(docker_demux_feed(&dm, in.buf, in.len, stop_at_first, &calls), 7);
	assert_int_equal(calls, 1);
	strbuf_release(&in);
	strbuf_release(&out);
	strbuf_release(&err);
}

/* ---- a fake engine ---- */

struct fake {
	struct MHD_Daemon *d;
	char dir[48], sock[96];
	struct strbuf stream, want_out, want_err;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *ctype,
			     const void *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	MHD_add_response_header(r, "Content-Type", ctype);
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *data_size, void **ctx)
{
	struct fake *f = cls;
	if (!*ctx) { /* the first call only announces the request */
		*ctx = f;
		return MHD_YES;
	}
	if (*data_size) {
		*data_size = 0;
		return MHD_YES;
	}
	if (!strcmp(url, "/v1.41/version")) {
		const char *v = "{\"Version\": \"4.3.1\", \"Components\": [{\"Name\": \"Podman Engine\"}]}";
		return reply(c, 200, "application/json", v, strlen(v));
	}
	if (!strcmp(url, "/v1.41/images/create")) {
		const char *img = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fromImage");
		if (img && !strcmp(img, "missing:1")) {
			const char *m = "{\"message\": \"repository missing not found\"}";
			return reply(c, 404, "application/json", m, strlen(m));
		}
		if (img && !strcmp(img, "offline:1")) {
			const char *m = "{\"message\": \"dial tcp: lookup registry: no such host\"}";
			return reply(c, 500, "application/json", m, strlen(m));
		}
		if (img && !strcmp(img, "private:1")) {
			/* a registry that demands its credential, passed on by the engine */
			const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Registry-Auth");
			const char *m = auth && !strcmp(auth, "c2VjcmV0") ? "{\"status\": \"Pulled\"}\n"
				      : "{\"message\": \"unauthorized: authentication required\"}";
			return reply(c, auth && !strcmp(auth, "c2VjcmV0") ? 200 : 500, "application/json", m,
				     strlen(m));
		}
		if (img && !strcmp(img, "midway:1")) {
			const char *m = "{\"status\": \"Pulling\"}\n{\"error\": \"unexpected EOF\"}\n";
			return reply(c, 200, "application/json", m, strlen(m));
		}
		const char *m = "{\"status\": \"Pulling\"}\n{\"status\": \"Downloaded\"}\n";
		return reply(c, 200, "application/json", m, strlen(m));
	}
	if (!strcmp(url, "/v1.41/containers/abc/attach"))
		return reply(c, 200, "application/vnd.docker.raw-stream", f->stream.buf, f->stream.len);
	const char *m = "{\"message\": \"No such container: nope\"}";
	return reply(c, 404, "application/json", m, strlen(m));
}

static int fake_start(void **state)
{
	struct fake *f = xcalloc(1, sizeof(*f));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(f->dir, sizeof(f->dir), "/tmp/yard-test-docker-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->sock, sizeof(f->sock), "%s/engine.sock", f->dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->sock);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 16), 0);
	strbuf_init(&f->stream, 0);
	strbuf_init(&f->want_out, 0);
	strbuf_init(&f->want_err, 0);
	sample_stream(&f->stream, &f->want_out, &f->want_err);
	f->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_request, f,
				MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_END);
	assert_non_null(f->d);
	*state = f;
	return 0;
}

static int fake_stop(void **state)
{
	struct fake *f = *state;
	MHD_stop_daemon(f->d);
	unlink(f->sock);
	rmdir(f->dir);
	strbuf_release(&f->stream);
	strbuf_release(&f->want_out);
	strbuf_release(&f->want_err);
	free(f);
	return 0;
}

static void test_engine_name(void **state)
{
	struct fake *f = *state;
	struct docker d;
	struct errbuf eb = ERRBUF_INIT;
	char *name = NULL;
	docker_init(&d, f->sock);
	assert_int_equal(docker_engine(&d, &name, &eb), 0);
	assert_string_equal(name, "Podman Engine 4.3.1");
	free(name);
	docker_release(&d);

	/* nothing listening: an error that names the socket */
	docker_init(&d, "/nonexistent/docker.sock");
	assert_int_equal(docker_engine(&d, &name, &eb), YERR(UNAVAILABLE));
	assert_non_null(strstr(eb.msg, "/nonexistent/docker.sock"));
	docker_release(&d);
}

static void test_pull_outcomes(void **state)
{
	struct fake *f = *state;
	struct docker d;
	struct errbuf eb = ERRBUF_INIT;
	docker_init(&d, f->sock);
	assert_int_equal(docker_pull(&d, "present:1", NULL, &eb), 0);
	assert_int_equal(docker_pull(&d, "missing:1", NULL, &eb), YERR(NOT_FOUND));
	assert_string_equal(eb.msg, "repository missing not found");
	assert_int_equal(docker_pull(&d, "offline:1", NULL, &eb), YERR(UNAVAILABLE));
	assert_non_null(strstr(eb.msg, "no such host"));
	errbuf_reset(&eb);
	/* the registry's credential goes to the engine as X-Registry-Auth */
	assert_int_equal(docker_pull(&d, "private:1", NULL, &eb), YERR(UNAVAILABLE));
	assert_non_null(strstr(eb.msg, "authentication required"));
	errbuf_reset(&eb);
	assert_int_equal(docker_pull(&d, "private:1", "c2VjcmV0", &eb), 0);
	assert_int_equal(docker_pull(&d, "midway:1", NULL, &eb), YERR(UNAVAILABLE));
	assert_string_equal(eb.msg, "unexpected EOF");
	docker_release(&d);
}

static void test_call_passes_engine_message(void **state)
{
	struct fake *f = *state;
	struct docker d;
	struct errbuf eb = ERRBUF_INIT;
	long status = 0;
	json_t *out = NULL;
	docker_init(&d, f->sock);
	assert_int_equal(docker_call(&d, "GET", "/containers/nope/json", NULL, &status, &out, &eb), 0);
	assert_int_equal(status, 404);
	assert_null(out);
	assert_string_equal(eb.msg, "No such container: nope");
	docker_release(&d);
}

static int ready_calls;
static bool ready_ok;

static void on_ready(void *arg, bool ok)
{
	ready_calls++;
	ready_ok = ok;
}

static void test_attach_streams(void **state)
{
	struct fake *f = *state;
	struct docker d;
	struct errbuf eb = ERRBUF_INIT;
	struct got g;
	for (int i = 0; i < 3; i++)
		strbuf_init(&g.s[i], 0);
	docker_init(&d, f->sock);
	ready_calls = 0;
	assert_int_equal(docker_attach(&d, "abc", collect, on_ready, &g, &eb), 0);
	assert_int_equal(ready_calls, 1);
	assert_true(ready_ok);
	assert_same(&g.s[1], &f->want_out);
	assert_same(&g.s[2], &f->want_err);

	/* a container the engine does not know: refused, and the waiter told so */
	ready_calls = 0;
	assert_int_equal(docker_attach(&d, "nope", collect, on_ready, &g, &eb), YERR(NOT_FOUND));
	assert_int_equal(ready_calls, 1);
	assert_false(ready_ok);
	assert_string_equal(eb.msg, "No such container: nope");
	docker_release(&d);
	for (int i = 0; i < 3; i++)
		strbuf_release(&g.s[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_demux_every_cut),
		cmocka_unit_test(test_demux_sink_stops),
		cmocka_unit_test_setup_teardown(test_engine_name, fake_start, fake_stop),
		cmocka_unit_test_setup_teardown(test_pull_outcomes, fake_start, fake_stop),
		cmocka_unit_test_setup_teardown(test_call_passes_engine_message, fake_start, fake_stop),
		cmocka_unit_test_setup_teardown(test_attach_streams, fake_start, fake_stop),
	};
	curl_global_init(CURL_GLOBAL_DEFAULT);
	int ret = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return ret;
}
