/* crypto_thread_done (base/crypto.h). OpenSSL is in a process only where
 * it was loaded (by libcurl, common/curllib.h, or by the front's https,
 * common/tlslib.h): a program that never loaded it has no state to free,
 * and links no OpenSSL for it. */
#include "base/compat.h"
#include "base/crypto.h"

#include <dlfcn.h>

/* The shared object of Debian's libssl3 that holds OPENSSL_thread_stop. */
#define LIBCRYPTO_SONAME "libcrypto.so.3"

void crypto_thread_done(void)
{
	/* RTLD_NOLOAD: a handle only when it is already loaded */
	void *h = dlopen(LIBCRYPTO_SONAME, RTLD_NOW | RTLD_NOLOAD);
	void (*thread_stop)(void);

	if (!h)
		return;
	*(void **)&thread_stop = dlsym(h, "OPENSSL_thread_stop");
	if (thread_stop)
		thread_stop();
	dlclose(h);
}
