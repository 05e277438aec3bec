#include "base/compat.h"
#include "common/archivelib.h"

#include <dlfcn.h>
#include <pthread.h>

static struct archivelib lib;
static char failed[512]; /* why it could not be loaded, once it could not */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
	void *h = dlopen(ARCHIVELIB_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(failed, sizeof(failed), "%s", dlerror());
		return;
	}
#define ARCHIVELIB_SYM(f)                                                                          \
	if (!failed[0] && !(*(void **)&lib.f = dlsym(h, #f)))                                      \
		snprintf(failed, sizeof(failed), "%s has no %s", ARCHIVELIB_SONAME, #f);
	ARCHIVELIB_FUNCS(ARCHIVELIB_SYM)
#undef ARCHIVELIB_SYM
}

const struct archivelib *archivelib_load(struct errbuf *eb)
{
	pthread_once(&once, load);
	if (failed[0]) {
		error(eb, YERR(INTERNAL), "cannot load libarchive (%s): %s", ARCHIVELIB_SONAME, failed);
		return NULL;
	}
	return &lib;
}
