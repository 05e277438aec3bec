/* WebSocket frames (wsframe.h). */
#include "base/compat.h"
#include "common/wsframe.h"

#include "base/crypto.h"
#include "base/utf8.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static bool opcode_known(unsigned op)
{
	return op == WS_OP_CONT || op == WS_OP_TEXT || op == WS_OP_BINARY || op == WS_OP_CLOSE ||
	       op == WS_OP_PING || op == WS_OP_PONG;
}

int ws_head_parse(const void *buf, size_t n, struct ws_head *h, struct errbuf *eb)
{
	const unsigned char *p = buf;
	size_t need = 2, ext;
	uint64_t len;

	if (n < 2)
		return 0;
	if (p[0] & 0x70)
		return error(eb, YERR(BAD_REQUEST), "websocket frame: reserved bits 0x%02x set (no "
			     "extension was agreed)", p[0] & 0x70);
	h->fin = p[0] & 0x80;
	h->opcode = p[0] & 0x0f;
	if (!opcode_known(h->opcode))
		return error(eb, YERR(BAD_REQUEST), "websocket frame: unknown opcode 0x%x", h->opcode);
	h->masked = p[1] & 0x80;
	len = p[1] & 0x7f;
	ext = len == 126 ? 2 : len == 127 ? 8 : 0;
	if (h->opcode >= WS_OP_CLOSE && (!h->fin || ext))
		return error(eb, YERR(BAD_REQUEST), "websocket frame: a control frame (opcode 0x%x) "
			     "must be one frame of at most %d bytes", h->opcode, WS_CONTROL_MAX);
	need += ext + (h->masked ? 4 : 0);
	if (n < need)
		return 0;
	if (ext) {
		len = 0;
		for (size_t i = 0; i < ext; i++)
			len = len << 8 | p[2 + i];
		if (len >> 63)
			return error(eb, YERR(BAD_REQUEST), "websocket frame: a 64-bit length with "
				     "its top bit set");
	}
	h->len = len;
	if (h->masked)
		memcpy(h->mask, p + 2 + ext, 4);
	else
		memset(h->mask, 0, 4);
	h->head_len = need;
	return (int)need;
}

size_t ws_head_build(unsigned char out[WS_HEAD_MAX], bool fin, unsigned opcode, uint64_t len,
		     const unsigned char *mask)
{
	size_t n = 2;

	out[0] = (unsigned char)((fin ? 0x80 : 0) | (opcode & 0x0f));
	if (len < 126) {
		out[1] = (unsigned char)len;
	} else if (len <= 0xffff) {
		out[1] = 126;
		out[2] = (unsigned char)(len >> 8);
		out[3] = (unsigned char)len;
		n = 4;
	} else {
		out[1] = 127;
		for (int i = 0; i < 8; i++)
			out[2 + i] = (unsigned char)(len >> (56 - 8 * i));
		n = 10;
	}
	if (mask) {
		out[1] |= 0x80;
		memcpy(out + n, mask, 4);
		n += 4;
	}
	return n;
}

void ws_mask(void *buf, size_t n, const unsigned char mask[4], uint64_t offset)
{
	unsigned char *p = buf;

	for (size_t i = 0; i < n; i++)
		p[i] ^= mask[(offset + i) & 3];
}

/* Appends one frame whose payload is the channel byte (when channel >= 0)
 * and len bytes. */
static void frame_append(struct strbuf *out, unsigned opcode, int channel, const void *payload,
			 size_t len, bool mask_it)
{
	unsigned char head[WS_HEAD_MAX], mask[4];
	size_t total = len + (channel >= 0), hl, at;

	if (mask_it)
		random_bytes(mask, sizeof(mask));
	hl = ws_head_build(head, true, opcode, total, mask_it ? mask : NULL);
	strbuf_add(out, head, hl);
	at = out->len;
	if (channel >= 0)
		strbuf_addch(out, channel);
	if (len)
		strbuf_add(out, payload, len);
	if (mask_it)
		ws_mask(out->buf + at, total, mask, 0);
}

void ws_frame_append(struct strbuf *out, unsigned opcode, const void *payload, size_t len,
		     bool mask_it)
{
	frame_append(out, opcode, -1, payload, len, mask_it);
}

