/* Unit tests for src/common/logoffset.h: idempotent log shipping by offset. */
#include "base/compat.h"
#include "common/logoffset.h"

#include <setjmp.h>
#include <cmocka.h>

static void check(uint64_t have, uint64_t offset, uint64_t len, enum log_chunk_action action,
	uint64_t skip)
{
	struct log_chunk_decision d = log_chunk_decide(have, offset, len);
	if (d.action != action || (action != LOG_CHUNK_GAP && d.skip != skip))
		print_message("have %" PRIu64 ", offset %" PRIu64 ", len %" PRIu64 "\n", have,
			offset, len);
	assert_int_equal(d.action, action);
	if (action != LOG_CHUNK_GAP)
		assert_int_equal(d.skip, skip);
}

/* The next chunk right where the master's copy ends is appended whole. */
static void test_append(void **state)
{
	check(0, 0, 10, LOG_CHUNK_APPEND, 0);
	check(10, 10, 5, LOG_CHUNK_APPEND, 0);
	check(4096, 4096, 1, LOG_CHUNK_APPEND, 0);
}

/* A resend that starts inside what the master has appends only the new tail. */
static void test_overlap(void **state)
{
	check(10, 5, 10, LOG_CHUNK_APPEND, 5);
	check(10, 0, 11, LOG_CHUNK_APPEND, 10);
	check(10, 9, 2, LOG_CHUNK_APPEND, 1);
}

/* Bytes the master already has are acknowledged and dropped. */
static void test_duplicate(void **state)
{
	check(10, 0, 10, LOG_CHUNK_DUPLICATE, 10);
	check(10, 5, 5, LOG_CHUNK_DUPLICATE, 5);
	check(10, 2, 3, LOG_CHUNK_DUPLICATE, 3);
}

/* A chunk past the end would leave a hole: refused. */
static void test_gap(void **state)
{
	check(0, 1, 10, LOG_CHUNK_GAP, 0);
	check(10, 11, 5, LOG_CHUNK_GAP, 0);
	check(10, UINT64_MAX, 1, LOG_CHUNK_GAP, 0);
}

/* Empty chunks never append anything; at or before have they are duplicates. */
static void test_zero_length(void **state)
{
	check(0, 0, 0, LOG_CHUNK_DUPLICATE, 0);
	check(10, 0, 0, LOG_CHUNK_DUPLICATE, 0);
	check(10, 10, 0, LOG_CHUNK_DUPLICATE, 0);
	check(10, 11, 0, LOG_CHUNK_GAP, 0);
}

/* Offsets at 0 and at have, with large streams. */
static void test_edges(void **state)
{
	uint64_t big = 1ULL << 40;
	check(big, 0, big, LOG_CHUNK_DUPLICATE, big);
	check(big, 0, big + 1, LOG_CHUNK_APPEND, big);
	check(big, big, 4 << 20, LOG_CHUNK_APPEND, 0);
	check(big, big + 1, 4 << 20, LOG_CHUNK_GAP, 0);
	/* a huge length must not wrap around and look like a duplicate */
	check(10, 5, UINT64_MAX, LOG_CHUNK_APPEND, 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append),
		cmocka_unit_test(test_overlap),
		cmocka_unit_test(test_duplicate),
		cmocka_unit_test(test_gap),
		cmocka_unit_test(test_zero_length),
		cmocka_unit_test(test_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
