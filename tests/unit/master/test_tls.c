/* The master's TLS identity: a self-signed pair made once and kept, its
 * names, its pin (checked against a pin computed here from the key file),
 * and the refusals of files that cannot serve. Serving https is tested end
 * to end (test_tls.py). */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "master/tls.h"

static char *tmpdir(void)
{
	char tmpl[] = "/tmp/yard-tls-XXXXXX";
	assert_non_null(mkdtemp(tmpl));
	return xstrdup(tmpl);
}

static char *slurp(const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	assert_int_equal(strbuf_read_file(&sb, path, 1 << 20), 0);
	return strbuf_detach(&sb, NULL);
}

/* The pin of the public half of the key in key_path, computed without the
 * code under test: base64(SHA-256(SubjectPublicKeyInfo DER)). */
static char *pin_of_key_file(const char *key_path)
{
	FILE *f = fopen(key_path, "r");
	EVP_PKEY *pk;
	unsigned char *der = NULL, md[32];
	unsigned int mdlen = 0;
	char b64[64];
	int n;

	assert_non_null(f);
	pk = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(pk);
	n = i2d_PUBKEY(pk, &der);
	assert_true(n > 0);
	EVP_Digest(der, (size_t)n, md, &mdlen, EVP_sha256(), NULL);
	assert_int_equal(mdlen, 32);
	EVP_EncodeBlock((unsigned char *)b64, md, 32);
	OPENSSL_free(der);
	EVP_PKEY_free(pk);
	return xasprintf("sha256//%s", b64);
}

static X509 *read_cert(const char *path)
{
	FILE *f = fopen(path, "r");
	X509 *x;
	assert_non_null(f);
	x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(x);
	return x;
}