void ws_channel_append(struct strbuf *out, unsigned channel, const void *payload, size_t len,
		       bool mask_it)
{
	frame_append(out, WS_OP_BINARY, (int)(channel & 0xff), payload, len, mask_it);
}

void ws_close_append(struct strbuf *out, unsigned code, const char *reason, bool mask_it)
{
	char body[WS_CONTROL_MAX];
	size_t n = 0, rlen = reason ? strlen(reason) : 0;

	body[n++] = (char)(code >> 8);
	body[n++] = (char)code;
	/* whole UTF-8 sequences only: a close reason must be valid UTF-8 */
	for (size_t i = 0; i < rlen;) {
		size_t k = utf8_seq_len((const unsigned char *)reason + i, rlen - i);
		if (!k || n + k > sizeof(body))
			break;
		memcpy(body + n, reason + i, k);
		n += k;
		i += k;
	}
	frame_append(out, WS_OP_CLOSE, -1, body, n, mask_it);
}

void ws_close_parse(const char *payload, size_t len, unsigned *code, char reason[124])
{
	size_t rlen = len > 2 ? len - 2 : 0;

	*code = len >= 2 ? (unsigned)((unsigned char)payload[0] << 8 | (unsigned char)payload[1]) : 1005;
	if (rlen > 123)
		rlen = 123;
	if (rlen)
		memcpy(reason, payload + 2, rlen);
	reason[rlen] = 0;
}

bool ws_key_valid(const char *key)
{
	size_t n = key ? strlen(key) : 0;

	/* 16 bytes: 22 base64 characters and "==" */
	if (n != 24 || key[22] != '=' || key[23] != '=')
		return false;
	for (size_t i = 0; i < 22; i++) {
		char c = key[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '+' || c == '/'))
			return false;
	}
	return true;
}

void ws_key_new(char out[25])
{
	unsigned char raw[16];

	random_bytes(raw, sizeof(raw));
	base64_encode(raw, sizeof(raw), out);
}

void ws_accept_key(const char *key, char out[29])
{
	char buf[128];
	int n = snprintf(buf, sizeof(buf), "%s%s", key, WS_GUID);

	if (n < 0 || (size_t)n >= sizeof(buf))
		n = (int)sizeof(buf) - 1; /* only a key ws_key_valid refused is this long */
	sha1_base64(buf, (size_t)n, out);
}

bool ws_protocol_offered(const char *header, const char *proto)
{
	size_t plen = strlen(proto);

	for (const char *p = header; p && *p;) {
		size_t n;
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		n = strcspn(p, ", \t");
		if (n == plen && !strncmp(p, proto, plen))
			return true;
		p += n;
	}
	return false;
}

void ws_reader_init(struct ws_reader *r, size_t max, enum ws_mask_rule rule)
{
	memset(r, 0, sizeof(*r));
	r->max = max;
	r->rule = rule;
	strbuf_init(&r->data, 0);
	strbuf_init(&r->control, 0);
}

void ws_reader_release(struct ws_reader *r)
{
	strbuf_release(&r->data);
	strbuf_release(&r->control);
}

/* A frame's head is whole in r->h: is it one this reader takes? */
static int reader_check_head(struct ws_reader *r, struct errbuf *eb)
{
	const struct ws_head *h = &r->h;

	if (r->rule == WS_MASK_REQUIRED && !h->masked)
		return error(eb, YERR(BAD_REQUEST), "websocket frame: a client's frame must be masked");
	if (r->rule == WS_MASK_FORBIDDEN && h->masked)
		return error(eb, YERR(BAD_REQUEST), "websocket frame: a server's frame must not be "
			     "masked");
	if (h->opcode == WS_OP_CONT && !r->frag)
		return error(eb, YERR(BAD_REQUEST), "websocket frame: a continuation frame without a "
			     "message to continue");
	if ((h->opcode == WS_OP_TEXT || h->opcode == WS_OP_BINARY) && r->frag)
		return error(eb, YERR(BAD_REQUEST), "websocket frame: a new message before the last "
			     "one ended");
	if (h->opcode < WS_OP_CLOSE && (h->len > r->max || r->data.len + h->len > r->max))
		return error(eb, YERR(TOO_LARGE), "websocket message: over the limit of %zu bytes",
			     r->max);
	if (h->opcode == WS_OP_CLOSE && h->len == 1)
		return error(eb, YERR(BAD_REQUEST), "websocket frame: a close frame of 1 byte");
	return 0;
}

