/*
 * The first include of every .c file in yard: the C library headers nearly
 * every file needs, then banned.h, so that banned functions cannot be called
 * anywhere in the project (system headers are already parsed by then).
 */
#ifndef YARD_COMPAT_H
#define YARD_COMPAT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* sort_array is qsort for an array that may be empty: qsort with a NULL
 * base is undefined behaviour even when n is 0, and an empty array here is
 * often NULL (never allocated). qsort itself is banned (banned.h). */
static inline void sort_array(void *base, size_t n, size_t size,
			      int (*cmp)(const void *, const void *))
{
	if (n > 1)
		(qsort)(base, n, size, cmp);
}

#include "base/banned.h"

#endif
