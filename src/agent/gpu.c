#include "base/compat.h"
#include "agent/gpu.h"

#include <dlfcn.h>

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

#define SIM_MEMORY (80ULL << 30)
#define SIM_ISLAND 4
#define NVML_SUCCESS 0
#define NVML_P2P_CAPS_INDEX_NVLINK 2
#define NVML_P2P_STATUS_OK 0
#define NVML_TOPOLOGY_MULTIPLE 20

/* The few NVML prototypes the agent needs (nvml.h is not a dependency). */
typedef int nvml_return;
typedef void *nvml_device;
struct nvml_memory {
	unsigned long long total, free, used;
};

struct nvml_utilization {
	unsigned int gpu, memory; /* percent of the last sample period */
};

struct nvml {
	void *lib;
	nvml_return (*init)(void);
	nvml_return (*shutdown)(void);
	nvml_return (*count)(unsigned int *);
	nvml_return (*by_index)(unsigned int, nvml_device *);
	nvml_return (*name)(nvml_device, char *, unsigned int);
	nvml_return (*uuid)(nvml_device, char *, unsigned int);
	nvml_return (*memory)(nvml_device, struct nvml_memory *);
	nvml_return (*minor)(nvml_device, unsigned int *);
	/* optional: islands */
	nvml_return (*p2p)(nvml_device, nvml_device, int, int *);
	nvml_return (*ancestor)(nvml_device, nvml_device, int *);
	/* the sampler's */
	nvml_return (*utilization)(nvml_device, struct nvml_utilization *);
};

static void *nvml_load(void)
{
	const char *path = getenv("YARD_NVML_LIBRARY");

	return dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
}

void gpu_list_release(struct gpu_list *l)
{
	free(l->gpus);
	l->gpus = NULL;
	l->n = 0;
}

static int discover_sim(const char *arg, const char *node, struct gpu_list *out, struct errbuf *eb)
{
	const char *p = arg;
	uint64_t n;
	if (parse_u64(&p, &n) < 0 || n > 1024 || (*p && *p != ':') || (*p == ':' && !p[1]))
		return error(eb, YERR(BAD_REQUEST), "bad --gpus 'sim:%s': expected sim:N or sim:N:MODEL", arg);
	const char *model = *p == ':' ? p + 1 : "SIM-GPU";
	out->gpus = xcalloc(n ? n : 1, sizeof(*out->gpus));
	out->n = n;
	for (size_t i = 0; i < n; i++) {
		struct gpu_info *g = &out->gpus[i];
		g->index = (int)i;
		g->minor = (int)i;
		g->island = (int)(i / SIM_ISLAND * SIM_ISLAND);
		g->memory = SIM_MEMORY;
		snprintf(g->model, sizeof(g->model), "%s", model);
		snprintf(g->uuid, sizeof(g->uuid), "GPU-sim-%s-%zu", node, i);
	}
	return 0;
}

static void *sym(struct nvml *nv, const char *name, int *missing)
{
	void *f = dlsym(nv->lib, name);
	if (!f)
		*missing = 1;
	return f;
}

/* Whether GPUs a and b share an island (see gpu.h). */
static bool nvml_near(const struct nvml *nv, nvml_device a, nvml_device b)
{
	int v;

	if (nv->p2p && nv->p2p(a, b, NVML_P2P_CAPS_INDEX_NVLINK, &v) == NVML_SUCCESS &&
	    v == NVML_P2P_STATUS_OK)
		return true;
	return nv->ancestor && nv->ancestor(a, b, &v) == NVML_SUCCESS &&
	       v <= NVML_TOPOLOGY_MULTIPLE;
}

