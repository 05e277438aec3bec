/*
 * WebSocket frames (RFC 6455, section 5) and the handshake's keys: pure
 * functions on bytes, no I/O. The CLI (a client: it masks what it sends)
 * and the agent (the server end of every exec session: it sends unmasked
 * frames) read and write their sockets themselves; the master, which only
 * relays a session's bytes, tracks frame boundaries with struct
 * ws_tracker so that it can end a client's stream cleanly.
 *
 * Sessions (docs/protocol.md, "Sessions") speak the subprotocols
 * yard.exec.v1 (binary messages whose first byte is a channel, below) and
 * yard.port.v1 (bytes as binary messages).
 */
#ifndef YARD_COMMON_WSFRAME_H
#define YARD_COMMON_WSFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/strbuf.h"

/* The longest frame head: 2 bytes, 8 of length, 4 of mask. */
#define WS_HEAD_MAX 14
/* The longest payload of a control frame (close, ping, pong). */
#define WS_CONTROL_MAX 125

enum ws_opcode {
	WS_OP_CONT = 0x0,
	WS_OP_TEXT = 0x1,
	WS_OP_BINARY = 0x2,
	WS_OP_CLOSE = 0x8,
	WS_OP_PING = 0x9,
	WS_OP_PONG = 0xa,
};

/* Close codes (RFC 6455, 7.4.1) that yard sends. */
enum ws_close_code {
	WS_CLOSE_NORMAL = 1000,   /* the session ended */
	WS_CLOSE_PROTOCOL = 1002, /* the peer broke the protocol */
	WS_CLOSE_TOO_BIG = 1009,  /* a message over the reader's cap */
	WS_CLOSE_ERROR = 1011,    /* cut off: the agent, the node or the master went away */
};

/* The channels of yard.exec.v1: each message's first byte. */
enum ws_channel {
	WS_CH_STDIN = 0,  /* client ->: bytes; an empty payload closes stdin */
	WS_CH_STDOUT = 1, /* -> client: bytes (the terminal's output with a tty) */
	WS_CH_STDERR = 2, /* -> client: bytes (never with a tty) */
	WS_CH_STATUS = 3, /* -> client, last: {"exit_code", "signal", "message"} */
	WS_CH_RESIZE = 4, /* client ->: {"cols": C, "rows": R} */
	WS_CH_SIGNAL = 5, /* client ->: {"signal": "INT"|"QUIT"|"TERM"|"HUP"|"KILL"} */
};

#define WS_PROTO_EXEC "yard.exec.v1"
#define WS_PROTO_PORT "yard.port.v1"

struct ws_head {
	bool fin;
	unsigned opcode;        /* enum ws_opcode */
	bool masked;
	unsigned char mask[4];  /* when masked */
	uint64_t len;           /* payload bytes */
	size_t head_len;        /* bytes of the head: 2 to WS_HEAD_MAX */
};

/* ws_head_parse reads a frame head from the n bytes at buf: its length
 * (2 to WS_HEAD_MAX) with *h filled once it is whole, 0 when more bytes
 * are needed, or YERR(BAD_REQUEST) with eb saying what is wrong: reserved
 * bits set, an unknown opcode, a control frame that is fragmented or
 * longer than WS_CONTROL_MAX, a 64-bit length with its top bit set. */
int ws_head_parse(const void *buf, size_t n, struct ws_head *h, struct errbuf *eb);

/* ws_head_build writes the head of one frame into out (masked with mask
 * when mask is not NULL) and returns its length. */
size_t ws_head_build(unsigned char out[WS_HEAD_MAX], bool fin, unsigned opcode, uint64_t len,
		     const unsigned char *mask);

/* ws_mask XORs the n bytes at buf with mask as bytes offset.. of a payload
 * (masking and unmasking are the same). */
void ws_mask(void *buf, size_t n, const unsigned char mask[4], uint64_t offset);

/* ws_frame_append appends one whole frame (fin set) to out; mask_it: a
 * client's frame, masked with a fresh random key. */
void ws_frame_append(struct strbuf *out, unsigned opcode, const void *payload, size_t len,
		     bool mask_it);
/* ws_channel_append appends a yard.exec.v1 message: one binary frame of
 * the channel byte and len bytes of payload. */
