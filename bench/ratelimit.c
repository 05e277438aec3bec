/*
 * The cost of --rate-limit's check (src/master/ratelimit.h) per request:
 * ratelimit_take over 1, 1,000 and 100,000 callers (the last far beyond
 * the table's 8,192 slots, so nearly every check evicts), on a clock that
 * moves 1 ms every 1,000 requests. Prints ns per check and how many were
 * refused. Asserts nothing.
 *
 * usage: bench/ratelimit [CHECKS]   (default 20,000,000)
 */
#include "base/compat.h"

#include "base/clock.h"
#include "base/parse.h"
#include "master/ratelimit.h"

int main(int argc, char **argv)
{
	uint64_t n = 20000000;
	static const uint64_t callers[] = { 1, 1000, 100000 };

	if (argc > 1 && parse_u64_str(argv[1], &n)) {
		fprintf(stderr, "usage: ratelimit [CHECKS]\n");
		return 2;
	}
	printf("%10s %12s %10s %12s\n", "callers", "checks", "ns/check", "refused");
	for (size_t c = 0; c < ARRAY_SIZE(callers); c++) {
		struct ratelimit rl;
		uint64_t refused = 0, t0, dt;

		ratelimit_init(&rl, RATELIMIT_DEFAULT_RATE, RATELIMIT_DEFAULT_BURST);
		t0 = mono_us();
		for (uint64_t i = 0; i < n; i++)
			refused += ratelimit_take(&rl, ratelimit_key(RATELIMIT_TOKEN, i % callers[c]), i / 1000) != 0;
		dt = mono_us() - t0;
		printf("%10" PRIu64 " %12" PRIu64 " %10.1f %12" PRIu64 "\n", callers[c], n, (double)dt * 1000.0 / (double)n,
		       refused);
		ratelimit_release(&rl);
	}
	return 0;
}
