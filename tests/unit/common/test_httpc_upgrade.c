/*
 * httpc_upgrade and the stream API (src/common/httpc.h) against a real
 * server on loopback (libmicrohttpd with upgrades, on a free port): a
 * WebSocket handshake checked both ways, bytes echoed through the upgraded
 * connection (those the server sends with its 101 too), refusals as the
 * API's errors, a wrong accept key refused, a standby's answer followed to
 * the leader and a port where nothing listens skipped.
 */
#include "base/compat.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <setjmp.h>
#include <cmocka.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/httpc.h"
#include "common/wsframe.h"

struct server {
	struct MHD_Daemon *d;
	char url[64];
	const char *standby_for; /* non-NULL: answers 503 not_leader naming it */
	bool bad_accept;         /* answers 101 with a wrong accept key */
	char token[64];          /* the bearer token of the last request */
	unsigned closed;         /* echo connections closed (closed_lock) */
};

static pthread_mutex_t closed_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t closed_cond = PTHREAD_COND_INITIALIZER;

/* Waits until n echo connections of s have been closed (a daemon is
 * stopped only once none is left open). */
static void wait_closed(struct server *s, unsigned n)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	pthread_mutex_lock(&closed_lock);
	while (s->closed < n)
		if (pthread_cond_timedwait(&closed_cond, &closed_lock, &ts))
			break;
	assert_true(s->closed >= n);
	pthread_mutex_unlock(&closed_lock);
}

struct echo {
	struct server *s;
	MHD_socket sock;
	struct MHD_UpgradeResponseHandle *urh;
};

/* Echoes what comes until the client closes, then closes. */
static void *echo_thread(void *arg)
{
	struct echo *e = arg;
	struct server *s = e->s;
	char buf[4096];

	fcntl(e->sock, F_SETFL, fcntl(e->sock, F_GETFL) & ~O_NONBLOCK);
	for (;;) {
		ssize_t n = recv(e->sock, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		if (send(e->sock, buf, (size_t)n, MSG_NOSIGNAL) != n)
			break;
	}
	MHD_upgrade_action(e->urh, MHD_UPGRADE_ACTION_CLOSE);
	free(e);
	pthread_mutex_lock(&closed_lock);
	s->closed++;
	pthread_cond_broadcast(&closed_cond);
	pthread_mutex_unlock(&closed_lock);
	return NULL;
}

static void on_upgrade(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra_in,
		       size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct echo *e = xcalloc(1, sizeof(*e));
	pthread_t t;

	e->s = cls;
	e->sock = sock;
	e->urh = urh;
	/* bytes sent with the 101: the client must read them first */
	send(sock, "hello", 5, MSG_NOSIGNAL);
	pthread_create(&t, NULL, echo_thread, e);
	pthread_detach(t);
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *text)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	MHD_add_response_header(r, "Content-Type", "application/json");
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url,
			       const char *method, const char *version, const char *data,
			       size_t *data_size, void **con_cls)
{
	struct server *s = cls;
	const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-WebSocket-Key");
	const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	char accept[29], text[512];
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (!*con_cls) {
		*con_cls = s;
		return MHD_YES;
	}
	snprintf(s->token, sizeof(s->token), "%s", auth ? auth : "");
	if (s->standby_for) {
		snprintf(text, sizeof(text), "{\"error\": {\"code\": \"not_leader\", \"message\": "
			 "\"standby\", \"leader\": \"%s\"}}", s->standby_for);
		return reply(conn, 503, text);
	}
	if (!strcmp(url, "/refuse"))
		return reply(conn, 403, "{\"error\": {\"code\": \"forbidden\", \"message\": \"job 7 "
			     "belongs to 'bob'\"}}");
	if (!ws_key_valid(key))
		return reply(conn, 400, "{\"error\": {\"code\": \"bad_request\", \"message\": \"no key\"}}");
	ws_accept_key(key, accept);
	r = MHD_create_response_for_upgrade(on_upgrade, s);
	MHD_add_response_header(r, "Upgrade", "websocket");
	MHD_add_response_header(r, "Connection", "Upgrade");
	MHD_add_response_header(r, "Sec-WebSocket-Accept", s->bad_accept ? "AAAAAAAAAAAAAAAAAAAAAAAAAAA=" : accept);
	MHD_add_response_header(r, "Sec-WebSocket-Protocol", "yard.exec.v1");
	ret = MHD_queue_response(conn, 101, r);
	MHD_destroy_response(r);
	return ret;
}

