/*
 * libFuzzer target for dataset manifests (src/common/dataset.h), which the
 * master takes from clients in POST /v1/datasets: any JSON document must be
 * accepted or refused with a message naming a field, and an accepted one
 * has only paths that stay inside the dataset.
 *
 *   CC=clang meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false
 *   ninja -C build-fuzz tests/fuzz/fuzz_manifest
 *   build-fuzz/tests/fuzz/fuzz_manifest -max_total_time=60
 */
#include "base/compat.h"
#include "common/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether path stays inside its root: relative, no empty, "." or ".." part. */
static bool stays_inside(const char *p)
{
	if (!*p || *p == '/')
		return false;
	for (;;) {
		size_t n = strcspn(p, "/");
		if (!n || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!p[n])
			return true;
		p += n + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *doc = json_loadb((const char *)data, size, 0, NULL);
	struct errbuf eb = ERRBUF_INIT;
	uint64_t total = 0;
	unsigned files = 0;
	if (!doc)
		return 0;
	if (manifest_validate(doc, &total, &files, &eb) == 0) {
		char digest[72];
		size_t i;
		json_t *f;
		json_array_foreach(json_object_get(doc, "files"), i, f) {
			const char *p = json_string_value(json_object_get(f, "path"));
			if (!p || !stays_inside(p) || !dataset_path_valid(p))
				abort();
		}
		manifest_digest(doc, digest);
		if (strncmp(digest, "sha256:", 7))
			abort();
	} else if (!eb.msg[0]) {
		abort(); /* a refusal says why */
	}
	json_decref(doc);
	return 0;
}
