/* HTTP answers of the store's blobs (blobreply.h). */
#include "base/compat.h"
#include "master/blobreply.h"

#include <microhttpd.h>

#include "base/xalloc.h"
#include "master/api_handlers.h"
#include "master/core.h"
#include "master/http.h"
#include "master/store.h"

/* A blob's bytes that the store gave in memory, sent in reads of
 * BLOB_STREAM_READ as the answer goes out (what one answer holds in memory:
 * a hundred agents fetching one checkpoint at once hold 100 MiB). */
#define BLOB_STREAM_READ ((uint64_t)1 << 20)

struct blob_stream {
	struct master *m;
	char name[96];
	uint64_t off, n;        /* the range sent: n bytes from off */
	struct store_blob_range cur; /* bytes from cur_off (buf owned) */
	uint64_t cur_off;
};

static ssize_t blob_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct blob_stream *bs = cls;
	uint64_t at = bs->off + pos;
	size_t k;

	if (pos >= bs->n)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (at < bs->cur_off || at >= bs->cur_off + bs->cur.len) {
		struct errbuf eb = ERRBUF_INIT;
		uint64_t want = bs->n - pos < BLOB_STREAM_READ ? bs->n - pos : BLOB_STREAM_READ;

		free(bs->cur.buf);
		bs->cur.buf = NULL;
		bs->cur.len = 0;
		if (bs->m->sops->blob_read(bs->m->store, bs->name, at, want, &bs->cur, &eb) ||
		    !bs->cur.len) {
			fprintf(stderr, "yard master: cannot send blob '%s' at %" PRIu64 ": %s\n", bs->name,
				at, eb.msg[0] ? eb.msg : "it ends early");
			if (bs->cur.fd >= 0)
				close(bs->cur.fd);
			bs->cur.fd = -1;
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		if (bs->cur.fd >= 0) {
			/* a backend that reads from files gives one: read from it */
			ssize_t got = pread(bs->cur.fd, buf, max < bs->cur.len ? max : bs->cur.len, (off_t)at);
			close(bs->cur.fd);
			bs->cur.fd = -1;
			bs->cur.len = 0;
			return got > 0 ? got : MHD_CONTENT_READER_END_WITH_ERROR;
		}
		bs->cur_off = at;
	}
	k = (size_t)(bs->cur_off + bs->cur.len - at);
	if (k > max)
		k = max;
	memcpy(buf, bs->cur.buf + (at - bs->cur_off), k);
	return (ssize_t)k;
}

static void blob_stream_free(void *cls)
{
	struct blob_stream *bs = cls;

	free(bs->cur.buf);
	free(bs);
}

struct MHD_Response *blob_response(struct master *m, const char *name, uint64_t off, uint64_t n,
				   uint64_t *len, struct errbuf *eb)
{
	struct store_blob_range br;
	struct blob_stream *bs;
	struct MHD_Response *resp;

	*len = 0;
	if (m->sops->blob_read(m->store, name, off, n, &br, eb))
		return NULL;
	if (br.fd >= 0) {
		resp = MHD_create_response_from_fd_at_offset64(br.len, br.fd, off);
		if (!resp) {
			close(br.fd);
			error(eb, YERR(INTERNAL), "cannot send blob '%s' from offset %" PRIu64, name, off);
			return NULL;
		}
		*len = br.len;
		return resp;
	}
	if (br.len == n || br.len < STORE_BLOB_READ_MAX) {
		*len = br.len;
		return MHD_create_response_from_buffer(br.len, br.buf, MHD_RESPMEM_MUST_FREE);
	}
	bs = xcalloc(1, sizeof(*bs));
	bs->m = m;
	snprintf(bs->name, sizeof(bs->name), "%s", name);
	bs->off = off;
	bs->n = n;
	bs->cur = br;
	bs->cur_off = off;
	resp = MHD_create_response_from_callback(n, 64 * 1024, blob_stream_read, bs, blob_stream_free);
	*len = n;
	return resp;
}

void reply_whole_blob(struct req *r, const char *name, const char *ctype, const char *what,
		      const char *key)
{
	struct errbuf eb = ERRBUF_INIT;
	struct MHD_Response *resp;
	uint64_t size, len;
	int rc = r->m->sops->blob_size(r->m->store, name, &size, &eb);

	if (rc == YERR(NOT_FOUND)) {
		reply_err(r, YERR(NOT_FOUND), "no %s '%s'", what, key);
		return;
	}
	if (rc || !(resp = blob_response(r->m, name, 0, size, &len, &eb))) {
		req_error(r, &eb);
		return;
	}
	MHD_add_response_header(resp, "Content-Type", ctype);
	req_set_response(r, 200, resp);
}
