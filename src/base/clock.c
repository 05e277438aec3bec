#include "base/compat.h"
#include "base/clock.h"

static uint64_t read_clock(clockid_t id, uint64_t div)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec) / div;
}

uint64_t mono_ms(void)
{
	return read_clock(CLOCK_MONOTONIC, 1000000);
}

uint64_t mono_us(void)
{
	return read_clock(CLOCK_MONOTONIC, 1000);
}

uint64_t boot_ms(void)
{
	return read_clock(CLOCK_BOOTTIME, 1000000);
}

uint64_t wall_us(void)
{
	return read_clock(CLOCK_REALTIME, 1000);
}

void format_time_utc(uint64_t us, char *buf, unsigned len)
{
	time_t t = (time_t)(us / 1000000);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
