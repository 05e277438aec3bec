#include "base/compat.h"
#include "base/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

static void to_hex(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

void sha256_hex(const void *data, size_t len, char out[SHA256_HEX_LEN + 1])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
	to_hex(md, 32, out);
}

/* struct sha256_stream is OpenSSL's EVP_MD_CTX under another name. */
struct sha256_stream *sha256_stream_new(void)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		fprintf(stderr, "yard: cannot start a sha256\n");
		abort();
	}
	return (struct sha256_stream *)ctx;
}

void sha256_stream_add(struct sha256_stream *s, const void *data, size_t len)
{
	EVP_DigestUpdate((EVP_MD_CTX *)s, data, len);
}

void sha256_stream_finish(struct sha256_stream *s, char out[SHA256_HEX_LEN + 1])
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	EVP_DigestFinal_ex((EVP_MD_CTX *)s, md, &mdlen);
	to_hex(md, 32, out);
	EVP_MD_CTX_free((EVP_MD_CTX *)s);
}

void sha256_stream_free(struct sha256_stream *s)
{
	EVP_MD_CTX_free((EVP_MD_CTX *)s);
}

void hmac_sha256_hex(const char *key, const void *data, size_t len, char out[SHA256_HEX_LEN + 1])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	HMAC(EVP_sha256(), key, (int)strlen(key), data, len, md, &mdlen);
	to_hex(md, 32, out);
}

int sha256_file_hex(const char *path, char out[SHA256_HEX_LEN + 1])
{
	unsigned char md[32], buf[65536];
	unsigned int mdlen = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = -1;
	EVP_MD_CTX *ctx;
	if (fd < 0)
		return -1;
	ctx = EVP_MD_CTX_new();
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			goto out;
		}
		if (n == 0)
			break;
		EVP_DigestUpdate(ctx, buf, (size_t)n);
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	to_hex(md, 32, out);
	ret = 0;
out:
	EVP_MD_CTX_free(ctx);
	close(fd);
	return ret;
}

void random_hex(char *out, size_t nbytes)
{
	unsigned char buf[64];
	assert(nbytes <= sizeof(buf));
	if (RAND_bytes(buf, (int)nbytes) != 1) {
		fprintf(stderr, "yard: random number generator failed\n");
		abort();
	}
	to_hex(buf, nbytes, out);
}

void random_bytes(void *out, size_t n)
{
	if (n > INT_MAX || RAND_bytes(out, (int)n) != 1) {
		fprintf(stderr, "yard: random number generator failed\n");
		abort();
	}
}

size_t base64_encode(const void *in, size_t n, char *out)
{
	return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

void sha1_base64(const void *data, size_t len, char out[29])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	EVP_Digest(data, len, md, &mdlen, EVP_sha1(), NULL);
	base64_encode(md, mdlen, out);
}

int consttime_streq(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la != lb)
		return 0;
	return CRYPTO_memcmp(a, b, la) == 0;
}

void crypto_thread_done(void)
{
	OPENSSL_thread_stop();
}