static void server_start(struct server *s)
{
	const union MHD_DaemonInfo *info;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = 0 };

	memset(s, 0, sizeof(*s));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG,
				0, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, &sin, MHD_OPTION_END);
	assert_non_null(s->d);
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%u", (unsigned)info->port);
}

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

/* Reads exactly n bytes from s (poll between), or fails the test. */
static void recv_exact(struct httpc_stream *s, char *out, size_t n)
{
	size_t have = 0;

	while (have < n) {
		size_t got = 0;
		int rc = httpc_stream_recv(s, out + have, n - have, &got, NULL);
		if (rc == HTTPC_STREAM_AGAIN) {
			struct pollfd p = { .fd = s->fd, .events = POLLIN };
			assert_true(poll(&p, 1, 5000) > 0);
			continue;
		}
		assert_int_equal(rc, 0);
		have += got;
	}
}

static const char *const ws_headers[] = { "Sec-WebSocket-Protocol: yard.exec.v1", NULL };

static void test_websocket_echo(void **state)
{
	struct server srv;
	struct httpc c;
	struct httpc_stream s;
	struct errbuf eb = ERRBUF_INIT;
	struct httpc_upgrade_req req = { .path = "/ws?x=1", .protocol = "websocket", .headers = ws_headers };
	char buf[60000], back[60000];
	long status = -1;

	server_start(&srv);
	httpc_init(&c, srv.url, NULL, "tok");
	assert_int_equal(httpc_upgrade(&c, &req, &s, &status, &eb), 0);
	assert_string_equal(s.protocol, "yard.exec.v1");
	assert_string_equal(srv.token, "Bearer tok");
	recv_exact(&s, back, 5);
	assert_memory_equal(back, "hello", 5);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 7);
	assert_int_equal(httpc_stream_send_all(&s, buf, sizeof(buf), 5000, &eb), 0);
	recv_exact(&s, back, sizeof(back));
	assert_memory_equal(buf, back, sizeof(buf));
	httpc_stream_close(&s);
	wait_closed(&srv, 1);
	httpc_release(&c);
	MHD_stop_daemon(srv.d);
	(void)state;
}

static void test_refused(void **state)
{
	struct server srv;
	struct httpc c;
	struct httpc_stream s;
	struct errbuf eb = ERRBUF_INIT;
	struct httpc_upgrade_req req = { .path = "/refuse", .protocol = "websocket" };
	long status = 0;

	server_start(&srv);
	httpc_init(&c, srv.url, NULL, NULL);
	assert_int_equal(httpc_upgrade(&c, &req, &s, &status, &eb), YERR(FORBIDDEN));
	assert_int_equal(status, 403);
	assert_string_equal(eb.msg, "job 7 belongs to 'bob'");
	srv.bad_accept = true;
	req.path = "/ws";
	errbuf_reset(&eb);
	assert_int_equal(httpc_upgrade(&c, &req, &s, &status, &eb), YERR(UNAVAILABLE));
	assert_non_null(strstr(eb.msg, "wrong accept key"));
	wait_closed(&srv, 1); /* the client closed the connection it would not take */
	httpc_release(&c);
	MHD_stop_daemon(srv.d);
	(void)state;
}

/* [nothing listening, a standby naming the leader] -> the leader. */
static void test_finds_leader(void **state)
{
	struct server leader, standby;
	struct httpc c;
	struct httpc_stream s;
	struct errbuf eb = ERRBUF_INIT;
	struct httpc_upgrade_req req = { .path = "/ws", .protocol = "websocket" };
	char list[256], closed[64], back[5];

	server_start(&leader);
	server_start(&standby);
	standby.standby_for = leader.url;
	closed_url(closed, sizeof(closed));
	snprintf(list, sizeof(list), "%s,%s", closed, standby.url);
	httpc_init(&c, list, NULL, NULL);
	assert_int_equal(httpc_upgrade(&c, &req, &s, NULL, &eb), 0);
	assert_string_equal(httpc_url(&c), leader.url);
	recv_exact(&s, back, 5);
	httpc_stream_close(&s);
	wait_closed(&leader, 1);
	httpc_release(&c);
	MHD_stop_daemon(leader.d);
	MHD_stop_daemon(standby.d);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_websocket_echo),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_finds_leader),
	};
	httpc_global_init(&httpc_curl);
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
