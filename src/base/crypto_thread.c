/* crypto_thread_done (base/crypto.h): apart from crypto.c so that a
 * program that hashes but speaks no TLS (the front yard) links no OpenSSL. */
#include "base/compat.h"
#include "base/crypto.h"

#include <openssl/crypto.h>

void crypto_thread_done(void)
{
	OPENSSL_thread_stop();
}
