/*
 * A fake libnvidia-ml.so.1 for tests: FAKE_NVML_GPUS (env) devices named
 * "FAKE-GPU", 16 GiB each, uuid GPU-fake-I, minor number I. Pairs of GPUs
 * (0-1, 2-3, ...) share a PCIe switch (nvmlDeviceGetTopologyCommonAncestor
 * says SINGLE, else SYSTEM); there is no NVLink (no nvmlDeviceGetP2PStatus).
 * GPU I is (I * 10) % 101 percent busy (nvmlDeviceGetUtilizationRates).
 */
#include "base/compat.h"

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
	unsigned int gpu, memory;
} nvmlUtilization_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_UNINITIALIZED 1

/* The exported API, declared here so -Wmissing-prototypes holds. */
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int len);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t dev, unsigned int *minor);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u);
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *level);

static int inited;

static unsigned int fake_count(void)
{
	const char *s = getenv("FAKE_NVML_GPUS");
	unsigned int n = 0;
	for (; s && *s >= '0' && *s <= '9' && n < 1000; s++)
		n = n * 10 + (unsigned)(*s - '0');
	return n;
}

/* A handle is index + 1 cast to a pointer. */
static int dev_index(nvmlDevice_t dev)
{
	uintptr_t v = (uintptr_t)dev;
	return v >= 1 && v <= fake_count() ? (int)(v - 1) : -1;
}

nvmlReturn_t nvmlInit_v2(void)
{
	inited = 1;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
	inited = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	*count = fake_count();
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (index >= fake_count())
		return NVML_ERROR_INVALID_ARGUMENT;
	*dev = (nvmlDevice_t)(uintptr_t)(index + 1);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len)
{
	if (dev_index(dev) < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	snprintf(name, len, "FAKE-GPU");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int len)
{
	int i = dev_index(dev);
	if (i < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	snprintf(uuid, len, "GPU-fake-%d", i);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem)
{
	if (dev_index(dev) < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	mem->total = 16ULL << 30;
	mem->free = mem->total;
	mem->used = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t dev, unsigned int *minor)
{
	int i = dev_index(dev);
	if (i < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	*minor = (unsigned int)i;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u)
{
	if (dev_index(dev) < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	u->gpu = (unsigned int)(dev_index(dev) * 10 % 101);
	u->memory = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *level)
{
	int i = dev_index(a), k = dev_index(b);
	if (i < 0 || k < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	*level = i == k ? 0 : i / 2 == k / 2 ? 10 : 50; /* INTERNAL, SINGLE, SYSTEM */
	return NVML_SUCCESS;
}
