/*
 * Metric shipping (src/agent/metricship.h) against a fake master that keeps
 * the protocol's offsets (libmicrohttpd on a free port) and can lose
 * acknowledgements or fail requests. Whatever fails, and however often the
 * agent restarts or loses its cursors, the master must end up with every
 * point of the output exactly once, in order, with the steps a parser that
 * read the whole output would give.
 */
#include "base/compat.h"

#include <curl/curl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <setjmp.h>
#include <cmocka.h>

#include "agent/metricship.h"
#include "base/clock.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

struct fake {
	struct MHD_Daemon *d;
	char url[64];
	pthread_mutex_t lock;
	uint64_t cursor[2];
	struct strbuf got[2];   /* "name@step=value\n" per stored point */
	unsigned requests, stored_batches, duplicates, conflicts;
	unsigned lose_every;    /* store but answer 500: a lost acknowledgement */
	unsigned fail_every;    /* answer 503 without storing */
	bool bad_time;          /* a point came without a time */
};

static struct fake fake;

struct body {
	struct strbuf sb;
};

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *fmt, uint64_t v)
{
	char text[128];
	struct MHD_Response *r;
	enum MHD_Result ret;

	snprintf(text, sizeof(text), fmt, v);
	r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_COPY);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **con_cls)
{
	struct fake *f = cls;
	struct body *b = *con_cls;
	const char *stream = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "stream");
	const char *off = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");
	json_t *doc, *pts, *p;
	uint64_t offset, end;
	size_t i;
	int s;
	enum MHD_Result ret;

	if (!b) {
		b = xcalloc(1, sizeof(*b));
		strbuf_init(&b->sb, 0);
		*con_cls = b;
		return MHD_YES;
	}
	if (*upload_size) {
		strbuf_add(&b->sb, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	doc = json_loadb(b->sb.buf, b->sb.len, 0, NULL);
	s = stream && !strcmp(stream, "stderr") ? 1 : 0;
	offset = off ? strtoull(off, NULL, 10) : 0;
	end = (uint64_t)json_integer_value(json_object_get(doc, "end"));
	pts = json_object_get(doc, "points");
	pthread_mutex_lock(&f->lock);
	f->requests++;
	if (strcmp(method, "POST") || !strstr(url, "/v1/tasks/5/metrics") || !json_is_array(pts) ||
	    end <= offset) {
		ret = answer(c, 400, "{\"error\": {\"code\": \"bad_request\", \"message\": \"bad batch %llu\"}}",
			     (unsigned long long)end);
	} else if (f->fail_every && f->requests % f->fail_every == 0) {
		ret = answer(c, 503, "{\"error\": {\"code\": \"unavailable\", \"message\": \"try %llu\"}}", 0);
	} else if (offset == f->cursor[s]) {
		json_array_foreach(pts, i, p) {
			const json_t *step = json_object_get(p, "step");
			strbuf_addf(&f->got[s], "%s@", json_string_value(json_object_get(p, "name")));
			if (json_is_integer(step))
				strbuf_addf(&f->got[s], "%" JSON_INTEGER_FORMAT, json_integer_value(step));
			else
				strbuf_addstr(&f->got[s], "-");
			strbuf_addf(&f->got[s], "=%g\n", json_number_value(json_object_get(p, "value")));
			if (json_integer_value(json_object_get(p, "time")) < 1700000000000000LL)
				f->bad_time = true;
		}
		f->cursor[s] = end;
		f->stored_batches++;
		if (f->lose_every && f->stored_batches % f->lose_every == 0)
			ret = answer(c, 500, "{\"error\": {\"code\": \"internal\", \"message\": \"lost %llu\"}}", 0);
		else
			ret = answer(c, 200, "{\"offset\": %llu}", (unsigned long long)end);
	} else if (offset < f->cursor[s] && end <= f->cursor[s]) {
		f->duplicates++;
		ret = answer(c, 200, "{\"offset\": %llu}", (unsigned long long)f->cursor[s]);
	} else {
		f->conflicts++;
		ret = answer(c, 409, "{\"error\": {\"code\": \"conflict\", \"message\": \"out of step\"}, "
			     "\"offset\": %llu}", (unsigned long long)f->cursor[s]);
	}
	pthread_mutex_unlock(&f->lock);
	json_decref(doc);
	return ret;
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
		    enum MHD_RequestTerminationCode toe)
{
	struct body *b = *con_cls;

	if (b) {
		strbuf_release(&b->sb);
		free(b);
	}
	*con_cls = NULL;
}

struct fixture {
	char dir[40];
	struct httpc c;
	struct strbuf want[2]; /* what the fake must end up with */
};

static int setup(void **state)
{
	struct fixture *fx = xcalloc(1, sizeof(*fx));
	const union MHD_DaemonInfo *info;

	memset(&fake, 0, sizeof(fake));
	pthread_mutex_init(&fake.lock, NULL);
	for (int i = 0; i < 2; i++) {
		strbuf_init(&fake.got[i], 0);
		strbuf_init(&fx->want[i], 0);
	}
	fake.d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
				  handler, &fake, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
				  MHD_OPTION_END);
	if (!fake.d)
		return -1;
	info = MHD_get_daemon_info(fake.d, MHD_DAEMON_INFO_BIND_PORT);
	snprintf(fake.url, sizeof(fake.url), "http://127.0.0.1:%u", (unsigned)info->port);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/yard-metricship-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	httpc_init(&fx->c, fake.url, NULL, "yard_a_test");
	fx->c.timeout_ms = 10000;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	MHD_stop_daemon(fake.d);
	httpc_release(&fx->c);
	rm_rf(fx->dir);
	for (int i = 0; i < 2; i++) {
		strbuf_release(&fake.got[i]);
		strbuf_release(&fx->want[i]);
	}
	pthread_mutex_destroy(&fake.lock);
	free(fx);
	return 0;
}

