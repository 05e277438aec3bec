/*
 * Hashes from nettle, GnuTLS's cryptographic library: OpenSSL sets itself
 * up (its configuration, its providers' tables) at the first hash, which
 * costs a CLI call about a millisecond of CPU, a third of a whole `sbatch`;
 * nettle's SHA-256 runs on the same SHA-NI instructions with nothing to set
 * up. Randomness comes from the kernel (getrandom(2)).
 */
#include "base/compat.h"
#include "base/crypto.h"

#include "base/xalloc.h"

#include <nettle/base64.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha1.h>
#include <nettle/sha2.h>
#include <sys/random.h>

void hex_encode(const void *data, size_t n, char *out)
{
	const unsigned char *in = data;
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

void sha256_hex(const void *data, size_t len, char out[SHA256_HEX_LEN + 1])
{
	struct sha256_ctx ctx;
	uint8_t md[SHA256_DIGEST_SIZE];

	sha256_init(&ctx);
	sha256_update(&ctx, len, data);
	sha256_digest(&ctx, sizeof(md), md);
	hex_encode(md, sizeof(md), out);
}

/* struct sha256_stream is nettle's sha256_ctx under another name. */
struct sha256_stream {
	struct sha256_ctx ctx;
};

struct sha256_stream *sha256_stream_new(void)
{
	struct sha256_stream *s = xmalloc(sizeof(*s));

	sha256_init(&s->ctx);
	return s;
}

void sha256_stream_add(struct sha256_stream *s, const void *data, size_t len)
{
	sha256_update(&s->ctx, len, data);
}

void sha256_stream_finish(struct sha256_stream *s, char out[SHA256_HEX_LEN + 1])
{
	uint8_t md[SHA256_DIGEST_SIZE];

	sha256_digest(&s->ctx, sizeof(md), md);
	hex_encode(md, sizeof(md), out);
	free(s);
}

void sha256_stream_free(struct sha256_stream *s)
{
	free(s);
}

void hmac_sha256_hex(const char *key, const void *data, size_t len, char out[SHA256_HEX_LEN + 1])
{
	struct hmac_sha256_ctx ctx;
	uint8_t md[SHA256_DIGEST_SIZE];

	hmac_sha256_set_key(&ctx, strlen(key), (const uint8_t *)key);
	hmac_sha256_update(&ctx, len, data);
	hmac_sha256_digest(&ctx, sizeof(md), md);
	hex_encode(md, sizeof(md), out);
}

int sha256_file_hex(const char *path, char out[SHA256_HEX_LEN + 1])
{
	uint8_t md[SHA256_DIGEST_SIZE], buf[65536];
	struct sha256_ctx ctx;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = -1;

	if (fd < 0)
		return -1;
	sha256_init(&ctx);
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			goto out;
		}
		if (n == 0)
			break;
		sha256_update(&ctx, (size_t)n, buf);
	}
	sha256_digest(&ctx, sizeof(md), md);
	hex_encode(md, sizeof(md), out);
	ret = 0;
out:
	close(fd);
	return ret;
}

void random_hex(char *out, size_t nbytes)
{
	unsigned char buf[64];
	assert(nbytes <= sizeof(buf));
	random_bytes(buf, nbytes);
	hex_encode(buf, nbytes, out);
}

/* The kernel's generator (getrandom(2), the source OpenSSL seeds from). */
void random_bytes(void *out, size_t n)
{
	unsigned char *p = out;

	while (n) {
		ssize_t got = getrandom(p, n, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			fprintf(stderr, "yard: random number generator failed: %s\n", strerror(errno));
			abort();
		}
		p += got;
		n -= (size_t)got;
	}
}

size_t base64_encode(const void *in, size_t n, char *out)
{
	size_t len = BASE64_ENCODE_RAW_LENGTH(n);

	base64_encode_raw(out, n, in);
	out[len] = '\0';
	return len;
}

void sha1_base64(const void *data, size_t len, char out[29])
{
	struct sha1_ctx ctx;
	uint8_t md[SHA1_DIGEST_SIZE];

	sha1_init(&ctx);
	sha1_update(&ctx, len, data);
	sha1_digest(&ctx, sizeof(md), md);
	base64_encode(md, sizeof(md), out);
}

int consttime_streq(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la != lb)
		return 0;
	return memeql_sec(a, b, la);
}