static void test_self_signed_made_once(void **state)
{
	char *dir = tmpdir();
	char *tdir = xasprintf("%s/tls", dir);
	char *cert = xasprintf("%s/cert.pem", tdir), *key = xasprintf("%s/key.pem", tdir);
	const char *sans[] = { "node-7", "localhost", "127.0.0.1", "::1", "yard.example.org" };
	struct tls_identity id, again;
	struct errbuf eb = ERRBUF_INIT;
	struct stat st;
	bool created = false;
	char *cert1, *key1, *pin;

	assert_int_equal(tls_self_signed(tdir, sans, ARRAY_SIZE(sans), &created, &eb), 0);
	assert_true(created);
	assert_int_equal(stat(key, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(stat(tdir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);

	assert_int_equal(tls_load(cert, key, "--tls-cert", "--tls-key", &id, &eb), 0);
	pin = pin_of_key_file(key);
	assert_string_equal(id.pin, pin);
	assert_int_equal(strlen(id.pin), 8 + 44);
	assert_non_null(strstr(id.cert_pem, "-----BEGIN CERTIFICATE-----"));
	assert_non_null(strstr(id.key_pem, "PRIVATE KEY-----"));

	/* every name is in the certificate, and nothing else matches */
	X509 *x = read_cert(cert);
	assert_int_equal(X509_check_host(x, "node-7", 0, 0, NULL), 1);
	assert_int_equal(X509_check_host(x, "localhost", 0, 0, NULL), 1);
	assert_int_equal(X509_check_host(x, "yard.example.org", 0, 0, NULL), 1);
	assert_int_equal(X509_check_ip_asc(x, "127.0.0.1", 0), 1);
	assert_int_equal(X509_check_ip_asc(x, "::1", 0), 1);
	assert_int_not_equal(X509_check_host(x, "other.example.org", 0, 0, NULL), 1);
	assert_int_not_equal(X509_check_ip_asc(x, "10.0.0.1", 0), 1);
	/* a server certificate that is not a CA, valid now */
	assert_int_equal(X509_check_ca(x), 0);
	assert_true(X509_cmp_current_time(X509_get0_notBefore(x)) < 0);
	assert_true(X509_cmp_current_time(X509_get0_notAfter(x)) > 0);
	EVP_PKEY *pub = X509_get0_pubkey(x);
	assert_int_equal(EVP_PKEY_get_base_id(pub), EVP_PKEY_EC);
	X509_free(x);

	/* the second start keeps the pair: same bytes, same pin */
	cert1 = slurp(cert);
	key1 = slurp(key);
	created = true;
	assert_int_equal(tls_self_signed(tdir, sans, ARRAY_SIZE(sans), &created, &eb), 0);
	assert_false(created);
	char *cert2 = slurp(cert), *key2 = slurp(key);
	assert_string_equal(cert1, cert2);
	assert_string_equal(key1, key2);
	assert_int_equal(tls_load(cert, key, "--tls-cert", "--tls-key", &again, &eb), 0);
	assert_string_equal(again.pin, id.pin);

	/* the pin from the certificate alone */
	char *pin2 = NULL;
	assert_int_equal(tls_pin_of_cert(cert1, strlen(cert1), &pin2, &eb), 0);
	assert_string_equal(pin2, pin);

	/* a certificate without its key is not silently replaced */
	assert_int_equal(unlink(key), 0);
	assert_int_equal(tls_self_signed(tdir, sans, ARRAY_SIZE(sans), &created, &eb), YERR(IO));
	assert_non_null(strstr(eb.msg, "is there but not its key"));

	free(pin2);
	free(cert1);
	free(key1);
	free(cert2);
	free(key2);
	free(pin);
	tls_identity_release(&id);
	tls_identity_release(&again);
	rm_rf(dir);
	free(dir);
	free(tdir);
	free(cert);
	free(key);
}

static void test_load_refusals(void **state)
{
	char *dir = tmpdir();
	char *a = xasprintf("%s/a", dir), *b = xasprintf("%s/b", dir);
	char *cert_a = xasprintf("%s/cert.pem", a), *key_b = xasprintf("%s/key.pem", b);
	char *junk = xasprintf("%s/junk.pem", dir), *enc = xasprintf("%s/enc.pem", dir);
	char *missing = xasprintf("%s/missing.pem", dir);
	const char *sans[] = { "localhost" };
	struct tls_identity id;
	struct errbuf eb = ERRBUF_INIT;
	char *want;

	assert_int_equal(tls_self_signed(a, sans, 1, NULL, &eb), 0);
	assert_int_equal(tls_self_signed(b, sans, 1, NULL, &eb), 0);

	/* a key that is not the certificate's */
	assert_int_equal(tls_load(cert_a, key_b, "--tls-cert", "--tls-key", &id, &eb),
			 YERR(BAD_REQUEST));
	want = xasprintf("--tls-key '%s' and --tls-cert '%s': the key does not belong to the "
			 "certificate", key_b, cert_a);
	assert_string_equal(eb.msg, want);
	free(want);
	assert_null(id.cert_pem);
	assert_null(id.pin);

	/* a missing file */
	assert_int_equal(tls_load(missing, key_b, "--tls-cert", "--tls-key", &id, &eb), YERR(IO));
	want = xasprintf("--tls-cert '%s': cannot read: No such file or directory", missing);
	assert_string_equal(eb.msg, want);
	free(want);

	/* not PEM at all, as either */
	assert_int_equal(write_file_atomic(junk, "hello\n", 6, 0600), 0);
	assert_int_equal(tls_load(junk, key_b, "--tls-cert", "--tls-key", &id, &eb),
			 YERR(BAD_REQUEST));
	want = xasprintf("--tls-cert '%s': not a PEM certificate", junk);
	assert_non_null(strstr(eb.msg, want));
	free(want);
	assert_int_equal(tls_load(cert_a, junk, "--tls-cert", "--tls-key", &id, &eb),
			 YERR(BAD_REQUEST));
	want = xasprintf("--tls-key '%s': not a PEM private key", junk);
	assert_non_null(strstr(eb.msg, want));
	free(want);

	/* a key under a pass phrase: refused, never prompted for */
	FILE *kf = fopen(key_b, "r");
	assert_non_null(kf);
	EVP_PKEY *pk = PEM_read_PrivateKey(kf, NULL, NULL, NULL);
	fclose(kf);
	assert_non_null(pk);
	FILE *ef = fopen(enc, "w");
	assert_non_null(ef);
	assert_int_equal(PEM_write_PrivateKey(ef, pk, EVP_aes_256_cbc(), (unsigned char *)"secret",
					      6, NULL, NULL), 1);
	fclose(ef);
	EVP_PKEY_free(pk);
	char *cert_b = xasprintf("%s/cert.pem", b);
	assert_int_equal(tls_load(cert_b, enc, "--tls-cert", "--tls-key", &id, &eb),
			 YERR(BAD_REQUEST));
	want = xasprintf("--tls-key '%s': the key is encrypted; the master needs it without a "
			 "pass phrase", enc);
	assert_string_equal(eb.msg, want);
	free(want);
	free(cert_b);

	rm_rf(dir);
	free(dir);
	free(a);
	free(b);
	free(cert_a);
	free(key_b);
	free(junk);
	free(enc);
	free(missing);
}

static void test_san_valid(void **state)
{
	const char *good[] = { "localhost", "node-7", "yard.example.org", "*.example.org",
			       "10.0.0.1", "::1", "fe80::1", "2001:db8::42" };
	const char *bad[] = { "", "a b", "a,b", "-x", ".x", "x.", "a..b", "x*.org", "a/b",
			      "DNS:x", "IP:1.2.3.4" };

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		if (!tls_san_valid(good[i])) {
			fprintf(stderr, "'%s' refused\n", good[i]);
			fail();
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (tls_san_valid(bad[i])) {
			fprintf(stderr, "'%s' accepted\n", bad[i]);
			fail();
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_self_signed_made_once),
		cmocka_unit_test(test_load_refusals),
		cmocka_unit_test(test_san_valid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