static void append_n(struct fixture *fx, int stream, const char *text, size_t len)
{
	char *path = xasprintf("%s/%s", fx->dir, stream ? "stderr" : "stdout");
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write_all(fd, text, len), 0);
	close(fd);
	free(path);
}

static void append(struct fixture *fx, int stream, const char *text)
{
	append_n(fx, stream, text, strlen(text));
}

/* Output for stdout: @yard lines, Caffe lines whose test outputs need the
 * step of the Iteration line before them, MXNet batch lines whose steps
 * count every earlier epoch's batches (a parser that lost its state on the
 * way numbers them wrong), chatter, and an overlong line whose point must
 * not count. */
static void write_part(struct fixture *fx, int from, int to)
{
	struct strbuf out = STRBUF_INIT;

	for (int i = from; i < to; i++) {
		strbuf_addf(&out, "@yard {\"step\": %d, \"loss\": %d, \"ok\": true}\n", i, i % 97);
		strbuf_addf(&fx->want[0], "loss@%d=%d\n", i, i % 97);
		if (i % 10 == 3) {
			strbuf_addf(&out, "I0412 solver.cpp:330] Iteration %d, Testing net (#0)\n"
					  "I0412 solver.cpp:397]     Test net output #0: accuracy = %d\n", i * 10, i);
			strbuf_addf(&fx->want[0], "test/accuracy@%d=%d\n", i * 10, i);
		}
		if (i % 50 == 0) {
			int epoch = i / 1000, batch = i % 1000 + 1;
			strbuf_addf(&out, "INFO:root:Epoch[%d] Batch [%d]\tSpeed: %d samples/sec\n", epoch, batch,
				    i % 11);
			strbuf_addf(&fx->want[0], "samples_per_sec@%d=%d\n", epoch * 951 + batch, i % 11);
		}
		if (i % 1000 == 500) {
			strbuf_addstr(&out, "@yard {\"overlong\": 1, \"pad\": \"");
			for (int k = 0; k < 70000; k++)
				strbuf_addch(&out, 'x');
			strbuf_addstr(&out, "\"}\n");
		}
		if (i % 7 == 0)
			strbuf_addstr(&out, "just a line of output\n");
	}
	append_n(fx, 0, out.buf, out.len);
	strbuf_release(&out);
}

