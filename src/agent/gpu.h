/*
 * GPU discovery. "none": no GPUs. "sim:N[:MODEL]": N simulated GPUs (model
 * "SIM-GPU" by default, 80 GiB, uuid GPU-sim-NODE-i, islands of 4: GPUs 0-3
 * are island 0, 4-7 island 1...). "auto": NVML, loaded with
 * dlopen("libnvidia-ml.so.1") or the path in YARD_NVML_LIBRARY; on a host
 * without NVML, auto means none (said on stderr).
 *
 * Islands are the groups of GPUs that talk fastest to each other, for the
 * scheduler to keep a job's GPUs together. With NVML, GPU i joins the island
 * of the first GPU before it that it reaches over NVLink
 * (nvmlDeviceGetP2PStatus, NVLINK) or under a common PCIe switch
 * (nvmlDeviceGetTopologyCommonAncestor at most NVML_TOPOLOGY_MULTIPLE);
 * otherwise it starts an island of its own. An NVML without these functions
 * gives every GPU its own island.
 */
#ifndef YARD_AGENT_GPU_H
#define YARD_AGENT_GPU_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

struct gpu_info {
	int index;
	char model[96];
	uint64_t memory;   /* bytes */
	char uuid[96];
	int minor;         /* the device node is DEV_DIR/nvidia<minor> */
	int island;        /* island id, the index of the island's first GPU */
};

struct gpu_list {
	struct gpu_info *gpus; /* owned */
	size_t n;
};

/* gpu_discover fills out (which the caller releases, also on error) for
 * spec; node names the simulated uuids. YERR(BAD_REQUEST) for a bad spec,
 * YERR(IO) when NVML is there but fails. */
int gpu_discover(const char *spec, const char *node, struct gpu_list *out, struct errbuf *eb);
void gpu_list_release(struct gpu_list *l);
/* gpu_list_to_json: [{"index", "model", "memory", "uuid", "island"}] (new reference). */
json_t *gpu_list_to_json(const struct gpu_list *l);
/* gpu_minor: the device minor of GPU index, or index itself when unknown. */
int gpu_minor(const struct gpu_list *l, int index);

/* A GPU utilisation sampler (a table of ops: NVML kept open for the agent's
 * life, or simulated GPUs' file), for the status reports (the master's GET
 * /v1/nodes shows it per GPU; jobs keep a series of it, master/gpuidle.h). */
struct gpu_sampler;

/* gpu_sampler_open returns a sampler for spec "auto" when NVML loads, has
 * nvmlDeviceGetUtilizationRates and initialises; for "sim:N..." one that
 * reads WORK/sim-gpu-util (work_dir's: "87 0 12 ...", a percentage per GPU,
 * which a test writes; no file: not known); NULL otherwise ("none", no
 * NVML: there is nothing to sample). Freed with gpu_sampler_free. */
struct gpu_sampler *gpu_sampler_open(const char *spec, const char *work_dir);
/* gpu_sampler_util fills util[i] with GPU i's utilisation over NVML's last
 * sample period (0-100), or -1 where NVML cannot tell, for the first
 * min(max, GPUs) GPUs; returns how many it filled. */
size_t gpu_sampler_util(struct gpu_sampler *s, int *util, size_t max);
void gpu_sampler_free(struct gpu_sampler *s);

#endif
