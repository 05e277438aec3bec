/*
 * libFuzzer target for the demultiplexer of the Docker Engine's attach
 * stream (src/agent/docker.h), which reads what a container engine sends.
 * The first input byte says where to cut the rest into two feeds; every
 * payload byte must come out once, whatever the frame headers claim.
 *
 *   CC=clang meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false
 *   ninja -C build-fuzz tests/fuzz/fuzz_docker_demux
 *   build-fuzz/tests/fuzz/fuzz_docker_demux -max_total_time=60
 */
#include "base/compat.h"
#include "agent/docker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count(void *arg, int stream, const char *buf, size_t len)
{
	if (stream != 1 && stream != 2)
		abort();
	*(size_t *)arg += len;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct docker_demux dm = { 0 };
	size_t total = 0;
	if (!size)
		return 0;
	size_t cut = data[0] % size;
	const char *s = (const char *)data + 1;
	size--;
	if (cut > size)
		cut = size;
	docker_demux_feed(&dm, s, cut, count, &total);
	docker_demux_feed(&dm, s + cut, size - cut, count, &total);
	if (total > size)
		abort();
	return 0;
}
