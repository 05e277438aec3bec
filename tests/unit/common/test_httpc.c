/*
 * httpc with several masters (src/common/httpc.h) against real servers on
 * loopback (libmicrohttpd on free ports): leaders that answer, standbys
 * that answer 503 not_leader naming a leader or none, a server that takes
 * a request and stalls, and ports where nothing listens. The client must
 * reach the leader through standbys and refused connections, send nothing
 * twice that a server may have processed, and say which masters it tried.
 * Every test runs on both transports (libcurl's and libevent's).
 */
#include "base/compat.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/httpc.h"

enum role { LEADER, STANDBY, STALL, RATED };

struct server {
	struct MHD_Daemon *d;
	char url[64];
	enum role role;
	const char *names;      /* STANDBY: the leader it names, or NULL (null) */
	pthread_mutex_t lock;
	unsigned requests;      /* requests seen whole (body and all) */
	struct strbuf last;     /* "METHOD PATH BODY" of the last one */
};

struct upload {
	struct strbuf body;
};

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *text,
			     const char *leader)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	MHD_add_response_header(r, "Content-Type", "application/json");
	if (leader)
		MHD_add_response_header(r, "X-Yard-Leader", leader);
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
			       const char *method, const char *version, const char *data,
			       size_t *data_size, void **con_cls)
{
	struct server *s = cls;
	struct upload *u = *con_cls;
	char text[512];

	if (!u) {
		u = xcalloc(1, sizeof(*u));
		strbuf_init(&u->body, 0);
		*con_cls = u;
		return MHD_YES;
	}
	if (*data_size) {
		strbuf_add(&u->body, data, *data_size);
		*data_size = 0;
		return MHD_YES;
	}
	pthread_mutex_lock(&s->lock);
	unsigned seen = ++s->requests;
	strbuf_reset(&s->last);
	strbuf_addf(&s->last, "%s %s %s", method, url, u->body.buf);
	pthread_mutex_unlock(&s->lock);
	switch (s->role) {
	case LEADER:
		snprintf(text, sizeof(text), "{\"at\": \"%s\"}", s->url);
		return reply(conn, 200, text, NULL);
	case STANDBY:
		if (s->names)
			snprintf(text, sizeof(text),
				 "{\"error\": {\"code\": \"not_leader\", \"message\": \"this master is a "
				 "standby; the leader is at %s\", \"leader\": \"%s\"}}",
				 s->names, s->names);
		else
			snprintf(text, sizeof(text),
				 "{\"error\": {\"code\": \"not_leader\", \"message\": \"this master is a "
				 "standby; no leader is known\", \"leader\": null}}");
		return reply(conn, 503, text, s->names);
	case RATED: {
		/* 429 the first time (wait a second), then an answer with the
		 * headers a log read gets */
		struct MHD_Response *r;
		enum MHD_Result ret;
		bool first = seen == 1;
		snprintf(text, sizeof(text), "%s", first ? "{\"error\": {\"code\": \"rate_limited\", "
			 "\"message\": \"slow down\"}}" : "log bytes");
		r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_COPY);
		if (first) {
			MHD_add_response_header(r, "Retry-After", "1");
		} else {
			MHD_add_response_header(r, "Content-Type", "text/plain");
			MHD_add_response_header(r, "X-Yard-Offset", "9");
			MHD_add_response_header(r, "X-Yard-Size", "12");
			MHD_add_response_header(r, "X-Yard-Eof", "1");
		}
		ret = MHD_queue_response(conn, first ? 429 : 200, r);
		MHD_destroy_response(r);
		return ret;
	}
	case STALL:
	default: {
		/* took the request, answers past the client's timeout */
		struct timespec ts = { 1, 200 * 1000000L };
		nanosleep(&ts, NULL);
		return reply(conn, 200, "{}", NULL);
	}
	}
}

static void on_done(void *cls, struct MHD_Connection *conn, void **con_cls,
		    enum MHD_RequestTerminationCode toe)
{
	struct upload *u = *con_cls;

	if (u) {
		strbuf_release(&u->body);
		free(u);
	}
	*con_cls = NULL;
}

static void server_start(struct server *s, enum role role, const char *names)
{
	const union MHD_DaemonInfo *info;

	memset(s, 0, sizeof(*s));
	s->role = role;
	s->names = names;
	pthread_mutex_init(&s->lock, NULL);
	strbuf_init(&s->last, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = 0 };
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
				handler, s, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
				MHD_OPTION_SOCK_ADDR, &sin, MHD_OPTION_END);
	assert_non_null(s->d);
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%u", (unsigned)info->port);
}

/* Sets the leader a standby names (once that one has a port). */
static void server_name(struct server *s, const char *names)
{
	s->names = names;
}