/* Runs metric_ship_run a few times, restarting the "agent" (a new struct
 * metric_ship from the task dir) every restart_every runs, and deleting its
 * cursors every forget_every restarts. Returns the last result. */
static int run_for(struct fixture *fx, int runs, bool finished, int restart_every, int forget_every)
{
	struct metric_ship *ms = metric_ship_new(fx->dir, 5);
	int r = 0, restarts = 0;

	for (int k = 0; k < runs; k++) {
		struct errbuf eb = ERRBUF_INIT;
		long status = 0;
		r = metric_ship_run(ms, &fx->c, finished, &status, &eb);
		if (r < 0 && status != 500 && status != 503)
			fail_msg("metric_ship_run: %s (HTTP %ld)", eb.msg, status);
		if (r == 1 && finished)
			break;
		if (restart_every && k % restart_every == restart_every - 1) {
			metric_ship_free(ms);
			if (forget_every && ++restarts % forget_every == 0) {
				char *p = xasprintf("%s/metrics.json", fx->dir);
				unlink(p);
				free(p);
			}
			ms = metric_ship_new(fx->dir, 5);
		}
	}
	metric_ship_free(ms);
	return r;
}

static void check_got(struct fixture *fx)
{
	for (int i = 0; i < 2; i++) {
		if (strcmp(fake.got[i].buf, fx->want[i].buf)) {
			size_t k = 0;
			while (fake.got[i].buf[k] && fake.got[i].buf[k] == fx->want[i].buf[k])
				k++;
			print_message("stream %d differs at byte %zu: got ...%.60s, want ...%.60s\n", i, k,
				      fake.got[i].buf + (k > 20 ? k - 20 : 0), fx->want[i].buf + (k > 20 ? k - 20 : 0));
		}
		assert_int_equal(fake.got[i].len, fx->want[i].len);
		assert_string_equal(fake.got[i].buf, fx->want[i].buf);
	}
	assert_false(fake.bad_time);
}

/* A clean run: every point once; a last line without '\n' waits for the end. */
static void test_clean(void **state)
{
	struct fixture *fx = *state;

	write_part(fx, 0, 30000);
	append(fx, 1, "1875/1875 [====] - 1s - loss: 0.5\n@yard {\"a\": 1}");
	strbuf_addstr(&fx->want[1], "loss@-=0.5\n");
	assert_int_equal(run_for(fx, 20, false, 0, 0), 0);
	/* the unfinished last line of stderr is not shipped yet */
	assert_string_equal(fake.got[1].buf, fx->want[1].buf);
	strbuf_addstr(&fx->want[1], "a@-=1\n");
	assert_int_equal(run_for(fx, 20, true, 0, 0), 1);
	check_got(fx);
	/* batches are bounded: 30,000 @yard points and more need several */
	assert_true(fake.stored_batches >= 4);
	/* nothing is sent again once all is acknowledged */
	{
		unsigned before = fake.requests;
		assert_int_equal(run_for(fx, 3, true, 0, 0), 1);
		assert_int_equal(fake.requests, before);
	}
}

/* A "checkpoint" line is timed when it is read; the time survives an agent
 * restart (metrics.json) and only moves on with a later checkpoint line. */
