#include "base/compat.h"
#include "base/dynlib.h"

#include <dlfcn.h>

void dynlib_sym(struct dynlib *d, void **slot, const char *name)
{
	if (!d->failed[0] && !(*slot = dlsym(d->handle, name)))
		snprintf(d->failed, sizeof(d->failed), "%s and its libraries have no %s", d->soname, name);
}

int dynlib_load(struct dynlib *d, const char *what, struct errbuf *eb)
{
	pthread_mutex_lock(&d->lock);
	if (!d->tried) {
		d->tried = true;
		/* dlsym on its handle also finds its dependencies' symbols */
		if (!(d->handle = dlopen(d->soname, RTLD_NOW | RTLD_LOCAL)))
			snprintf(d->failed, sizeof(d->failed), "%s", dlerror());
		else
			d->bind(d);
	}
	pthread_mutex_unlock(&d->lock);
	if (d->failed[0])
		return error(eb, YERR(INTERNAL), "cannot load %s (%s): %s", what, d->soname, d->failed);
	return 0;
}