static unsigned server_requests(struct server *s)
{
	pthread_mutex_lock(&s->lock);
	unsigned n = s->requests;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void server_stop(struct server *s)
{
	MHD_stop_daemon(s->d);
	strbuf_release(&s->last);
	pthread_mutex_destroy(&s->lock);
}

/* A loopback URL where nothing listens: a port bound, then closed. */
static void closed_url(char *out, size_t n)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = 0 };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	close(fd);
	snprintf(out, n, "http://127.0.0.1:%u", (unsigned)ntohs(sin.sin_port));
}

static int post(struct httpc *c, const char *body, struct httpc_response *res, struct errbuf *eb)
{
	httpc_response_release(res);
	httpc_response_init(res);
	errbuf_reset(eb);
	return httpc_request(c, "POST", "/v1/jobs", body, strlen(body), "application/json", res, eb);
}

/* [refused, standby naming the leader, leader]: the leader gets the
 * request, body and all, exactly once, and stays the master in use. */
static void test_reaches_leader(void **state)
{
	struct server standby, leader;
	char refused[64], list[256];
	struct httpc c;
	struct httpc_response res;
	struct errbuf eb = ERRBUF_INIT;

	server_start(&leader, LEADER, NULL);
	server_start(&standby, STANDBY, leader.url);
	closed_url(refused, sizeof(refused));
	snprintf(list, sizeof(list), "%s, %s/,%s", refused, standby.url, leader.url);
	httpc_init(&c, list, NULL, "tok");
	c.timeout_ms = 5000;
	assert_int_equal(c.nurls, 3);
	assert_string_equal(httpc_url(&c), refused);
	httpc_response_init(&res);

	assert_int_equal(post(&c, "{\"n\": 1}", &res, &eb), 0);
	assert_int_equal(res.status, 200);
	assert_string_equal(eb.msg, ""); /* the refusal on the way is no error of the call's */
	assert_int_equal(server_requests(&leader), 1);
	assert_int_equal(server_requests(&standby), 1);
	assert_string_equal(leader.last.buf, "POST /v1/jobs {\"n\": 1}");
	assert_string_equal(httpc_url(&c), leader.url);
	assert_false(c.refused);

	/* the next request goes straight to the leader */
	assert_int_equal(post(&c, "{\"n\": 2}", &res, &eb), 0);
	assert_int_equal(server_requests(&leader), 2);
	assert_int_equal(server_requests(&standby), 1);

	httpc_response_release(&res);
	httpc_release(&c);
	server_stop(&standby);
	server_stop(&leader);
}

/* A standby naming a leader that is not in the list: it is followed, and
 * added to the list. */
static void test_follows_named_leader(void **state)
{
	struct server standby, leader;
	struct httpc c;
	struct httpc_response res;
	struct errbuf eb = ERRBUF_INIT;

	server_start(&leader, LEADER, NULL);
	server_start(&standby, STANDBY, leader.url);
	httpc_init(&c, standby.url, NULL, NULL);
	c.timeout_ms = 5000;
	httpc_response_init(&res);

	assert_int_equal(post(&c, "{}", &res, &eb), 0);
	assert_int_equal(res.status, 200);
	assert_non_null(strstr(res.body.buf, leader.url));
	assert_int_equal(server_requests(&leader), 1);
	assert_int_equal(c.nurls, 2);
	assert_string_equal(c.urls[1], leader.url);
	assert_string_equal(httpc_url(&c), leader.url);

	httpc_response_release(&res);
	httpc_release(&c);
	server_stop(&standby);
	server_stop(&leader);
}

/* A standby that knows no leader: the next URL. */
static void test_standby_without_leader(void **state)
{
	struct server standby, leader;
	char list[256];
	struct httpc c;
	struct httpc_response res;
	struct errbuf eb = ERRBUF_INIT;

	server_start(&leader, LEADER, NULL);
	server_start(&standby, STANDBY, NULL);
	snprintf(list, sizeof(list), "%s,%s", standby.url, leader.url);
	httpc_init(&c, list, NULL, NULL);
	c.timeout_ms = 5000;
	httpc_response_init(&res);

	assert_int_equal(post(&c, "{}", &res, &eb), 0);
	assert_int_equal(res.status, 200);
	assert_int_equal(server_requests(&standby), 1);
	assert_int_equal(server_requests(&leader), 1);
	assert_int_equal(c.nurls, 2);
	assert_string_equal(httpc_url(&c), leader.url);

	httpc_response_release(&res);
	httpc_release(&c);
	server_stop(&standby);
	server_stop(&leader);
}

/* Nothing gets past: the error names every master tried; a standby's
 * not_leader is the error when one answered, and httpc_json then reports
 * no status, so that no caller takes it for the leader's answer. */
