#include "base/compat.h"
#include "common/curllib.h"

#include "base/dynlib.h"

struct curllib curllib;

static void bind_symbols(struct dynlib *d)
{
#define CURLLIB_SYM(f) dynlib_sym(d, (void **)&curllib.f, "curl_" #f);
	CURLLIB_FUNCS(CURLLIB_SYM)
#undef CURLLIB_SYM
	if (!d->failed[0] && curllib.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		snprintf(d->failed, sizeof(d->failed), "curl_global_init failed");
}

static struct dynlib dl = DYNLIB_INIT(CURLLIB_SONAME, bind_symbols);

int curllib_load(struct errbuf *eb)
{
	return dynlib_load(&dl, "libcurl", eb);
}
