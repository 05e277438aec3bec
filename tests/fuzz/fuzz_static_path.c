/*
 * libFuzzer target for the static server's path decoding (src/master/
 * static.h), which takes the raw request target of any GET outside /v1:
 * an accepted target decodes to a relative path with no "." or ".."
 * segment, no backslash and no NUL, so that WEB_DIR/path stays inside.
 *
 *   CC=clang meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false
 *   ninja -C build-fuzz tests/fuzz/fuzz_static_path
 *   build-fuzz/tests/fuzz/fuzz_static_path -max_total_time=60
 */
#include "base/compat.h"
#include "master/static.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *target = malloc(size + 1), *out = NULL;

	memcpy(target, data, size);
	target[size] = 0;
	if (static_resolve(target, &out) == 0) {
		const char *p = out;
		if (strlen(out) > size || strchr(out, '\\'))
			abort();
		for (;;) {
			size_t n = strcspn(p, "/");
			if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
				abort();
			if (!p[n])
				break;
			p += n + 1;
		}
		free(out);
	}
	free(target);
	return 0;
}
