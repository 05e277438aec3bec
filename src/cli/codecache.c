#include "base/compat.h"
#include "cli/codecache.h"

#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

/* The cache's directory, or NULL when there is no home to keep it in. */
static char *cache_dir(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");

	if (xdg && *xdg == '/')
		return xasprintf("%s/yard/code", xdg);
	if (home && *home)
		return xasprintf("%s/.cache/yard/code", home);
	return NULL;
}

/* The entry's file: one per (master, directory). */
static char *entry_path(const char *master, const char *dir)
{
	char *base = cache_dir(), *key = xasprintf("%s\n%s", master, dir), hex[SHA256_HEX_LEN + 1];
	char *path = NULL;

	sha256_hex(key, strlen(key), hex);
	if (base)
		path = xasprintf("%s/%s", base, hex);
	free(base);
	free(key);
	return path;
}

char *codecache_lookup(const char *master, const char *dir, const char *fingerprint)
{
	char *path = entry_path(master, dir), *digest = NULL;
	struct strbuf text = STRBUF_INIT;
	size_t n = strlen(fingerprint);

	/* "FINGERPRINT sha256:HEX\n" */
	if (path && strbuf_read_file(&text, path, 4096) >= 0 && text.len == n + 1 + 71 + 1 &&
	    !memcmp(text.buf, fingerprint, n) && text.buf[n] == ' ' && !strncmp(text.buf + n + 1, "sha256:", 7) &&
	    strspn(text.buf + n + 8, "0123456789abcdef") == SHA256_HEX_LEN && text.buf[text.len - 1] == '\n')
		digest = xstrndup(text.buf + n + 1, 71);
	strbuf_release(&text);
	free(path);
	return digest;
}

void codecache_store(const char *master, const char *dir, const char *fingerprint, const char *digest)
{
	char *base = cache_dir(), *path = entry_path(master, dir);
	char *text = xasprintf("%s %s\n", fingerprint, digest);

	if (base && path && !mkdir_p(base, 0700))
		write_file_replace(path, text, strlen(text), 0600);
	free(text);
	free(path);
	free(base);
}

void codecache_forget(const char *master, const char *dir)
{
	char *path = entry_path(master, dir);

	if (path)
		unlink(path);
	free(path);
}
