#include "base/compat.h"
#include "master/tls.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

/* A PEM file is small; anything bigger is not one. */
#define PEM_MAX (1 << 20)
/* How long a self-signed certificate is valid. */
#define SELF_SIGNED_DAYS 3650L

void tls_identity_release(struct tls_identity *id)
{
	free(id->cert_pem);
	if (id->key_pem)
		OPENSSL_cleanse(id->key_pem, strlen(id->key_pem));
	free(id->key_pem);
	free(id->pin);
	id->cert_pem = id->key_pem = id->pin = NULL;
}

/* OpenSSL's last error as text, the queue emptied. */
static const char *ssl_reason(char *buf, size_t len)
{
	unsigned long e = ERR_peek_last_error();

	if (!e)
		snprintf(buf, len, "not PEM");
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

/* A key file must not prompt for a pass phrase: the master runs unattended. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	*(bool *)u = true;
	return -1;
}

static int pin_of_pubkey(EVP_PKEY *key, char **pin)
{
	unsigned char *der = NULL, md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
	int n = i2d_PUBKEY(key, &der);

	if (n <= 0)
		return -1;
	EVP_Digest(der, (size_t)n, md, &mdlen, EVP_sha256(), NULL);
	OPENSSL_free(der);
	EVP_EncodeBlock((unsigned char *)b64, md, (int)mdlen);
	*pin = xasprintf("sha256//%s", b64);
	return 0;
}

int tls_pin_of_cert(const char *pem, size_t len, char **pin, struct errbuf *eb)
{
	BIO *bio = BIO_new_mem_buf(pem, (int)len);
	X509 *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
	char why[256];
	int ret = 0;

	*pin = NULL;
	if (!x || pin_of_pubkey(X509_get0_pubkey(x), pin))
		ret = error(eb, YERR(BAD_REQUEST), "not a PEM certificate: %s",
			    ssl_reason(why, sizeof(why)));
	X509_free(x);
	BIO_free(bio);
	return ret;
}

/* Reads a PEM file of at most PEM_MAX bytes into a NUL-terminated string. */
static int read_pem(const char *path, const char *opt, struct strbuf *sb, struct errbuf *eb)
{
	if (strbuf_read_file(sb, path, PEM_MAX) < 0)
		return error(eb, YERR(IO), "%s '%s': cannot read: %s", opt, path,
			     errno == EFBIG ? "larger than 1 MiB" : strerror(errno));
	return 0;
}

int tls_load(const char *cert_path, const char *key_path, const char *cert_opt,
	     const char *key_opt, struct tls_identity *out, struct errbuf *eb)
{
	struct strbuf cert = STRBUF_INIT, key = STRBUF_INIT;
	BIO *cbio = NULL, *kbio = NULL;
	X509 *x = NULL;
	EVP_PKEY *pk = NULL;
	bool asked = false;
	char why[256];
	int ret;

	memset(out, 0, sizeof(*out));
	ret = read_pem(cert_path, cert_opt, &cert, eb);
	if (!ret)
		ret = read_pem(key_path, key_opt, &key, eb);
	if (ret)
		goto out;
	cbio = BIO_new_mem_buf(cert.buf, (int)cert.len);
	x = PEM_read_bio_X509(cbio, NULL, NULL, NULL);
	if (!x) {
		ret = error(eb, YERR(BAD_REQUEST), "%s '%s': not a PEM certificate: %s", cert_opt,
			    cert_path, ssl_reason(why, sizeof(why)));
		goto out;
	}
	kbio = BIO_new_mem_buf(key.buf, (int)key.len);
	pk = PEM_read_bio_PrivateKey(kbio, NULL, no_passphrase, &asked);
	if (!pk) {
		if (asked)
			ret = error(eb, YERR(BAD_REQUEST),
				    "%s '%s': the key is encrypted; the master needs it without a "
				    "pass phrase", key_opt, key_path);
		else
			ret = error(eb, YERR(BAD_REQUEST), "%s '%s': not a PEM private key: %s",
				    key_opt, key_path, ssl_reason(why, sizeof(why)));
		goto out;
	}
	if (X509_check_private_key(x, pk) != 1) {
		ERR_clear_error();
		ret = error(eb, YERR(BAD_REQUEST),
			    "%s '%s' and %s '%s': the key does not belong to the certificate",
			    key_opt, key_path, cert_opt, cert_path);
		goto out;
	}
	if (X509_cmp_current_time(X509_get0_notAfter(x)) <= 0) {
		BIO *tb = BIO_new(BIO_s_mem());
		char when[64] = "";
		ASN1_TIME_print(tb, X509_get0_notAfter(x));
		BIO_read(tb, when, sizeof(when) - 1);
		BIO_free(tb);
		ret = error(eb, YERR(BAD_REQUEST), "%s '%s': the certificate expired on %s",
			    cert_opt, cert_path, when);
		goto out;
	}
	if (pin_of_pubkey(X509_get0_pubkey(x), &out->pin)) {
		ret = error(eb, YERR(BAD_REQUEST), "%s '%s': cannot encode the public key: %s",
			    cert_opt, cert_path, ssl_reason(why, sizeof(why)));
		goto out;
	}
	out->cert_pem = strbuf_detach(&cert, NULL);
	out->key_pem = strbuf_detach(&key, NULL);
out:
	X509_free(x);
	EVP_PKEY_free(pk);
	BIO_free(cbio);
	BIO_free(kbio);
	strbuf_release(&cert);
	if (key.buf && key.len)
		OPENSSL_cleanse(key.buf, key.len);
	strbuf_release(&key);
	if (ret)
		tls_identity_release(out);
	return ret;
}

static bool is_ip(const char *s)
{
	unsigned char buf[sizeof(struct in6_addr)];
	return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

bool tls_san_valid(const char *name)
{
	size_t n = strlen(name);

	if (is_ip(name))
		return true;
	if (!n || n > 253 || name[0] == '.' || name[0] == '-' || name[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)name[i];
		if (isalnum(ch) || ch == '-' || (ch == '.' && name[i + 1] != '.'))
			continue;
		if (ch == '*' && i == 0 && name[1] == '.')
			continue;
		return false;
	}
	return true;
}

static int add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok = ext && X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok ? 0 : -1;
}

/* Makes a key and a self-signed certificate naming sans, as PEM text. */
static int make_self_signed(const char *const *sans, size_t nsans, struct strbuf *cert_pem,
			    struct strbuf *key_pem, struct errbuf *eb)
{
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	BIGNUM *serial = BN_new();
	BIO *bio = BIO_new(BIO_s_mem());
	struct strbuf alt = STRBUF_INIT;
	char host[256] = "yard master";
	X509V3_CTX ctx;
	X509_NAME *name;
	char why[256];
	char *data;
	long len;
	int ret = 0;

	if (!pk || !x || !serial || !bio)
		goto fail;
	for (size_t i = 0; i < nsans; i++)
		strbuf_addf(&alt, "%s%s:%s", alt.len ? "," : "", is_ip(sans[i]) ? "IP" : "DNS",
			    sans[i]);
	if (nsans && !is_ip(sans[0]))
		snprintf(host, sizeof(host), "%s", sans[0]);
	name = X509_get_subject_name(x);
	if (!X509_set_version(x, X509_VERSION_3) ||
	    !BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) ||
	    !BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), SELF_SIGNED_DAYS * 86400) ||
	    !X509_set_pubkey(x, pk) ||
	    !X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
					(const unsigned char *)"Trainyard", -1, -1, 0) ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)host,
					-1, -1, 0) ||
	    !X509_set_issuer_name(x, name))
		goto fail;
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	if (add_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE") ||
	    add_ext(x, &ctx, NID_key_usage, "critical,digitalSignature") ||
	    add_ext(x, &ctx, NID_ext_key_usage, "serverAuth") ||
	    add_ext(x, &ctx, NID_subject_key_identifier, "hash") ||
	    (alt.len && add_ext(x, &ctx, NID_subject_alt_name, alt.buf)) ||
	    !X509_sign(x, pk, EVP_sha256()))
		goto fail;
	if (!PEM_write_bio_PrivateKey(bio, pk, NULL, NULL, 0, NULL, NULL))
		goto fail;
	len = BIO_get_mem_data(bio, &data);
	strbuf_add(key_pem, data, (size_t)len);
	OPENSSL_cleanse(data, (size_t)len);
	BIO_reset(bio);
	if (!PEM_write_bio_X509(bio, x))
		goto fail;
	len = BIO_get_mem_data(bio, &data);
	strbuf_add(cert_pem, data, (size_t)len);
	goto out;
