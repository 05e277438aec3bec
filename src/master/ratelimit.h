/*
 * Request rate limits (`yard master --rate-limit RATE[:BURST]`): a token
 * bucket per caller. Each bucket holds up to BURST requests and refills at
 * RATE requests per second; a request takes one or is refused with the time
 * until one is back (HTTP 429 with Retry-After, http.c).
 *
 * Callers are keys (ratelimit_key): a stored token, a job token's job, or
 * the client address of requests without a known token. The buckets live
 * in one table allocated by ratelimit_init: a request costs a hash and a
 * probe of RATELIMIT_WAYS slots, and never allocates. A key that finds no
 * slot of its own takes an empty one, else one whose bucket has refilled
 * to full (forgetting it loses nothing), else the one idle the longest
 * (that caller starts again with a full bucket: only when more than
 * RATELIMIT_WAYS callers collide in one set at once).
 *
 * All of it runs on the master's loop thread: no lock.
 */
#ifndef YARD_MASTER_RATELIMIT_H
#define YARD_MASTER_RATELIMIT_H

#include <stdint.h>

#include "base/error.h"

#define RATELIMIT_SETS 1024 /* power of two */
#define RATELIMIT_WAYS 8

/* The default of --rate-limit: far above what the CLI, the web UI's
 * polling or a job's launch helpers send, well below a runaway loop. */
#define RATELIMIT_DEFAULT_RATE  200
#define RATELIMIT_DEFAULT_BURST 2000

struct ratelimit_slot {
	uint64_t key;     /* 0: empty */
	uint64_t milli;   /* thousandths of a request left in the bucket */
	uint64_t last_ms; /* when milli was last brought up to date */
};

struct ratelimit {
	uint64_t rate;                /* requests per second; 0: no limit */
	uint64_t burst;               /* the bucket's size, in requests */
	struct ratelimit_slot *slots; /* owned: RATELIMIT_SETS * RATELIMIT_WAYS, or NULL when off */
};

/* ratelimit_parse reads "RATE" or "RATE:BURST" (whole requests; BURST
 * defaults to 10 x RATE, at least 1; "0" turns limits off) into *rate and
 * *burst (OUT). YERR(BAD_REQUEST) starting with what ("--rate-limit") and the value. */
int ratelimit_parse(const char *what, const char *text, uint64_t *rate, uint64_t *burst, struct errbuf *eb);

/* ratelimit_init sets rl up for rate and burst, allocating the table once
 * (nothing when rate is 0). ratelimit_release frees it. */
void ratelimit_init(struct ratelimit *rl, uint64_t rate, uint64_t burst);
void ratelimit_release(struct ratelimit *rl);

enum ratelimit_kind {
	RATELIMIT_TOKEN = 1,   /* value: the first 64 bits of the token's sha256 */
	RATELIMIT_JOB = 2,     /* value: the job id of a job token */
	RATELIMIT_ADDRESS = 3, /* value: the client's IPv4 address (no known token) */
};

/* ratelimit_key: the bucket key of a caller; never 0. */
uint64_t ratelimit_key(enum ratelimit_kind kind, uint64_t value);

/* ratelimit_take takes one request from key's bucket at now_ms (a
 * monotonic clock). Returns 0 when allowed (always, when rl is off), else
 * the milliseconds until a request is allowed again (at least 1); a refused
 * request takes nothing. */
uint64_t ratelimit_take(struct ratelimit *rl, uint64_t key, uint64_t now_ms);

#endif
