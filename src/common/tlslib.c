#include "base/compat.h"
#include "common/tlslib.h"

#include <dlfcn.h>
#include <pthread.h>

static struct tlslib lib;
static char failed[512]; /* why they could not be loaded, once they could not */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
	/* dlsym on its handle finds libssl's and libcrypto's symbols too: they
	 * are its dependencies */
	void *h = dlopen(TLSLIB_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(failed, sizeof(failed), "%s", dlerror());
		return;
	}
#define TLSLIB_SYM(f)                                                                              \
	if (!failed[0] && !(*(void **)&lib.f = dlsym(h, #f)))                                      \
		snprintf(failed, sizeof(failed), "%s and its libraries have no %s", TLSLIB_SONAME, #f);
	TLSLIB_FUNCS(TLSLIB_SYM)
#undef TLSLIB_SYM
}

const struct tlslib *tlslib_load(struct errbuf *eb)
{
	pthread_once(&once, load);
	if (failed[0]) {
		error(eb, YERR(INTERNAL), "cannot load OpenSSL (%s): %s", TLSLIB_SONAME, failed);
		return NULL;
	}
	return &lib;
}
