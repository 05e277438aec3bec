/*
 * libFuzzer target for the job spec (src/common/spec.h), which the master
 * takes from every user in POST /v1/jobs and the CLI reads from files: YAML
 * or JSON text -> document -> validated spec -> canonical form. Whatever the
 * text, each step either succeeds or refuses with a message, and a spec that
 * validates round-trips: its canonical form validates to an equal form.
 *
 *   CC=clang meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false
 *   ninja -C build-fuzz tests/fuzz/fuzz_spec
 *   build-fuzz/tests/fuzz/fuzz_spec tests/fuzz/corpus/spec -max_total_time=60
 */
#include "base/compat.h"
#include "common/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct errbuf eb = ERRBUF_INIT;
	struct job_spec spec, again;
	json_t *doc = NULL;

	memset(&spec, 0, sizeof(spec));
	memset(&again, 0, sizeof(again));
	if (spec_load_text((const char *)data, size, &doc, &eb)) {
		if (!eb.msg[0])
			abort(); /* a refusal says why */
		return 0;
	}
	/* an override as the CLI's --set takes it, from the text's first line */
	const char *nl = memchr(data, '\n', size);
	size_t n = nl ? (size_t)(nl - (const char *)data) : size;
	if (n < 200) {
		char set[201];
		memcpy(set, data, n);
		set[n] = '\0';
		if (!memchr(set, '\0', n) && strchr(set, '='))
			spec_set(doc, set, &eb);
	}
	errbuf_reset(&eb);
	if (spec_from_json(doc, &spec, &eb) == 0) {
		json_t *canon = spec_to_json(&spec);
		if (spec_from_json(canon, &again, &eb))
			abort(); /* the canonical form of a valid spec is valid */
		json_t *canon2 = spec_to_json(&again);
		if (!json_equal(canon, canon2))
			abort();
		json_decref(canon);
		json_decref(canon2);
	} else if (!eb.msg[0]) {
		abort();
	}
	spec_release(&spec);
	spec_release(&again);
	json_decref(doc);
	return 0;
}