fail:
	ret = error(eb, YERR(INTERNAL), "cannot make a self-signed certificate: %s",
		    ssl_reason(why, sizeof(why)));
out:
	strbuf_release(&alt);
	BIO_free(bio);
	BN_free(serial);
	X509_free(x);
	EVP_PKEY_free(pk);
	return ret;
}

/* Says on stderr which of sans a kept certificate does not name. */
static void warn_missing_sans(const char *cert_path, const char *const *sans, size_t nsans)
{
	struct strbuf pem = STRBUF_INIT;
	BIO *bio = NULL;
	X509 *x = NULL;

	if (strbuf_read_file(&pem, cert_path, PEM_MAX) < 0)
		goto out;
	bio = BIO_new_mem_buf(pem.buf, (int)pem.len);
	x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
	for (size_t i = 0; x && i < nsans; i++) {
		int ok = is_ip(sans[i]) ? X509_check_ip_asc(x, sans[i], 0)
					: X509_check_host(x, sans[i], 0, 0, NULL);
		if (ok != 1)
			fprintf(stderr, "yard master: warning: '%s' does not name '%s' (remove "
					"the certificate and its key to make a new pair)\n",
				cert_path, sans[i]);
	}
out:
	ERR_clear_error();
	X509_free(x);
	BIO_free(bio);
	strbuf_release(&pem);
}

