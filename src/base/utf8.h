/*
 * UTF-8 as JSON and terminals need it: one decoder of well-formed
 * sequences (RFC 3629: no overlong forms, no surrogates, nothing past
 * U+10FFFF, the rules jansson applies), and the two ways yard turns bytes
 * that came from outside into text that is always valid.
 */
#ifndef YARD_UTF8_H
#define YARD_UTF8_H

#include <stdbool.h>
#include <stddef.h>

struct strbuf;

/* utf8_seq_len: the length (1..4) of the well-formed sequence that s
 * starts with, 0 when s[0] does not start one within len bytes (len > 0). */
size_t utf8_seq_len(const unsigned char *s, size_t len);
/* utf8_valid: whether the len bytes of s are all well-formed UTF-8. */
bool utf8_valid(const char *s, size_t len);

/* utf8_escape_append appends s to out with every byte that is not part of
 * a well-formed sequence, and every control character (C0 and DEL), as the
 * four characters \xHH; a backslash stays a backslash. What it writes is
 * valid UTF-8 that cannot break a line or steer a terminal, and it shows
 * which bytes came: for request input quoted in error messages and logs. */
void utf8_escape_append(struct strbuf *out, const char *s, size_t len);
/* utf8_escape_into writes s, escaped as utf8_escape_append does, into the
 * buffer dst of cap bytes (cap > 0), always NUL-terminated; what does not
 * fit is cut at a whole character or escape, never inside one. */
void utf8_escape_into(char *dst, size_t cap, const char *s);
/* utf8_escape_dup: a new string of s escaped as utf8_escape_append does
 * (caller frees). */
char *utf8_escape_dup(const char *s);
/* utf8_lossy_append appends s with every byte that does not start a
 * well-formed sequence replaced by U+FFFD (for log text shown as JSON). */
void utf8_lossy_append(struct strbuf *out, const char *s, size_t len);

#endif