static void test_checkpoint_at(void **state)
{
	struct fixture *fx = *state;
	struct errbuf eb = ERRBUF_INIT;
	long status = 0;
	struct metric_ship *ms = metric_ship_new(fx->dir, 5);

	append(fx, 0, "@yard {\"step\": 1, \"loss\": 2}\n");
	strbuf_addstr(&fx->want[0], "loss@1=2\n");
	assert_true(metric_ship_run(ms, &fx->c, false, &status, &eb) >= 0);
	assert_int_equal(metric_ship_checkpoint_at(ms), 0);
	int64_t before = (int64_t)wall_us();
	append(fx, 1, "@yard {\"checkpoint\": 7}\n");
	strbuf_addstr(&fx->want[1], "checkpoint@-=7\n");
	assert_true(metric_ship_run(ms, &fx->c, false, &status, &eb) >= 0);
	int64_t at = metric_ship_checkpoint_at(ms);
	assert_true(at >= before && at <= (int64_t)wall_us());
	metric_ship_free(ms);
	ms = metric_ship_new(fx->dir, 5);
	assert_int_equal(metric_ship_checkpoint_at(ms), at);
	assert_int_equal(metric_ship_run(ms, &fx->c, true, &status, &eb), 1);
	assert_int_equal(metric_ship_checkpoint_at(ms), at);
	metric_ship_free(ms);
	assert_int_equal(metric_ship_checkpoint_at(NULL), 0);
	check_got(fx);
}

/* Lost acknowledgements, failed requests, restarts and lost cursors, while
 * the output grows: still every point once, with its steps. */
static void test_failures_and_restarts(void **state)
{
	struct fixture *fx = *state;

	fake.lose_every = 3;
	fake.fail_every = 5;
	write_part(fx, 0, 20000);
	/* a partial line: the rest of it comes with the next part */
	append(fx, 0, "@yard {\"split\"");
	run_for(fx, 15, false, 2, 0);
	append(fx, 0, ": 3}\n");
	strbuf_addstr(&fx->want[0], "split@-=3\n");
	write_part(fx, 20000, 40000);
	run_for(fx, 15, false, 3, 2);
	write_part(fx, 40000, 50000);
	append(fx, 1, "Iteration 40, lr = 0.5\n");
	strbuf_addstr(&fx->want[1], "lr@40=0.5\n");
	/* the end: restarts that forget the cursors every time */
	assert_int_equal(run_for(fx, 400, true, 2, 1), 1);
	check_got(fx);
	print_message("%u requests, %u batches stored, %u duplicates, %u conflicts\n", fake.requests,
		      fake.stored_batches, fake.duplicates, fake.conflicts);
	assert_true(fake.duplicates > 0);
}

static void copy_file(const char *from, const char *to)
{
	struct strbuf sb = STRBUF_INIT;

	assert_int_equal(strbuf_read_file(&sb, from, 0), 0);
	assert_int_equal(write_file_replace(to, sb.buf, sb.len, 0644), 0);
	strbuf_release(&sb);
}

/* A cursor file older than the master's cursor (restored from a copy, or
 * written before a power loss) while the output grew: the first batch
 * overlaps what is stored, the master answers 409 with its offset, and the
 * agent parses on from there, with the parser's state of that offset. */
static void test_stale_cursor(void **state)
{
	struct fixture *fx = *state;
	char *cur = xasprintf("%s/metrics.json", fx->dir), *old = xasprintf("%s/old.json", fx->dir);

	write_part(fx, 0, 2000);
	assert_int_equal(run_for(fx, 2, false, 0, 0), 1);
	copy_file(cur, old);
	write_part(fx, 2000, 4000);
	assert_int_equal(run_for(fx, 2, false, 0, 0), 1);
	copy_file(old, cur);
	write_part(fx, 4000, 6000);
	assert_int_equal(run_for(fx, 5, true, 0, 0), 1);
	check_got(fx);
	assert_int_equal(fake.conflicts, 1);
	assert_int_equal(fake.duplicates, 0);
	free(cur);
	free(old);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_clean, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failures_and_restarts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_cursor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_at, setup, teardown),
	};
	int rc;

	httpc_global_init(&httpc_curl);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