int tls_self_signed(const char *dir, const char *const *sans, size_t nsans, bool *created,
		    struct errbuf *eb)
{
	char *cert_path = xasprintf("%s/cert.pem", dir);
	char *key_path = xasprintf("%s/key.pem", dir);
	struct strbuf cert = STRBUF_INIT, key = STRBUF_INIT;
	int ret = 0;

	if (created)
		*created = false;
	if (path_exists(cert_path)) {
		if (!path_exists(key_path))
			ret = error(eb, YERR(IO), "--tls-self-signed: '%s' is there but not its "
				    "key '%s' (remove the certificate to make a new pair)", cert_path,
				    key_path);
		else
			warn_missing_sans(cert_path, sans, nsans);
		goto out;
	}
	if (mkdir_p(dir, 0700)) {
		ret = error(eb, YERR(IO), "--tls-self-signed: cannot create '%s': %s", dir,
			    strerror(errno));
		goto out;
	}
	ret = make_self_signed(sans, nsans, &cert, &key, eb);
	if (ret)
		goto out;
	/* the key first: a certificate on disk means its key is there too */
	if (write_file_atomic(key_path, key.buf, key.len, 0600)) {
		ret = error(eb, YERR(IO), "--tls-self-signed: cannot write '%s': %s", key_path,
			    strerror(errno));
		goto out;
	}
	if (write_file_atomic(cert_path, cert.buf, cert.len, 0644)) {
		ret = error(eb, YERR(IO), "--tls-self-signed: cannot write '%s': %s", cert_path,
			    strerror(errno));
		goto out;
	}
	if (created)
		*created = true;
out:
	if (key.len)
		OPENSSL_cleanse(key.buf, key.len);
	strbuf_release(&key);
	strbuf_release(&cert);
	free(cert_path);
	free(key_path);
	return ret;
}
