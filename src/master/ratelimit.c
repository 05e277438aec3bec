#include "base/compat.h"
#include "master/ratelimit.h"

#include "base/parse.h"
#include "base/xalloc.h"

int ratelimit_parse(const char *what, const char *text, uint64_t *rate, uint64_t *burst, struct errbuf *eb)
{
	const char *p = text;
	uint64_t r, b = 0;
	bool has_burst = false;

	if (parse_u64(&p, &r) < 0)
		goto bad;
	if (*p == ':') {
		p++;
		has_burst = true;
		if (parse_u64(&p, &b) < 0)
			goto bad;
	}
	if (*p || r > 1000000 || b > 100000000 || (has_burst && !b))
		goto bad;
	*rate = r;
	*burst = r ? (b ? b : r * 10) : 0;
	return 0;
bad:
	return error(eb, YERR(BAD_REQUEST),
		     "%s '%s': expected RATE[:BURST], requests per second per token "
		     "(at most 1000000) and the burst (1 to 100000000); 0 turns limits off",
		     what, text);
}

void ratelimit_init(struct ratelimit *rl, uint64_t rate, uint64_t burst)
{
	rl->rate = rate;
	rl->burst = burst ? burst : 1;
	rl->slots =
	        rate ? xcalloc((size_t)RATELIMIT_SETS * RATELIMIT_WAYS, sizeof(*rl->slots)) : NULL;
}

void ratelimit_release(struct ratelimit *rl)
{
	free(rl->slots);
	rl->slots = NULL;
	rl->rate = 0;
}

/* splitmix64's finaliser: every bit of x moves every bit of the result. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

uint64_t ratelimit_key(enum ratelimit_kind kind, uint64_t value)
{
	uint64_t k = mix64(value ^ ((uint64_t)kind << 56) ^ 0x9e3779b97f4a7c15ULL);
	return k ? k : 1;
}

/* Brings s's bucket up to now_ms. */
static void refill(const struct ratelimit *rl, struct ratelimit_slot *s, uint64_t now_ms)
{
	uint64_t cap = rl->burst * 1000;

	if (now_ms > s->last_ms) {
		uint64_t dt = now_ms - s->last_ms;
		/* rate thousandths a millisecond; past a full refill the sum is capped */
		s->milli = dt >= cap / rl->rate + 1 ? cap : s->milli + dt * rl->rate;
		if (s->milli > cap)
			s->milli = cap;
		s->last_ms = now_ms;
	}
}

/* Whether s's bucket has refilled to full by now_ms: forgetting it loses nothing. */
static bool slot_full(const struct ratelimit *rl, const struct ratelimit_slot *s, uint64_t now_ms)
{
	uint64_t missing = rl->burst * 1000 - s->milli;

	return now_ms >= s->last_ms && now_ms - s->last_ms >= (missing + rl->rate - 1) / rl->rate;
}

/* The slot of key in its set: its own, else an empty one, else a full one,
 * else the one idle the longest, made key's with a full bucket. */
static struct ratelimit_slot *slot_find(struct ratelimit *rl, uint64_t key, uint64_t now_ms)
{
	struct ratelimit_slot *set = &rl->slots[(key & (RATELIMIT_SETS - 1)) * RATELIMIT_WAYS];
	struct ratelimit_slot *empty = NULL, *full = NULL, *oldest = NULL, *s;

	for (int i = 0; i < RATELIMIT_WAYS; i++) {
		s = &set[i];
		if (s->key == key)
			return s;
		if (!s->key) {
			if (!empty)
				empty = s;
		} else if (!full && slot_full(rl, s, now_ms)) {
			full = s;
		} else if (!oldest || s->last_ms < oldest->last_ms) {
			oldest = s;
		}
	}
	s = empty ? empty : full ? full : oldest;
	s->key = key;
	s->milli = rl->burst * 1000;
	s->last_ms = now_ms;
	return s;
}

uint64_t ratelimit_take(struct ratelimit *rl, uint64_t key, uint64_t now_ms)
{
	struct ratelimit_slot *s;

	if (!rl->rate)
		return 0;
	s = slot_find(rl, key, now_ms);
	refill(rl, s, now_ms);
	if (s->milli < 1000)
		return (1000 - s->milli + rl->rate - 1) / rl->rate;
	s->milli -= 1000;
	return 0;
}
