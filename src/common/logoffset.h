/*
 * The rule that makes log shipping idempotent. The master holds a prefix of a
 * task's stream (have bytes). An agent sends len bytes that start at offset.
 * Because a stream only ever grows, bytes at the same offset are the same
 * bytes, so the master appends only what it does not have yet.
 */
#ifndef YARD_LOGOFFSET_H
#define YARD_LOGOFFSET_H

#include <stdint.h>

enum log_chunk_action {
	LOG_CHUNK_APPEND,    /* append the chunk's bytes from skip on */
	LOG_CHUNK_DUPLICATE, /* the master already has every byte: nothing to do */
	LOG_CHUNK_GAP,       /* offset is past what the master has: refuse, tell the agent `have` */
};

struct log_chunk_decision {
	enum log_chunk_action action;
	uint64_t skip; /* bytes at the start of the chunk the master already has */
};

/* log_chunk_decide: what to do with len bytes at offset when have bytes are stored. */
struct log_chunk_decision log_chunk_decide(uint64_t have, uint64_t offset, uint64_t len);

#endif
