/*
 * libFuzzer target for what a client can send besides a JSON body: the
 * request head. Method, target (path and query string), token and headers
 * go through the in-process master of fuzz_master.h, so MHD's parsing, the
 * static server, routing, the token check, the rate limit's keys, the
 * visibility rule and every handler's query parameters run as for a client.
 *
 * An input is lines (split at '\n'):
 *   1  the method ("" is GET)
 *   2  the request target, as it goes on the request line
 *   3  its first byte picks the token (byte % 8): none, admin, alice
 *      (team vision, J's owner), bob (no team), n1's agent, the join token,
 *      J's job token, an unknown token
 *   4.. header lines, each sent as it is ("Name: value")
 * A line "" ends the head; what follows is the body.
 *
 * A finding is a sanitizer report, a 5xx, a JSON error reply without
 * {"error": {"code", "message"}}, a request that gets no reply, or a batch
 * whose writes do not load back. A reply that is not HTTP is MHD refusing
 * a head it cannot parse, or a client that hung up mid-body: not ours.
 *
 *   tests/fuzz/run.sh http        (FUZZ_SECONDS, default 60)
 */
#include "base/compat.h"

#include "base/xalloc.h"
#include "fuzz_master.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool trace; /* FUZZ_API_TRACE set: each reply goes to stderr */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	trace = getenv("FUZZ_API_TRACE") != NULL;
	fuzz_master_init("fuzz_http");
	return 0;
}

/* The next line of [*p, end) (without its '\n'); *p moves past it. */
static size_t next_line(const char **p, const char *end, const char **line)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t n = nl ? (size_t)(nl - *p) : (size_t)(end - *p);

	*line = *p;
	*p = nl ? nl + 1 : end;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct fuzz_world *w = &fuzz_world;
	const char *const tokens[8] = { NULL, w->admin, w->alice, w->bob, w->agent, w->join,
					w->job_token, "yard_u_0123456789abcdef0123456789abcdef" };
	const char *p = (const char *)data, *end = p + size, *line;
	struct strbuf req = STRBUF_INIT, head = STRBUF_INIT, body = STRBUF_INIT;
	size_t n;
	bool wrote;
	int st;

	n = next_line(&p, end, &line);
	strbuf_add(&req, n ? line : "GET", n ? n : 3);
	strbuf_addch(&req, ' ');
	n = next_line(&p, end, &line);
	strbuf_add(&req, line, n);
	strbuf_addstr(&req, " HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n");
	n = next_line(&p, end, &line);
	if (n && tokens[(unsigned char)line[0] % 8])
		strbuf_addf(&req, "Authorization: Bearer %s\r\n", tokens[(unsigned char)line[0] % 8]);
	while (p < end) {
		n = next_line(&p, end, &line);
		if (!n)
			break;
		strbuf_add(&req, line, n);
		strbuf_addstr(&req, "\r\n");
	}
	strbuf_addstr(&req, "\r\n");
	strbuf_add(&req, p, (size_t)(end - p));

	st = fuzz_master_send(req.buf, req.len, false, &head, &body, &wrote);
	if (trace)
		fprintf(stderr, "fuzz_http: %d %.300s\n", st, body.buf);
	if (st >= 500) {
		fprintf(stderr, "fuzz_http: %d for:\n%s\nreply: %s\n", st, req.buf, body.buf);
		abort();
	}
	/* a HEAD's answer has no body, by HTTP */
	if (st >= 400 && strncmp(req.buf, "HEAD ", 5) &&
	    strcasestr(head.buf ? head.buf : "", "content-type: application/json"))
		fuzz_master_check_error(st, req.buf, body.buf);
	strbuf_release(&req);
	strbuf_release(&head);
	strbuf_release(&body);
	if (wrote || (st && st < 400))
		fuzz_master_reset();
	return 0;
}
