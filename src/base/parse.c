#include "base/compat.h"
#include "base/parse.h"

#include <ctype.h>

int parse_u64(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	if (!isdigit((unsigned char)*s))
		return -1;
	while (isdigit((unsigned char)*s)) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
		s++;
	}
	*out = v;
	*p = s;
	return 0;
}

int parse_i64(const char **p, int64_t *out)
{
	const char *s = *p;
	int neg = 0;
	uint64_t v;
	if (*s == '-') {
		neg = 1;
		s++;
	}
	if (parse_u64(&s, &v) < 0)
		return -1;
	if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
		return -1;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	*p = s;
	return 0;
}

int parse_u64_str(const char *s, uint64_t *out)
{
	uint64_t v;
	if (parse_u64(&s, &v) < 0 || *s)
		return -1;
	*out = v;
	return 0;
}

int parse_i64_str(const char *s, int64_t *out)
{
	int64_t v;
	if (parse_i64(&s, &v) < 0 || *s)
		return -1;
	*out = v;
	return 0;
}

/* A decimal with an optional fraction, as a mantissa and a power of ten. */
static int parse_decimal(const char **p, uint64_t *mant, unsigned *frac_digits)
{
	const char *s = *p;
	uint64_t v;
	unsigned fd = 0;
	if (parse_u64(&s, &v) < 0)
		return -1;
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return -1;
		while (isdigit((unsigned char)*s)) {
			if (fd >= 6 || v > UINT64_MAX / 10)
				return -1;
			v = v * 10 + (uint64_t)(*s - '0');
			fd++;
			s++;
		}
	}
	*mant = v;
	*frac_digits = fd;
	*p = s;
	return 0;
}

static int scale(uint64_t mant, unsigned fd, uint64_t mult, uint64_t *out)
{
	uint64_t div = 1;
	while (fd--)
		div *= 10;
	if (mant && mult > UINT64_MAX / mant)
		return -1;
	*out = mant * mult / div;
	return 0;
}

int parse_size_str(const char *s, uint64_t *bytes)
{
	static const struct {
		const char *suffix;
		uint64_t mult;
	} units[] = {
		{ "", 1 },
		{ "B", 1 },
		{ "k", 1ULL << 10 }, { "K", 1ULL << 10 }, { "Ki", 1ULL << 10 }, { "KiB", 1ULL << 10 },
		{ "m", 1ULL << 20 }, { "M", 1ULL << 20 }, { "Mi", 1ULL << 20 }, { "MiB", 1ULL << 20 },
		{ "g", 1ULL << 30 }, { "G", 1ULL << 30 }, { "Gi", 1ULL << 30 }, { "GiB", 1ULL << 30 },
		{ "t", 1ULL << 40 }, { "T", 1ULL << 40 }, { "Ti", 1ULL << 40 }, { "TiB", 1ULL << 40 },
		{ "KB", 1000ULL }, { "MB", 1000000ULL }, { "GB", 1000000000ULL },
		{ "TB", 1000000000000ULL },
	};
	uint64_t mant;
	unsigned fd;
	if (parse_decimal(&s, &mant, &fd) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(units); i++)
		if (!strcmp(s, units[i].suffix))
			return scale(mant, fd, units[i].mult, bytes);
	return -1;
}

int parse_duration_str(const char *s, uint64_t *ms)
{
	static const struct {
		const char *suffix;
		uint64_t mult;
	} units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 }, { "d", 86400000 },
	};
	uint64_t total = 0;
	uint64_t mant;
	unsigned fd;
	if (!*s)
		return -1;
	if (parse_decimal(&s, &mant, &fd) < 0)
		return -1;
	if (!*s)
		return scale(mant, fd, 1000, ms);
	for (;;) {
		size_t best = 0;
		uint64_t mult = 0, part;
		for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
			size_t n = strlen(units[i].suffix);
			if (!strncmp(s, units[i].suffix, n) && n > best && !isalpha((unsigned char)s[n])) {
				best = n;
				mult = units[i].mult;
			}
		}
		if (!best || scale(mant, fd, mult, &part) < 0 || total > UINT64_MAX - part)
			return -1;
		total += part;
		s += best;
		if (!*s)
			break;
		if (parse_decimal(&s, &mant, &fd) < 0)
			return -1;
	}
	*ms = total;
	return 0;
}

void format_size(uint64_t bytes, char *buf, unsigned len)
{
	static const char *const names[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	unsigned i = 0;
	while (v >= 1024 && i + 1 < ARRAY_SIZE(names)) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%" PRIu64 "B", bytes);
	else
		snprintf(buf, len, "%.1f%s", v, names[i]);
}