static void test_all_failing(void **state)
{
	struct server standby;
	char r1[64], r2[64], list[256];
	struct httpc c;
	struct httpc_response res;
	struct errbuf eb = ERRBUF_INIT;

	closed_url(r1, sizeof(r1));
	closed_url(r2, sizeof(r2));
	snprintf(list, sizeof(list), "%s,%s", r1, r2);
	httpc_init(&c, list, NULL, NULL);
	httpc_response_init(&res);
	assert_int_equal(post(&c, "{}", &res, &eb), YERR(UNAVAILABLE));
	assert_int_equal(res.status, 0);
	assert_non_null(strstr(eb.msg, "cannot reach"));
	assert_non_null(strstr(eb.msg, r1));
	assert_non_null(strstr(eb.msg, r2));
	assert_true(c.refused);
	httpc_release(&c);

	/* a standby that knows no leader, and a master that is down */
	server_start(&standby, STANDBY, NULL);
	snprintf(list, sizeof(list), "%s,%s", r1, standby.url);
	httpc_init(&c, list, NULL, NULL);
	assert_int_equal(post(&c, "{}", &res, &eb), YERR(NOT_LEADER));
	assert_int_equal(res.status, 503);
	assert_non_null(strstr(eb.msg, "this master is a standby"));
	assert_non_null(strstr(eb.msg, r1));
	assert_non_null(strstr(eb.msg, standby.url));
	assert_false(c.refused);
	assert_int_equal(server_requests(&standby), 1);

	long status = 0;
	json_t *out = NULL;
	errbuf_reset(&eb);
	assert_int_equal(httpc_json(&c, "GET", "/v1/jobs", NULL, &out, &status, &eb),
			 YERR(NOT_LEADER));
	assert_int_equal(status, 0);
	assert_null(out);
	httpc_release(&c);

	/* one URL, a standby: the same, as the agent's fencing relies on */
	httpc_init(&c, standby.url, NULL, NULL);
	errbuf_reset(&eb);
	assert_int_equal(httpc_json(&c, "GET", "/v1/jobs", NULL, &out, &status, &eb),
			 YERR(NOT_LEADER));
	assert_int_equal(status, 0);
	assert_null(strstr(eb.msg, "masters tried"));
	httpc_release(&c);

	httpc_response_release(&res);
	server_stop(&standby);
}

/* Two standbys naming each other: a bounded number of hops, then the
 * not_leader error. */
static void test_standbys_in_a_loop(void **state)
{
	struct server a, b;
	char list[256];
	struct httpc c;
	struct httpc_response res;
	struct errbuf eb = ERRBUF_INIT;

	server_start(&a, STANDBY, NULL);
	server_start(&b, STANDBY, a.url);
	server_name(&a, b.url);
	snprintf(list, sizeof(list), "%s,%s", a.url, b.url);
	httpc_init(&c, list, NULL, NULL);
	httpc_response_init(&res);
	assert_int_equal(post(&c, "{}", &res, &eb), YERR(NOT_LEADER));
	unsigned n = server_requests(&a) + server_requests(&b);
	assert_true(n >= 2);
	assert_true(n <= 2 + HTTPC_LEADER_HOPS);
	httpc_response_release(&res);
	httpc_release(&c);
	server_stop(&a);
	server_stop(&b);
}

/* A POST to a server that took it and stalls past the timeout may have
 * been processed: it is not sent to the next master, and the next request
 * goes there. */
static void test_stall_not_resent(void **state)
{
	struct server stall, leader;
	char list[256];
	struct httpc c;
	struct httpc_response res;
	struct errbuf eb = ERRBUF_INIT;

	server_start(&stall, STALL, NULL);
	server_start(&leader, LEADER, NULL);
	snprintf(list, sizeof(list), "%s,%s", stall.url, leader.url);
	httpc_init(&c, list, NULL, NULL);
	c.timeout_ms = 300;
	httpc_response_init(&res);

	assert_int_equal(post(&c, "{\"submit\": 1}", &res, &eb), YERR(UNAVAILABLE));
	assert_non_null(strstr(eb.msg, stall.url));
	assert_int_equal(server_requests(&stall), 1);
	assert_int_equal(server_requests(&leader), 0);
	assert_false(c.refused);
	assert_string_equal(httpc_url(&c), leader.url);

	c.timeout_ms = 5000;
	assert_int_equal(post(&c, "{\"submit\": 2}", &res, &eb), 0);
	assert_int_equal(res.status, 200);
	assert_int_equal(server_requests(&leader), 1);
	assert_string_equal(leader.last.buf, "POST /v1/jobs {\"submit\": 2}");
	assert_int_equal(server_requests(&stall), 1);

	httpc_response_release(&res);
	httpc_release(&c);
	server_stop(&stall);
	server_stop(&leader);
}

