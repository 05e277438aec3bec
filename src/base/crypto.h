/* Hashes and random tokens, from OpenSSL. */
#ifndef YARD_CRYPTO_H
#define YARD_CRYPTO_H

#include <stddef.h>

#define SHA256_HEX_LEN 64

/* hex_encode writes the n bytes at data as 2n lowercase hex digits and a
 * NUL into out. */
void hex_encode(const void *data, size_t n, char *out);
/* sha256_hex writes 64 hex digits and a NUL into out[65]. */
void sha256_hex(const void *data, size_t len, char out[SHA256_HEX_LEN + 1]);
/* sha256_file_hex hashes a whole file; -1 with errno on error. */
int sha256_file_hex(const char *path, char out[SHA256_HEX_LEN + 1]);
/* A sha256 of bytes that come in pieces: sha256_stream_new, then
 * sha256_stream_add for each piece, then sha256_stream_finish, which
 * writes the digest as 64 hex digits and a NUL into out[65] and frees s
 * (sha256_stream_free frees one unfinished). */
struct sha256_stream;
struct sha256_stream *sha256_stream_new(void);
void sha256_stream_add(struct sha256_stream *s, const void *data, size_t len);
void sha256_stream_finish(struct sha256_stream *s, char out[SHA256_HEX_LEN + 1]);
void sha256_stream_free(struct sha256_stream *s);
/* hmac_sha256_hex writes the HMAC-SHA256 of data under key as 64 hex
 * digits and a NUL into out[65]. */
void hmac_sha256_hex(const char *key, const void *data, size_t len, char out[SHA256_HEX_LEN + 1]);
/* random_hex fills out with 2*nbytes hex digits of cryptographic randomness and
 * a NUL; out must hold 2*nbytes+1. Aborts if the RNG fails. */
void random_hex(char *out, size_t nbytes);
/* random_bytes fills out with n bytes of cryptographic randomness; aborts
 * if the RNG fails. */
void random_bytes(void *out, size_t n);
/* base64_encode writes the standard base64 (with '=' padding) of n bytes
 * and a NUL into out, which must hold 4 * ((n + 2) / 3) + 1 bytes; returns
 * the length written (without the NUL). */
size_t base64_encode(const void *in, size_t n, char *out);
/* sha1_base64 writes the base64 of the SHA-1 of data (28 characters) and a
 * NUL into out[29]: what a WebSocket handshake's accept key is made of
 * (common/wsframe.h). SHA-1 is used there for a protocol's checksum, never
 * for security. */
void sha1_base64(const void *data, size_t len, char out[29]);
/* consttime_streq compares two NUL-terminated strings without early exit. */
int consttime_streq(const char *a, const char *b);

/* crypto_thread_done frees OpenSSL's state of the calling thread (its
 * error queue, its random generator). Call it as a thread that used TLS
 * ends: OpenSSL frees that state at thread exit only while it is still
 * initialised, and a thread that ends while the process exits (after
 * OpenSSL's own atexit clean-up) would leave it behind. */
void crypto_thread_done(void);

#endif
