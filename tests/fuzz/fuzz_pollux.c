/*
 * libFuzzer target for the Pollux profile reader of `yard sim --format
 * pollux` (src/sim/pollux.h), which reads CSV files from outside. The first
 * input byte picks the file of application "app" that gets the rest of the
 * input (placements.csv, scalability.csv or validation-32.csv; the other
 * two hold a small valid profile); the second and third bytes, when the
 * profile reads, a GPU count and a batch size for pollux_duration(). Every
 * input is read or refused with a message; a duration is finite and >= 0.
 *
 *   ninja -C build-fuzz tests/fuzz/fuzz_pollux   (see fuzz_trace.c)
 *   build-fuzz/tests/fuzz/fuzz_pollux tests/fuzz/corpus/pollux -max_total_time=60
 */
#include "base/compat.h"
#include "sim/pollux.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/yard-fuzz-pollux-XXXXXX";

static void put(const char *name, const void *text, size_t len)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/app/%s", dir, name);
	if (!(f = fopen(path, "w")) || fwrite(text, 1, len, f) != len || fclose(f))
		abort();
}

static const char *const files[] = { "placements.csv", "scalability.csv", "validation-32.csv" };

/* at exit: the profile directory goes */
static void cleanup(void)
{
	char path[128];

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/app/%s", dir, files[i]);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/app", dir);
	rmdir(path);
	rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const good[] = {
		"placement,local_bsz,step_time,sync_time\n1,16,1.0,0.0\n1,32,2.0,0.1\n2,16,0.6,0.1\n",
		"num_nodes,num_replicas,local_bsz,step_time,sync_time\n2,4,16,1.5,0.5\n",
		"progress,iteration,grad_sqr,grad_var\n10,20,1,1\n20,40,1,2\n",
	};
	struct pollux_profiles p;
	const struct pollux_app *app;
	struct errbuf eb = ERRBUF_INIT;
	size_t which;

	if (size < 3)
		return 0;
	if (dir[sizeof(dir) - 2] == 'X') { /* once per process */
		char sub[128];
		if (!mkdtemp(dir))
			abort();
		snprintf(sub, sizeof(sub), "%s/app", dir);
		if (mkdir(sub, 0700) < 0)
			abort();
		atexit(cleanup);
	}
	which = data[0] % 3;
	for (size_t i = 0; i < 3; i++)
		if (i == which)
			put(files[i], data + 3, size - 3);
		else
			put(files[i], good[i], strlen(good[i]));
	pollux_profiles_init(&p, dir);
	if (pollux_profiles_app(&p, "app", &app, &eb) == 0) {
		struct pollux_run r;
		if (pollux_duration(app, 1u + data[1] % 8, 2, 1u + data[2], &r, &eb) == 0) {
			if (!isfinite(r.seconds) || r.seconds < 0 || !isfinite(r.progress_seconds))
				abort();
		} else if (!eb.msg[0]) {
			abort();
		}
	} else if (!eb.msg[0]) {
		abort();
	}
	pollux_profiles_release(&p);
	return 0;
}