static int discover_nvml(struct gpu_list *out, struct errbuf *eb)
{
	struct nvml nv = { 0 };
	int missing = 0, ret = 0;
	unsigned int count = 0;
	nvml_device *devs = NULL;

	nv.lib = nvml_load();
	if (!nv.lib) {
		fprintf(stderr, "yard agent: no NVML (%s): no GPUs\n", dlerror());
		return 0;
	}
	*(void **)&nv.init = sym(&nv, "nvmlInit_v2", &missing);
	*(void **)&nv.shutdown = sym(&nv, "nvmlShutdown", &missing);
	*(void **)&nv.count = sym(&nv, "nvmlDeviceGetCount_v2", &missing);
	*(void **)&nv.by_index = sym(&nv, "nvmlDeviceGetHandleByIndex_v2", &missing);
	*(void **)&nv.name = sym(&nv, "nvmlDeviceGetName", &missing);
	*(void **)&nv.uuid = sym(&nv, "nvmlDeviceGetUUID", &missing);
	*(void **)&nv.memory = sym(&nv, "nvmlDeviceGetMemoryInfo", &missing);
	*(void **)&nv.minor = sym(&nv, "nvmlDeviceGetMinorNumber", &missing);
	*(void **)&nv.p2p = dlsym(nv.lib, "nvmlDeviceGetP2PStatus");
	*(void **)&nv.ancestor = dlsym(nv.lib, "nvmlDeviceGetTopologyCommonAncestor");
	if (missing) {
		ret = error(eb, YERR(IO), "NVML library lacks a needed function");
		goto out_close;
	}
	if (nv.init() != NVML_SUCCESS) {
		ret = error(eb, YERR(IO), "nvmlInit_v2 failed");
		goto out_close;
	}
	if (nv.count(&count) != NVML_SUCCESS) {
		ret = error(eb, YERR(IO), "nvmlDeviceGetCount_v2 failed");
		goto out_shutdown;
	}
	out->gpus = xcalloc(count ? count : 1, sizeof(*out->gpus));
	devs = xcalloc(count ? count : 1, sizeof(*devs));
	for (unsigned int i = 0; i < count; i++) {
		struct gpu_info *g = &out->gpus[i];
		nvml_device dev;
		struct nvml_memory mem = { 0 };
		unsigned int minor = i;
		if (nv.by_index(i, &dev) != NVML_SUCCESS) {
			ret = error(eb, YERR(IO), "nvmlDeviceGetHandleByIndex_v2 failed for GPU %u", i);
			goto out_shutdown;
		}
		g->index = (int)i;
		if (nv.name(dev, g->model, sizeof(g->model)) != NVML_SUCCESS)
			snprintf(g->model, sizeof(g->model), "unknown");
		if (nv.uuid(dev, g->uuid, sizeof(g->uuid)) != NVML_SUCCESS)
			g->uuid[0] = '\0';
		if (nv.memory(dev, &mem) == NVML_SUCCESS)
			g->memory = mem.total;
		if (nv.minor(dev, &minor) != NVML_SUCCESS)
			minor = i;
		g->minor = (int)minor;
		devs[i] = dev;
		g->island = (int)i;
		for (unsigned int k = 0; k < i; k++)
			if (nvml_near(&nv, devs[k], dev)) {
				g->island = out->gpus[k].island;
				break;
			}
		out->n++;
	}
out_shutdown:
	free(devs);
	nv.shutdown();
out_close:
	dlclose(nv.lib);
	return ret;
}

int gpu_discover(const char *spec, const char *node, struct gpu_list *out, struct errbuf *eb)
{
	out->gpus = NULL;
	out->n = 0;
	if (!spec || !strcmp(spec, "none"))
		return 0;
	if (!strncmp(spec, "sim:", 4))
		return discover_sim(spec + 4, node, out, eb);
	if (!strcmp(spec, "auto"))
		return discover_nvml(out, eb);
	return error(eb, YERR(BAD_REQUEST), "bad --gpus '%s': expected auto, none or sim:N[:MODEL]", spec);
}

json_t *gpu_list_to_json(const struct gpu_list *l)
{
	json_t *a = json_array();
	for (size_t i = 0; i < l->n; i++)
		json_array_append_new(a, json_pack("{s:i, s:s, s:I, s:s, s:i}", "index", l->gpus[i].index,
						   "model", l->gpus[i].model,
						   "memory", (json_int_t)l->gpus[i].memory,
						   "uuid", l->gpus[i].uuid, "island", l->gpus[i].island));
	return a;
}

int gpu_minor(const struct gpu_list *l, int index)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->gpus[i].index == index)
			return l->gpus[i].minor;
	return index;
}

/* A sampler backend: NVML's, or the simulated GPUs' file. */
struct gpu_sampler_ops {
	size_t (*util)(struct gpu_sampler *s, int *util, size_t max);
	void (*free)(struct gpu_sampler *s);
};

