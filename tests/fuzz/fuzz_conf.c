/*
 * libFuzzer target for the daemons' config files (base/conf.h): the input
 * is a file read against the master's option table (first byte even) or
 * the agent's (odd). Every input is read or refused with a message naming
 * the file and the line; what is read applies, and a master's reloadable
 * settings build from it, without error but YERR(CONFLICT): keys each good
 * and not together (master/elastic.h: a bound of a pool that has no
 * provisioner), which no one line is to blame for.
 *
 *   CC=clang meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false
 *   ninja -C build-fuzz tests/fuzz/fuzz_conf
 *   build-fuzz/tests/fuzz/fuzz_conf tests/fuzz/corpus/conf -max_total_time=60
 */
#include "base/compat.h"

#include "agent/agent.h"
#include "base/conf.h"
#include "master/master.h"
#include "master/settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct errbuf eb = ERRBUF_INIT;
	bool master = !size || !(data[0] & 1);
	const struct conf_option *opts;
	struct conf c;
	size_t n;

	opts = master ? master_conf_options(&n) : agent_conf_options(&n);
	conf_init(&c, master ? "master" : "agent", opts, n);
	if (size && conf_parse_file(&c, (const char *)data + 1, size - 1, "fuzz.conf", &eb) == 0) {
		if (master) {
			struct master_config cfg = { 0 };
			struct master_settings s = { 0 };
			/* data-dir may be missing (a required key): that is the one refusal */
			if (conf_apply(&c, &cfg, &eb) == 0 && settings_build(&cfg, &s, &eb) != 0 &&
			    eb.code != YERR(CONFLICT)) {
				fprintf(stderr, "checked keys failed to build: %s\n", eb.msg);
				abort();
			}
			settings_release(&s);
		} else {
			struct agent_options o = { 0 };
			conf_apply(&c, &o, &eb);
		}
	} else if (size && strncmp(eb.msg, "'fuzz.conf' line ", 17)) {
		fprintf(stderr, "a refusal that names no line: %s\n", eb.msg);
		abort();
	}
	conf_release(&c);
	return 0;
}
