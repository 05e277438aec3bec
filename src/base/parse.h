/*
 * Bounded cursor parsers for text that came from outside. Each takes a
 * pointer to a cursor, advances it past what it consumed on success and
 * leaves it unchanged on failure. They return 0 or -1; no errno.
 */
#ifndef YARD_PARSE_H
#define YARD_PARSE_H

#include <stdint.h>

/* parse_u64: one or more decimal digits, no sign, no overflow. */
int parse_u64(const char **p, uint64_t *out);
/* parse_i64: optional '-' then digits. */
int parse_i64(const char **p, int64_t *out);

/* The whole-string forms: s must be entirely consumed. */
int parse_u64_str(const char *s, uint64_t *out);
int parse_i64_str(const char *s, int64_t *out);

/* parse_size_str: "512", "512B", "4k", "2KiB", "2GiB", "1.5G", "100M", "3T" into
 * bytes. Binary units (KiB/MiB/GiB/TiB, K/M/G/T, k/m/g/t) are powers of 1024;
 * "KB", "MB", "GB", "TB" are powers of 1000. */
int parse_size_str(const char *s, uint64_t *bytes);

/* parse_duration_str: "90", "90s", "15m", "2h", "1d", "1h30m", "500ms" into
 * milliseconds. A bare number is seconds. */
int parse_duration_str(const char *s, uint64_t *ms);

/* format_size: "2.0GiB" style into buf. */
void format_size(uint64_t bytes, char *buf, unsigned len);

#endif