/* A 429 is waited out for its Retry-After and sent again; an answer's
 * headers and body come back as they were sent. */
static void test_retry_after_and_headers(void **state)
{
	struct server rated;
	struct httpc c;
	struct httpc_response res;
	struct errbuf eb = ERRBUF_INIT;
	struct timespec t0, t1;

	server_start(&rated, RATED, NULL);
	httpc_init(&c, rated.url, NULL, NULL);
	c.timeout_ms = 5000;
	c.retry_429 = 1;
	httpc_response_init(&res);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(httpc_request(&c, "GET", "/v1/jobs/1/logs", NULL, 0, NULL, &res, &eb), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_int_equal(res.status, 200);
	assert_int_equal(server_requests(&rated), 2);
	/* it waited the second Retry-After asked for before sending again */
	assert_true(t1.tv_sec * 1000 + t1.tv_nsec / 1000000 - (t0.tv_sec * 1000 + t0.tv_nsec / 1000000) >= 1000);
	assert_int_equal(res.body.len, 9);
	assert_memory_equal(res.body.buf, "log bytes", 9);
	assert_string_equal(res.offset_hdr, "9");
	assert_string_equal(res.size_hdr, "12");
	assert_string_equal(res.eof_hdr, "1");
	assert_string_equal(res.content_type, "text/plain");
	assert_null(res.leader_hdr);
	/* a local address is known after a request */
	char *ip = httpc_local_ip(&c);
	assert_non_null(ip);
	assert_string_equal(ip, "127.0.0.1");
	free(ip);
	httpc_response_release(&res);
	httpc_release(&c);
	server_stop(&rated);
}

/* A bulk client is on libcurl whichever transport the program chose, and
 * a client made like another keeps the other's transport. */
static void test_bulk_on_libcurl(void **state)
{
	struct server leader;
	struct httpc plain, bulk, like;
	struct httpc_response res;
	struct errbuf eb = ERRBUF_INIT;

	server_start(&leader, LEADER, NULL);
	httpc_init(&plain, leader.url, NULL, "tok");
	httpc_init_bulk(&bulk, leader.url, NULL, "tok");
	assert_ptr_equal(bulk.tp, &httpc_curl);
	httpc_init_like(&like, &bulk);
	assert_ptr_equal(like.tp, &httpc_curl);
	httpc_release(&like);
	httpc_init_like(&like, &plain);
	assert_ptr_equal(like.tp, plain.tp);
	bulk.timeout_ms = 5000;
	httpc_response_init(&res);
	assert_int_equal(post(&bulk, "{\"n\": 1}", &res, &eb), 0);
	assert_int_equal(res.status, 200);
	assert_string_equal(leader.last.buf, "POST /v1/jobs {\"n\": 1}");
	httpc_response_release(&res);
	httpc_release(&like);
	httpc_release(&bulk);
	httpc_release(&plain);
	server_stop(&leader);
}

/* httpc_urls_check names the bad entry. */
static void test_urls_check(void **state)
{
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(httpc_urls_check("http://a:1", "--master", &eb), 0);
	assert_int_equal(httpc_urls_check("http://a:1, https://b:2/", "--master", &eb), 0);
	const char *bad[] = { "a:1", "http://a:1,", "http://a:1,,http://b", "http://a,ftp://b",
			      "https://", "http://a b" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		errbuf_reset(&eb);
		assert_int_equal(httpc_urls_check(bad[i], "YARD_MASTER", &eb), YERR(BAD_REQUEST));
		assert_non_null(strstr(eb.msg, "YARD_MASTER '"));
	}
	errbuf_reset(&eb);
	httpc_urls_check("http://a,ftp://b", "--master", &eb);
	assert_string_equal(eb.msg,
			    "--master 'http://a,ftp://b': 'ftp://b' is not an http:// or https:// URL");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reaches_leader),
		cmocka_unit_test(test_follows_named_leader),
		cmocka_unit_test(test_standby_without_leader),
		cmocka_unit_test(test_all_failing),
		cmocka_unit_test(test_standbys_in_a_loop),
		cmocka_unit_test(test_stall_not_resent),
		cmocka_unit_test(test_retry_after_and_headers),
		cmocka_unit_test(test_bulk_on_libcurl),
		cmocka_unit_test(test_urls_check),
	};
	httpc_global_init(&httpc_curl);
	int rc = cmocka_run_group_tests_name("httpc on libcurl", tests, NULL, NULL);
	httpc_global_init(&httpc_ev);
	rc |= cmocka_run_group_tests_name("httpc on libevent", tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
