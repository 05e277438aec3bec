/*
 * A shared library loaded at its first use (dlopen) rather than by the
 * dynamic loader at every start: for libraries that cost a short-lived
 * program more to load than it spends using them (common/archivelib.h,
 * common/tlslib.h). Each has a table of the library's functions, which its
 * bind function fills with dynlib_sym; the first dynlib_load loads and
 * binds, once, for every thread.
 */
#ifndef YARD_DYNLIB_H
#define YARD_DYNLIB_H

#include <pthread.h>
#include <stdbool.h>

#include "base/error.h"

struct dynlib {
	const char *soname;           /* "libarchive.so.13" */
	void (*bind)(struct dynlib *d); /* dynlib_sym for each function */
	pthread_mutex_t lock;
	bool tried;
	void *handle;
	char failed[512];             /* why it could not be loaded; "" when it was */
};

#define DYNLIB_INIT(soname, bind) { (soname), (bind), PTHREAD_MUTEX_INITIALIZER, false, NULL, "" }

/* dynlib_sym sets *slot to the library's function name (bind calls it for
 * each), or notes that it has none. */
void dynlib_sym(struct dynlib *d, void **slot, const char *name);

/* dynlib_load loads and binds d once: 0, or YERR(INTERNAL) with eb saying
 * which library (what: "libarchive") could not be loaded and why. */
int dynlib_load(struct dynlib *d, const char *what, struct errbuf *eb);

#endif
