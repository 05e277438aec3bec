/*
 * libFuzzer target for src/common/metricparse.h, the parser of task output.
 * The input is a stretch of output: each '\n'-separated line goes through
 * one parser, as the agent does. Built when the compiler is clang:
 *
 *   CC=clang meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false
 *   ninja -C build-fuzz tests/fuzz/fuzz_metricparse
 *   build-fuzz/tests/fuzz/fuzz_metricparse -max_len=70000 -max_total_time=60
 */
#include "base/compat.h"
#include "common/metricparse.h"

#include <math.h>

#include "base/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct metric_parser p;
	struct metric_points pts = METRIC_POINTS_INIT;
	const char *s = (const char *)data, *end = s + size;

	metric_parser_init(&p);
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
		/* an exactly sized copy: a read past the line is a read past the heap block */
		char *line = xmalloc(len ? len : 1);
		size_t n0 = pts.n, n;

		memcpy(line, s, len);
		n = metric_parse_line(&p, line, len, &pts);
		free(line);
		if (n != pts.n - n0 || n > METRIC_LINE_POINTS)
			abort();
		for (size_t i = n0; i < pts.n; i++)
			if (!metric_name_valid(pts.v[i].name, strlen(pts.v[i].name)) ||
			    !isfinite(pts.v[i].value) || (pts.v[i].step < 0 && pts.v[i].step != METRIC_NO_STEP))
				abort();
		s += len + 1;
	}
	metric_points_release(&pts);
	return 0;
}