/* The current frame is whole: returns 1 when it ends a message (set in
 * r's OUT fields), else 0. */
static int reader_frame_done(struct ws_reader *r)
{
	const struct ws_head *h = &r->h;

	r->in_payload = false;
	r->head_have = 0;
	if (h->opcode >= WS_OP_CLOSE) {
		r->opcode = h->opcode;
		r->msg = r->control.buf;
		r->msg_len = r->control.len;
		return 1;
	}
	if (h->opcode != WS_OP_CONT)
		r->frag_opcode = h->opcode;
	if (!h->fin) {
		r->frag = true;
		return 0;
	}
	r->frag = false;
	r->opcode = r->frag_opcode;
	r->msg = r->data.buf;
	r->msg_len = r->data.len;
	return 1;
}

int ws_reader_feed(struct ws_reader *r, const void *buf, size_t n, size_t *used, struct errbuf *eb)
{
	const unsigned char *p = buf;
	size_t i = 0;
	int rc;

	*used = 0;
	/* a message returned last time is forgotten now */
	if (r->msg) {
		if (r->msg == r->data.buf)
			strbuf_setlen(&r->data, 0);
		r->msg = NULL;
		r->msg_len = 0;
	}
	while (i < n || (r->in_payload && r->done == r->h.len)) {
		if (!r->in_payload) {
			size_t take = WS_HEAD_MAX - r->head_have;
			if (take > n - i)
				take = n - i;
			memcpy(r->head + r->head_have, p + i, take);
			rc = ws_head_parse(r->head, r->head_have + take, &r->h, eb);
			if (rc < 0)
				return rc;
			if (rc == 0) {
				r->head_have += take;
				i += take;
				continue;
			}
			/* the head ends inside what was copied */
			i += (size_t)rc - r->head_have;
			r->head_have = (size_t)rc;
			if ((rc = reader_check_head(r, eb)))
				return rc;
			r->in_payload = true;
			r->done = 0;
			if (r->h.opcode >= WS_OP_CLOSE)
				strbuf_setlen(&r->control, 0);
			continue;
		}
		if (r->done < r->h.len) {
			size_t take = n - i;
			struct strbuf *sb = r->h.opcode >= WS_OP_CLOSE ? &r->control : &r->data;
			if ((uint64_t)take > r->h.len - r->done)
				take = (size_t)(r->h.len - r->done);
			size_t at = sb->len;
			strbuf_add(sb, p + i, take);
			if (r->h.masked)
				ws_mask(sb->buf + at, take, r->h.mask, r->done);
			r->done += take;
			i += take;
		}
		if (r->done == r->h.len && reader_frame_done(r)) {
			*used = i;
			return 1;
		}
	}
	*used = i;
	return 0;
}

void ws_tracker_feed(struct ws_tracker *t, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	size_t i = 0;

	while (i < n && !t->broken) {
		if (!t->in_payload) {
			struct ws_head h;
			size_t take = WS_HEAD_MAX - t->head_have;
			int rc;
			if (take > n - i)
				take = n - i;
			memcpy(t->head + t->head_have, p + i, take);
			rc = ws_head_parse(t->head, t->head_have + take, &h, NULL);
			if (rc < 0) {
				t->broken = true;
				break;
			}
			if (rc == 0) {
				t->head_have += take;
				i += take;
				continue;
			}
			i += (size_t)rc - t->head_have;
			t->head_have = 0;
			t->in_payload = true;
			t->left = h.len;
			t->opcode = h.opcode;
		}
		uint64_t take = n - i < t->left ? n - i : t->left;
		t->left -= take;
		i += (size_t)take;
		if (!t->left) {
			t->in_payload = false;
			t->boundary = t->fed + i;
			if (t->opcode == WS_OP_CLOSE)
				t->closed = true;
		}
	}
	t->fed += n;
}
