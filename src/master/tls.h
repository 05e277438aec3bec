/*
 * The master's TLS identity: a certificate and its key, read from files
 * (--tls-cert, --tls-key) or made once and kept in the data dir
 * (--tls-self-signed), and the pin that clients give to trust it.
 *
 * The pin is libcurl's CURLOPT_PINNEDPUBLICKEY form, "sha256//BASE64" of
 * the SHA-256 of the certificate's SubjectPublicKeyInfo: it stays the same
 * when the certificate is renewed with the same key.
 */
#ifndef YARD_MASTER_TLS_H
#define YARD_MASTER_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

/*
 * The GnuTLS priorities the master's https server is started with
 * (MHD_OPTION_HTTPS_PRIORITIES): TLS 1.3 and 1.2 only (RFC 8996 retires 1.0
 * and 1.1), AEAD ciphers only (AES-GCM, ChaCha20-Poly1305; no CBC, no SHA-1
 * MACs) and forward-secret ECDHE key exchange for 1.2, with the server's
 * order preferred. `gnutls-cli --priority '...' -l` lists what it allows:
 * the three TLS 1.3 suites and ECDHE-{ECDSA,RSA}-{AES-256-GCM,AES-128-GCM,
 * CHACHA20-POLY1305} of TLS 1.2. libcurl's defaults (agents, CLI) meet it.
 */
#define TLS_PRIORITIES                                                                  \
	"SECURE256:+SECURE128:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:"                     \
	"-CIPHER-ALL:+AES-256-GCM:+AES-128-GCM:+CHACHA20-POLY1305:-MAC-ALL:+AEAD:"      \
	"-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:%SERVER_PRECEDENCE"

/* What MHD serves. */
struct tls_identity {
	char *cert_pem; /* owned: the certificate (and any chain after it), NUL-terminated */
	char *key_pem;  /* owned: the private key, unencrypted, NUL-terminated; wiped on release */
	char *pin;      /* owned: "sha256//BASE64" of the certificate's public key */
};

void tls_identity_release(struct tls_identity *id);

/* tls_load reads a PEM certificate and its unencrypted PEM key and checks
 * that they parse, belong together and that the certificate has not
 * expired. The errors name the option (cert_opt, key_opt: "--tls-cert"),
 * the file and the reason. */
int tls_load(const char *cert_path, const char *key_path, const char *cert_opt,
	     const char *key_opt, struct tls_identity *out, struct errbuf *eb);

/* tls_self_signed makes DIR/key.pem (mode 0600, an EC P-256 key) and
 * DIR/cert.pem (self-signed, valid ten years, naming every entry of sans:
 * host names or IPv4/IPv6 addresses) unless DIR/cert.pem exists already, in
 * which case they are kept as they are; *created (may be NULL) says which.
 * A kept certificate that lacks one of sans is reported on stderr. */
int tls_self_signed(const char *dir, const char *const *sans, size_t nsans, bool *created,
		    struct errbuf *eb);

/* tls_san_valid: name is a host name ("node-1.example", "*.example") or an
 * IPv4 or IPv6 address. */
bool tls_san_valid(const char *name);

/* tls_pin_of_cert computes the pin of the first certificate in pem into
 * *pin (caller frees). */
int tls_pin_of_cert(const char *pem, size_t len, char **pin, struct errbuf *eb);

#endif
