/*
 * libFuzzer target for the trace readers of `yard sim` (src/sim/sim.h), which
 * read CSV files from outside (Tiresias, Philly and Pollux formats). The
 * first input byte picks the format, the rest is the file. Every input is
 * read or refused with a message naming the line; what is read is sorted by
 * submit time.
 *
 *   CC=clang meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false
 *   ninja -C build-fuzz tests/fuzz/fuzz_trace
 *   build-fuzz/tests/fuzz/fuzz_trace tests/fuzz/corpus/trace -max_total_time=60
 */
#include "base/compat.h"
#include "sim/sim.h"

#include <sys/mman.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct errbuf eb = ERRBUF_INIT;
	struct sim_trace t;
	char path[64];
	int fd;

	if (!size)
		return 0;
	enum sim_format fmt = data[0] % 3 == 0 ? SIM_FORMAT_TIRESIAS
			    : data[0] % 3 == 1 ? SIM_FORMAT_PHILLY : SIM_FORMAT_POLLUX;
	fd = memfd_create("trace", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data + 1, size - 1) != (ssize_t)(size - 1))
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	memset(&t, 0, sizeof(t));
	if (sim_trace_load(path, fmt, &t, &eb) == 0) {
		for (size_t i = 1; i < t.njobs; i++)
			if (t.jobs[i].submit < t.jobs[i - 1].submit)
				abort();
		sim_trace_release(&t);
	} else if (!eb.msg[0]) {
		abort();
	}
	close(fd);
	return 0;
}