void ws_channel_append(struct strbuf *out, unsigned channel, const void *payload, size_t len,
		       bool mask_it);
/* ws_close_append appends a close frame with code and reason (cut, at a
 * UTF-8 boundary, to what a control frame holds). */
void ws_close_append(struct strbuf *out, unsigned code, const char *reason, bool mask_it);

/* ws_key_valid: whether key is a Sec-WebSocket-Key: the base64 of 16 bytes. */
bool ws_key_valid(const char *key);
/* ws_key_new writes a fresh random Sec-WebSocket-Key into out[25]. */
void ws_key_new(char out[25]);
/* ws_accept_key writes the Sec-WebSocket-Accept that answers key into
 * out[29]: base64(SHA-1(key + the RFC's GUID)). */
void ws_accept_key(const char *key, char out[29]);
/* ws_protocol_offered: whether a Sec-WebSocket-Protocol request header
 * (comma-separated tokens, NULL when absent) offers proto. */
bool ws_protocol_offered(const char *header, const char *proto);

/* Who masks: a server reads its client's frames, which must be masked; a
 * client reads its server's, which must not be. */
enum ws_mask_rule { WS_MASK_REQUIRED, WS_MASK_FORBIDDEN };

/*
 * An incremental message reader: bytes in, whole messages out, one at a
 * time. Fragmented data messages are joined; control frames (which may
 * come between fragments) are returned on their own. A data message over
 * max bytes is refused as it arrives, never buffered whole.
 */
struct ws_reader {
	size_t max;             /* the longest data message taken */
	enum ws_mask_rule rule;
	unsigned char head[WS_HEAD_MAX];
	size_t head_have;       /* bytes of the current head held */
	struct ws_head h;       /* the current frame, once its head is whole */
	bool in_payload;        /* reading h's payload */
	uint64_t done;          /* bytes of h's payload read */
	bool frag;              /* a fragmented data message is being joined */
	unsigned frag_opcode;
	struct strbuf data;     /* a data message so far */
	struct strbuf control;  /* a control frame's payload so far */
	/* OUT of ws_reader_feed's 1: the message (opcode text, binary, close,
	 * ping or pong) and its unmasked payload, valid until the next call */
	unsigned opcode;
	const char *msg;
	size_t msg_len;
};

void ws_reader_init(struct ws_reader *r, size_t max, enum ws_mask_rule rule);
void ws_reader_release(struct ws_reader *r);
/* ws_reader_feed takes bytes of the n at buf until a message is whole: 1
 * with *used the bytes taken and the message in r->opcode, r->msg,
 * r->msg_len; 0 when all n were taken and none is whole yet; or, with eb
 * set, YERR(BAD_REQUEST) for a frame that breaks the protocol (close the
 * connection with 1002) or YERR(TOO_LARGE) for a message over the cap
 * (1009). Call it again with the rest of buf after a 1. */
int ws_reader_feed(struct ws_reader *r, const void *buf, size_t n, size_t *used, struct errbuf *eb);

/* ws_close_parse reads a close frame's payload: *code (1005, "no status",
 * when it has none) and the reason (up to 123 bytes, NUL-terminated) in
 * reason[124]. */
void ws_close_parse(const char *payload, size_t len, unsigned *code, char reason[124]);

/*
 * Frame boundaries in a stream of frames that is relayed, not read: the
 * master feeds it the agent -> client bytes of an exec session as they
 * pass, so that it can add a status message and a close frame of its own
 * only where a frame ends (master/sessions.h).
 */
struct ws_tracker {
	unsigned char head[WS_HEAD_MAX];
	size_t head_have;
	uint64_t left;          /* payload bytes of the current frame still to come */
	bool in_payload;
	unsigned opcode;        /* of the current frame */
	uint64_t fed;           /* bytes fed so far */
	uint64_t boundary;      /* the offset (of fed) just past the last whole frame */
	bool closed;            /* a whole close frame went by */
	bool broken;            /* bytes that are no frame went by: no boundary after them */
};

/* ws_tracker_feed follows n more bytes. */
void ws_tracker_feed(struct ws_tracker *t, const void *buf, size_t n);

#endif
