#include "base/compat.h"
#include "common/tlslib.h"

#include "base/dynlib.h"

static struct tlslib lib;

static void bind_symbols(struct dynlib *d)
{
#define TLSLIB_SYM(f) dynlib_sym(d, (void **)&lib.f, #f);
	TLSLIB_FUNCS(TLSLIB_SYM)
#undef TLSLIB_SYM
}

/* libevent's OpenSSL glue: dlsym on its handle finds libssl's and
 * libcrypto's functions too, its dependencies */
static struct dynlib dl = DYNLIB_INIT(TLSLIB_SONAME, bind_symbols);

const struct tlslib *tlslib_load(struct errbuf *eb)
{
	return dynlib_load(&dl, "OpenSSL", eb) ? NULL : &lib;
}
