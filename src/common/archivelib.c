#include "base/compat.h"
#include "common/archivelib.h"

#include "base/dynlib.h"

static struct archivelib lib;

static void bind_symbols(struct dynlib *d)
{
#define ARCHIVELIB_SYM(f) dynlib_sym(d, (void **)&lib.f, #f);
	ARCHIVELIB_FUNCS(ARCHIVELIB_SYM)
#undef ARCHIVELIB_SYM
}

static struct dynlib dl = DYNLIB_INIT(ARCHIVELIB_SONAME, bind_symbols);

const struct archivelib *archivelib_load(struct errbuf *eb)
{
	return dynlib_load(&dl, "libarchive", eb) ? NULL : &lib;
}
