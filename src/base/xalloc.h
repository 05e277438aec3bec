/*
 * Allocation that never returns NULL. Daemons abort with a message when
 * memory runs out; fault handling is spent on disks, networks and peers.
 */
#ifndef YARD_XALLOC_H
#define YARD_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* xstrndup copies at most n bytes of s and NUL-terminates. */
char *xstrndup(const char *s, size_t n);
/* xasprintf returns a newly allocated formatted string; caller frees. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Grow *arr so that it holds at least nr elements of size elem; *alloc tracks
 * the capacity. */
#define ALLOC_GROW(arr, nr, alloc)                                                  \
	do {                                                                        \
		if ((nr) > (alloc)) {                                               \
			size_t alloc_grow_n_ = (alloc) ? (alloc) * 2 : 8;           \
			while (alloc_grow_n_ < (size_t)(nr))                        \
				alloc_grow_n_ *= 2;                                 \
			(arr) = xrealloc((arr), alloc_grow_n_ * sizeof(*(arr)));    \
			(alloc) = alloc_grow_n_;                                    \
		}                                                                   \
	} while (0)

#endif
