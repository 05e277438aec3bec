/* GPU discovery: none, sim:N[:MODEL], and auto through the fake NVML. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "agent/gpu.h"
#include "base/fsutil.h"
#include "base/xalloc.h"

static void test_none(void **state)
{
	(void)state;
	struct gpu_list l;
	struct errbuf eb = ERRBUF_INIT;
	assert_int_equal(gpu_discover("none", "n1", &l, &eb), 0);
	assert_int_equal(l.n, 0);
	gpu_list_release(&l);
}

static void test_sim(void **state)
{
	(void)state;
	struct gpu_list l;
	struct errbuf eb = ERRBUF_INIT;
	assert_int_equal(gpu_discover("sim:3", "n1", &l, &eb), 0);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.gpus[2].model, "SIM-GPU");
	assert_string_equal(l.gpus[2].uuid, "GPU-sim-n1-2");
	assert_int_equal(l.gpus[1].memory, 80ULL << 30);
	gpu_list_release(&l);
	/* islands of 4 */
	assert_int_equal(gpu_discover("sim:8", "n1", &l, &eb), 0);
	assert_int_equal(l.gpus[3].island, 0);
	assert_int_equal(l.gpus[4].island, 4);
	assert_int_equal(l.gpus[7].island, 4);
	gpu_list_release(&l);
	assert_int_equal(gpu_discover("sim:2:SIM-A100", "n2", &l, &eb), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.gpus[0].model, "SIM-A100");
	gpu_list_release(&l);
	assert_int_equal(gpu_discover("sim:x", "n2", &l, &eb), YERR(BAD_REQUEST));
	gpu_list_release(&l);
	assert_int_equal(gpu_discover("lots", "n2", &l, &eb), YERR(BAD_REQUEST));
	gpu_list_release(&l);
}

static void test_fake_nvml(void **state)
{
	(void)state;
	struct gpu_list l;
	struct errbuf eb = ERRBUF_INIT;
	setenv("YARD_NVML_LIBRARY", FAKENVML_PATH, 1);
	setenv("FAKE_NVML_GPUS", "4", 1);
	assert_int_equal(gpu_discover("auto", "n1", &l, &eb), 0);
	assert_int_equal(l.n, 4);
	assert_string_equal(l.gpus[3].model, "FAKE-GPU");
	assert_string_equal(l.gpus[3].uuid, "GPU-fake-3");
	assert_int_equal(l.gpus[3].memory, 16ULL << 30);
	assert_int_equal(gpu_minor(&l, 3), 3);
	/* the fake puts pairs under one PCIe switch */
	assert_int_equal(l.gpus[0].island, 0);
	assert_int_equal(l.gpus[1].island, 0);
	assert_int_equal(l.gpus[2].island, 2);
	assert_int_equal(l.gpus[3].island, 2);
	json_t *j = gpu_list_to_json(&l);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(j, 3), "island")), 2);
	assert_int_equal(json_array_size(j), 4);
	assert_string_equal(json_string_value(json_object_get(json_array_get(j, 1), "uuid")), "GPU-fake-1");
	json_decref(j);
	gpu_list_release(&l);
}

static void test_sampler(void **state)
{
	(void)state;
	struct gpu_sampler *s;
	int util[8];
	setenv("YARD_NVML_LIBRARY", FAKENVML_PATH, 1);
	setenv("FAKE_NVML_GPUS", "4", 1);
	assert_null(gpu_sampler_open("none", "/nonexistent"));
	s = gpu_sampler_open("auto", "/nonexistent");
	assert_non_null(s);
	assert_int_equal(gpu_sampler_util(s, util, 8), 4);
	assert_int_equal(util[0], 0);
	assert_int_equal(util[3], 30);
	assert_int_equal(gpu_sampler_util(s, util, 2), 2);
	assert_int_equal(util[1], 10);
	gpu_sampler_free(s);
	setenv("YARD_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
	assert_null(gpu_sampler_open("auto", "/nonexistent"));
	gpu_sampler_free(NULL);
}

/* Simulated GPUs read WORK/sim-gpu-util: a percentage per GPU, -1 for what
 * it lacks or gives as something else, all -1 without the file. */
static void test_sim_sampler(void **state)
{
	(void)state;
	char dir[] = "/tmp/yard-gpu-XXXXXX";
	int util[8];
	assert_non_null(mkdtemp(dir));
	char *file = xasprintf("%s/sim-gpu-util", dir);
	struct gpu_sampler *s = gpu_sampler_open("sim:4:A100", dir);
	assert_non_null(s);
	assert_int_equal(gpu_sampler_util(s, util, 8), 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(util[i], -1);
	assert_int_equal(write_file_atomic(file, "87 0\n101 x7", 12, 0644), 0);
	assert_int_equal(gpu_sampler_util(s, util, 8), 4);
	assert_int_equal(util[0], 87);
	assert_int_equal(util[1], 0);
	assert_int_equal(util[2], -1);
	assert_int_equal(util[3], -1);
	assert_int_equal(gpu_sampler_util(s, util, 1), 1);
	gpu_sampler_free(s);
	assert_null(gpu_sampler_open("sim:0", dir));
	unlink(file);
	rmdir(dir);
	free(file);
}

static void test_no_nvml(void **state)
{
	(void)state;
	struct gpu_list l;
	struct errbuf eb = ERRBUF_INIT;
	setenv("YARD_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
	assert_int_equal(gpu_discover("auto", "n1", &l, &eb), 0);
	assert_int_equal(l.n, 0);
	gpu_list_release(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_none),
		cmocka_unit_test(test_sim),
		cmocka_unit_test(test_sim_sampler),
		cmocka_unit_test(test_fake_nvml),
		cmocka_unit_test(test_sampler),
		cmocka_unit_test(test_no_nvml),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
