/*
 * The API client against a fake master (libmicrohttpd on a free port): each
 * test sets the canned reply, calls a client function and checks the request
 * the fake received against docs/protocol.md.
 */
#include "base/compat.h"

#include <curl/curl.h>
#include <microhttpd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/client.h"

struct fake {
	struct MHD_Daemon *d;
	char url[64];
	/* the canned reply */
	unsigned status;
	const char *reply;
	size_t reply_len;
	const char *hdr_offset, *hdr_size, *hdr_eof;
	/* what the last request held */
	char method[16];
	char path[256];
	char auth[256];
	char ctype[128];
	char q_state[64], q_user[64], q_limit[64], q_view[64], q_task[64], q_stream[64], q_offset[64],
		q_follow[64], q_qlimit[64];
	struct strbuf body;
};

static struct fake fake;

static void copy_value(struct MHD_Connection *c, enum MHD_ValueKind kind, const char *key,
		       char *dst, size_t len)
{
	const char *v = MHD_lookup_connection_value(c, kind, key);
	snprintf(dst, len, "%s", v ? v : "(none)");
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	struct fake *f = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (!*con_cls) {
		*con_cls = f;
		strbuf_reset(&f->body);
		return MHD_YES;
	}
	if (*upload_size) {
		strbuf_add(&f->body, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	snprintf(f->method, sizeof(f->method), "%s", method);
	snprintf(f->path, sizeof(f->path), "%s", url);
	copy_value(c, MHD_HEADER_KIND, "Authorization", f->auth, sizeof(f->auth));
	copy_value(c, MHD_HEADER_KIND, "Content-Type", f->ctype, sizeof(f->ctype));
	copy_value(c, MHD_GET_ARGUMENT_KIND, "state", f->q_state, sizeof(f->q_state));
	copy_value(c, MHD_GET_ARGUMENT_KIND, "user", f->q_user, sizeof(f->q_user));
	copy_value(c, MHD_GET_ARGUMENT_KIND, "limit", f->q_limit, sizeof(f->q_limit));
	copy_value(c, MHD_GET_ARGUMENT_KIND, "view", f->q_view, sizeof(f->q_view));
	copy_value(c, MHD_GET_ARGUMENT_KIND, "task", f->q_task, sizeof(f->q_task));
	copy_value(c, MHD_GET_ARGUMENT_KIND, "stream", f->q_stream, sizeof(f->q_stream));
	copy_value(c, MHD_GET_ARGUMENT_KIND, "offset", f->q_offset, sizeof(f->q_offset));
	copy_value(c, MHD_GET_ARGUMENT_KIND, "follow", f->q_follow, sizeof(f->q_follow));
	r = MHD_create_response_from_buffer(f->reply_len, (void *)f->reply, MHD_RESPMEM_MUST_COPY);
	if (f->hdr_offset)
		MHD_add_response_header(r, "X-Yard-Offset", f->hdr_offset);
	if (f->hdr_size)
		MHD_add_response_header(r, "X-Yard-Size", f->hdr_size);
	if (f->hdr_eof)
		MHD_add_response_header(r, "X-Yard-Eof", f->hdr_eof);
	ret = MHD_queue_response(c, f->status, r);
	MHD_destroy_response(r);
	return ret;
}

static void reply(unsigned status, const char *body)
{
	fake.status = status;
	fake.reply = body;
	fake.reply_len = strlen(body);
	fake.hdr_offset = fake.hdr_size = fake.hdr_eof = NULL;
}

static int setup(void **state)
{
	const union MHD_DaemonInfo *info;

	strbuf_init(&fake.body, 0);
	fake.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
				  NULL, handler, &fake, MHD_OPTION_END);
	if (!fake.d)
		return -1;
	info = MHD_get_daemon_info(fake.d, MHD_DAEMON_INFO_BIND_PORT);
	snprintf(fake.url, sizeof(fake.url), "http://127.0.0.1:%u/", (unsigned)info->port);
	return 0;
}

static int teardown(void **state)
{
	MHD_stop_daemon(fake.d);
	strbuf_release(&fake.body);
	return 0;
}

static void test_submit(void **state)
{
	struct client c;
	struct errbuf eb = ERRBUF_INIT;
	json_t *spec = json_pack("{s:s, s:[s]}", "name", "hello", "command", "/bin/true");
	json_t *job = NULL, *sent;

	reply(201, "{\"id\": 17, \"state\": \"queued\"}");
	client_open(&c, fake.url, NULL, "yard_u_tok");
	assert_int_equal(client_submit(&c, spec, "sha256:abc", &job, &eb), 0);
	assert_string_equal(fake.method, "POST");
	assert_string_equal(fake.path, "/v1/jobs");
	assert_string_equal(fake.auth, "Bearer yard_u_tok");
	assert_string_equal(fake.ctype, "application/json");
	sent = json_loadb(fake.body.buf, fake.body.len, 0, NULL);
	assert_non_null(sent);
	assert_true(json_equal(json_object_get(sent, "spec"), spec));
	assert_string_equal(json_string_value(json_object_get(sent, "code")), "sha256:abc");
	assert_int_equal(json_integer_value(json_object_get(job, "id")), 17);
	json_decref(sent);
	json_decref(job);

	/* without code the member is absent */
	assert_int_equal(client_submit(&c, spec, NULL, &job, &eb), 0);
	sent = json_loadb(fake.body.buf, fake.body.len, 0, NULL);
	assert_null(json_object_get(sent, "code"));
	json_decref(sent);
	json_decref(job);
	json_decref(spec);
	client_close(&c);
}

static void test_error_reply(void **state)
{
	struct client c;
	struct errbuf eb = ERRBUF_INIT;
	json_t *job = NULL;
	json_t *spec = json_object();

	reply(400, "{\"error\": {\"code\": \"invalid_spec\", \"message\": "
		   "\"tasks.worker.gpus: expected an integer >= 0, got \\\"two\\\"\", "
		   "\"field\": \"tasks.worker.gpus\"}}");
	client_open(&c, fake.url, NULL, "t");
	assert_int_equal(client_submit(&c, spec, NULL, &job, &eb), YERR(INVALID_SPEC));
	assert_null(job);
	assert_string_equal(eb.field, "tasks.worker.gpus");
	assert_string_equal(eb.msg, "tasks.worker.gpus: expected an integer >= 0, got \"two\"");

	reply(403, "{\"error\": {\"code\": \"forbidden\", \"message\": \"not your job\"}}");
	assert_int_equal(client_cancel(&c, 3, &job, &eb), YERR(FORBIDDEN));
	assert_string_equal(fake.method, "POST");
	assert_string_equal(fake.path, "/v1/jobs/3/cancel");
	assert_string_equal(eb.msg, "not your job");
	json_decref(spec);
	client_close(&c);
}

static void test_jobs_list_and_get(void **state)
{
	struct client c;
	struct errbuf eb = ERRBUF_INIT;
	struct client_jobs_filter f = { "running", "bob smith", 5, true };
	json_t *out = NULL;

	reply(200, "{\"jobs\": []}");
	client_open(&c, fake.url, NULL, NULL);
	assert_int_equal(client_jobs_list(&c, &f, &out, &eb), 0);
	assert_string_equal(fake.method, "GET");
	assert_string_equal(fake.path, "/v1/jobs");
	assert_string_equal(fake.q_state, "running");
	assert_string_equal(fake.q_user, "bob smith");
	assert_string_equal(fake.q_limit, "5");
	assert_string_equal(fake.q_view, "summary");
	assert_string_equal(fake.auth, "(none)");
	assert_true(json_is_array(json_object_get(out, "jobs")));
	json_decref(out);

	assert_int_equal(client_jobs_list(&c, NULL, &out, &eb), 0);
	assert_string_equal(fake.q_state, "(none)");
	assert_string_equal(fake.q_view, "(none)");
	json_decref(out);

	reply(200, "{\"id\": 42}");
	assert_int_equal(client_job_get(&c, 42, &out, &eb), 0);
	assert_string_equal(fake.path, "/v1/jobs/42");
	json_decref(out);

	reply(200, "{\"nodes\": []}");
	assert_int_equal(client_nodes(&c, &out, &eb), 0);
	assert_string_equal(fake.path, "/v1/nodes");
	json_decref(out);
	reply(200, "{\"queue\": []}");
	assert_int_equal(client_queue(&c, &out, &eb), 0);
	assert_string_equal(fake.path, "/v1/queue");
	json_decref(out);
	client_close(&c);
}

static void test_logs(void **state)
{
	struct client c;
	struct errbuf eb = ERRBUF_INIT;
	struct client_log_req req = { "worker/1", "stderr", 100, true, 1 << 20, false, 0 };
	struct client_log_chunk ch;
	char *path = client_logs_path(7, &req);

	assert_string_equal(path,
			    "/v1/jobs/7/logs?task=worker%2F1&stream=stderr&offset=100&follow=1&limit=1048576");
	free(path);
	/* an earlier attempt: asked for by number, 0 included */
	req.has_attempt = true;
	req.attempt = 0;
	path = client_logs_path(7, &req);
	assert_string_equal(path, "/v1/jobs/7/logs?task=worker%2F1&attempt=0&stream=stderr&offset=100"
				  "&follow=1&limit=1048576");
	free(path);
	req.has_attempt = false;

	client_log_chunk_init(&ch);
	fake.status = 200;
	fake.reply = "ab\0cd";
	fake.reply_len = 5;
	fake.hdr_offset = "105";
	fake.hdr_size = "105";
	fake.hdr_eof = "1";
	client_open(&c, fake.url, NULL, "t");
	assert_int_equal(client_logs_read(&c, 7, &req, &ch, &eb), 0);
	assert_string_equal(fake.path, "/v1/jobs/7/logs");
	assert_string_equal(fake.q_task, "worker/1");
	assert_string_equal(fake.q_stream, "stderr");
	assert_string_equal(fake.q_offset, "100");
	assert_string_equal(fake.q_follow, "1");
	assert_int_equal(ch.data.len, 5);
	assert_memory_equal(ch.data.buf, "ab\0cd", 5);
	assert_int_equal(ch.next_offset, 105);
	assert_int_equal(ch.size, 105);
	assert_true(ch.eof);

	/* no headers: offset advances by what came */
	reply(200, "xyz");
	req.follow = false;
	req.task = NULL;
	assert_int_equal(client_logs_read(&c, 7, &req, &ch, &eb), 0);
	assert_string_equal(fake.q_task, "(none)");
	assert_string_equal(fake.q_follow, "(none)");
	assert_int_equal(ch.next_offset, 103);
	assert_false(ch.eof);
	client_log_chunk_release(&ch);
	client_close(&c);
}

static void test_code_upload(void **state)
{
	struct client c;
	struct errbuf eb = ERRBUF_INIT;
	char *digest = NULL;

	reply(201, "{\"digest\": \"sha256:0123\", \"size\": 4}");
	client_open(&c, fake.url, NULL, "t");
	assert_int_equal(client_code_upload(&c, "\x1f\x8b\0x", 4, &digest, NULL, &eb), 0);
	assert_string_equal(fake.method, "POST");
	assert_string_equal(fake.path, "/v1/code");
	assert_string_equal(fake.ctype, "application/gzip");
	assert_int_equal(fake.body.len, 4);
	assert_memory_equal(fake.body.buf, "\x1f\x8b\0x", 4);
	assert_string_equal(digest, "sha256:0123");
	free(digest);

	reply(413, "{\"error\": {\"code\": \"too_large\", \"message\": \"code is over 256 MiB\"}}");
	assert_int_equal(client_code_upload(&c, "x", 1, &digest, NULL, &eb), YERR(TOO_LARGE));
	assert_null(digest);
	client_close(&c);
}

static void test_token_create(void **state)
{
	struct client c;
	struct errbuf eb = ERRBUF_INIT;
	json_t *out = NULL, *sent;

	reply(201, "{\"user\": \"bob\", \"admin\": false, \"token\": \"yard_u_x\"}");
	client_open(&c, fake.url, NULL, "admin");
	assert_int_equal(client_token_create(&c, "bob", false, "vision", true, NULL, &out, &eb), 0);
	assert_string_equal(fake.path, "/v1/tokens");
	sent = json_loadb(fake.body.buf, fake.body.len, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(sent, "user")), "bob");
	assert_true(json_is_false(json_object_get(sent, "admin")));
	assert_string_equal(json_string_value(json_object_get(sent, "team")), "vision");
	assert_true(json_is_true(json_object_get(sent, "team_admin")));
	assert_string_equal(json_string_value(json_object_get(out, "token")), "yard_u_x");
	json_decref(sent);
	json_decref(out);
	client_close(&c);
}

static void test_unreachable(void **state)
{
	struct client c;
	struct errbuf eb = ERRBUF_INIT;
	json_t *out = NULL;

	/* port 1 on loopback: nothing listens there */
	client_open(&c, "http://127.0.0.1:1", NULL, "t");
	assert_int_equal(client_job_get(&c, 1, &out, &eb), YERR(UNAVAILABLE));
	assert_null(out);
	assert_non_null(strstr(eb.msg, "cannot reach"));
	client_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_submit),
		cmocka_unit_test(test_error_reply),
		cmocka_unit_test(test_jobs_list_and_get),
		cmocka_unit_test(test_logs),
		cmocka_unit_test(test_code_upload),
		cmocka_unit_test(test_token_create),
		cmocka_unit_test(test_unreachable),
	};
	httpc_global_init(&httpc_curl);
	return cmocka_run_group_tests(tests, setup, teardown);
}