struct gpu_sampler {
	const struct gpu_sampler_ops *ops;
	struct nvml nv;         /* nvml: initialised; shut down by its free */
	char *file;             /* sim: owned, WORK/sim-gpu-util */
	size_t n;               /* sim: its GPUs */
};

static size_t nvml_util(struct gpu_sampler *s, int *util, size_t max)
{
	unsigned int count = 0;
	size_t n;

	if (s->nv.count(&count) != NVML_SUCCESS)
		return 0;
	n = count < max ? count : max;
	for (size_t i = 0; i < n; i++) {
		nvml_device dev;
		struct nvml_utilization u;
		util[i] = -1;
		if (s->nv.by_index((unsigned int)i, &dev) == NVML_SUCCESS &&
		    s->nv.utilization(dev, &u) == NVML_SUCCESS && u.gpu <= 100)
			util[i] = (int)u.gpu;
	}
	return n;
}

static void nvml_free(struct gpu_sampler *s)
{
	s->nv.shutdown();
	dlclose(s->nv.lib);
}

static const struct gpu_sampler_ops nvml_sampler = { nvml_util, nvml_free };

/* Simulated GPUs take what the file says: a percentage per GPU, in index
 * order, separated by white space; -1 for a GPU it does not reach, or
 * one it gives as something else. */
static size_t sim_util(struct gpu_sampler *s, int *util, size_t max)
{
	struct strbuf sb = STRBUF_INIT;
	size_t n = s->n < max ? s->n : max;
	const char *p;

	for (size_t i = 0; i < n; i++)
		util[i] = -1;
	if (strbuf_read_file(&sb, s->file, 1 << 16) == 0) {
		p = sb.buf;
		for (size_t i = 0; i < n; i++) {
			uint64_t v;
			p += strspn(p, " \t\r\n");
			if (!*p)
				break;
			if (parse_u64(&p, &v) == 0 && v <= 100 && (!*p || strchr(" \t\r\n", *p)))
				util[i] = (int)v;
			p += strcspn(p, " \t\r\n");
		}
	}
	strbuf_release(&sb);
	return n;
}

static void sim_free(struct gpu_sampler *s)
{
	free(s->file);
}

static const struct gpu_sampler_ops sim_sampler = { sim_util, sim_free };

struct gpu_sampler *gpu_sampler_open(const char *spec, const char *work_dir)
{
	struct gpu_sampler *s;
	int missing = 0;
	uint64_t n;
	const char *p;

	if (spec && !strncmp(spec, "sim:", 4)) {
		p = spec + 4;
		if (parse_u64(&p, &n) || !n)
			return NULL;
		s = xcalloc(1, sizeof(*s));
		s->ops = &sim_sampler;
		s->file = xasprintf("%s/sim-gpu-util", work_dir);
		s->n = (size_t)n;
		return s;
	}
	if (!spec || strcmp(spec, "auto"))
		return NULL;
	s = xcalloc(1, sizeof(*s));
	s->ops = &nvml_sampler;
	s->nv.lib = nvml_load();
	if (!s->nv.lib)
		goto out_free;
	*(void **)&s->nv.init = sym(&s->nv, "nvmlInit_v2", &missing);
	*(void **)&s->nv.shutdown = sym(&s->nv, "nvmlShutdown", &missing);
	*(void **)&s->nv.count = sym(&s->nv, "nvmlDeviceGetCount_v2", &missing);
	*(void **)&s->nv.by_index = sym(&s->nv, "nvmlDeviceGetHandleByIndex_v2", &missing);
	*(void **)&s->nv.utilization = sym(&s->nv, "nvmlDeviceGetUtilizationRates", &missing);
	if (missing || s->nv.init() != NVML_SUCCESS)
		goto out_close;
	return s;
out_close:
	dlclose(s->nv.lib);
out_free:
	free(s);
	return NULL;
}

size_t gpu_sampler_util(struct gpu_sampler *s, int *util, size_t max)
{
	return s->ops->util(s, util, max);
}

void gpu_sampler_free(struct gpu_sampler *s)
{
	if (!s)
		return;
	s->ops->free(s);
	free(s);
}
