/*
 * The one growable string of the project. buf is never NULL (an empty strbuf
 * points at a shared "" until it first grows) and is always NUL-terminated;
 * len does not count the NUL. A strbuf may hold binary data.
 *
 * For untrusted input set max: an append that would grow past it fails with
 * -1 and leaves the buffer unchanged (the *_capped functions).
 */
#ifndef YARD_STRBUF_H
#define YARD_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

struct strbuf {
	size_t alloc;
	size_t len;
	char *buf;
};

extern char strbuf_slopbuf[];
#define STRBUF_INIT { 0, 0, strbuf_slopbuf }

void strbuf_init(struct strbuf *sb, size_t hint);
/* strbuf_release frees the contents and leaves sb empty and reusable. */
void strbuf_release(struct strbuf *sb);
/* strbuf_detach returns the buffer (caller frees) and leaves sb empty. */
char *strbuf_detach(struct strbuf *sb, size_t *len);
void strbuf_grow(struct strbuf *sb, size_t extra);
void strbuf_setlen(struct strbuf *sb, size_t len);
#define strbuf_reset(sb) strbuf_setlen((sb), 0)

void strbuf_add(struct strbuf *sb, const void *data, size_t len);
void strbuf_addstr(struct strbuf *sb, const char *s);
void strbuf_addch(struct strbuf *sb, int c);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap);
/* strbuf_add_capped appends unless sb would exceed max bytes: then -1. */
int strbuf_add_capped(struct strbuf *sb, const void *data, size_t len, size_t max);
/* strbuf_trim removes leading and trailing whitespace. */
void strbuf_trim(struct strbuf *sb);

/* strbuf_read_fd appends everything readable from fd; -1 with errno on error. */
int strbuf_read_fd(struct strbuf *sb, int fd);
/* strbuf_read_file appends the file at path; -1 with errno on error. If max
 * is not 0 and the file is larger, fails with errno EFBIG. */
int strbuf_read_file(struct strbuf *sb, const char *path, size_t max);

#endif
