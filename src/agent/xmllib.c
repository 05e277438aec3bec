#include "base/compat.h"
#include "agent/xmllib.h"

#include "base/dynlib.h"

static struct xmllib lib;

static void bind_symbols(struct dynlib *d)
{
#define XMLLIB_SYM(f) dynlib_sym(d, (void **)&lib.f, #f);
	XMLLIB_FUNCS(XMLLIB_SYM)
#undef XMLLIB_SYM
}

static struct dynlib dl = DYNLIB_INIT(XMLLIB_SONAME, bind_symbols);

const struct xmllib *xmllib_load(struct errbuf *eb)
{
	return dynlib_load(&dl, "libxml2", eb) ? NULL : &lib;
}
