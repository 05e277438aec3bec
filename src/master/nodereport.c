#include "base/compat.h"
#include "master/nodereport.h"

#include <limits.h>

#include "base/utf8.h"
#include "base/xalloc.h"
#include "common/spec.h"

/* What an agent may say its container engine is: "Docker 20.10.24",
 * "Podman Engine 4.3.1"; shown as it is, so bounded and printable. */
#define MAX_ENGINE 128

uint64_t nodereport_u64(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	if (json_is_integer(v) && json_integer_value(v) > 0)
		return (uint64_t)json_integer_value(v);
	/* a real past 2^64 has no uint64_t: 0, as for any other bad value */
	if (json_is_real(v) && json_real_value(v) > 0 && json_real_value(v) < 0x1p64)
		return (uint64_t)json_real_value(v);
	return 0;
}

bool nodereport_printable(const json_t *v, size_t max)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);

	if (!s || !n || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

#define MAX_CACHE_KEYS 4096

void nodereport_set_cache(struct node *n, const json_t *cache)
{
	const json_t *c;
	size_t i;

	if (!json_is_array(cache) || json_array_size(cache) > MAX_CACHE_KEYS)
		return;
	json_array_foreach(cache, i, c)
		if (!nodereport_printable(c, 80))
			return;
	for (i = 0; i < n->ncache; i++)
		free(n->cache[i]);
	free(n->cache);
	n->ncache = json_array_size(cache);
	n->cache = xcalloc(n->ncache + 1, sizeof(*n->cache));
	json_array_foreach(cache, i, c)
		n->cache[i] = xstrdup(json_string_value(c));
}

int nodereport_check_registration(const json_t *body, unsigned *runtimes, json_int_t *port_lo,
				  json_int_t *port_hi, struct errbuf *eb)
{
	const char *name = json_string_value(json_object_get(body, "name"));
	const json_t *gpus = json_object_get(body, "gpus"), *tasks = json_object_get(body, "tasks");
	const json_t *cpus = json_object_get(body, "cpus");
	const json_t *ports = json_object_get(body, "ports");
	const char *iface = json_string_value(json_object_get(body, "iface"));
	const json_t *pool = json_object_get(body, "pool"), *labels = json_object_get(body, "labels");
	const json_t *engine = json_object_get(body, "engine");
	const json_t *ephemeral = json_object_get(body, "ephemeral"), *slurm_job = json_object_get(body, "slurm_job");
	size_t i;
	json_t *g;
	int ret;

	if (!json_is_object(body))
		return error(eb, YERR(BAD_REQUEST), "request body: expected a JSON object");
	if (!spec_name_valid(name))
		return error_field(eb, YERR(BAD_REQUEST), "name",
				   "name: expected [a-z0-9][a-z0-9_.-]{0,62}");
	if (gpus && !json_is_array(gpus))
		return error_field(eb, YERR(BAD_REQUEST), "gpus", "gpus: expected an array");
	if (json_array_size(gpus) > 256)
		return error_field(eb, YERR(BAD_REQUEST), "gpus", "gpus: at most 256");
	if (tasks && !json_is_array(tasks))
		return error_field(eb, YERR(BAD_REQUEST), "tasks", "tasks: expected an array");
	if (ports) {
		*port_lo = json_integer_value(json_array_get(ports, 0));
		*port_hi = json_integer_value(json_array_get(ports, 1));
		if (!json_is_array(ports) || json_array_size(ports) != 2 || *port_lo < 1024 ||
		    *port_hi > 65535 || *port_lo > *port_hi)
			return error_field(eb, YERR(BAD_REQUEST), "ports",
					   "ports: expected [LOW, HIGH] with 1024 <= LOW <= HIGH <= 65535");
	}
	/* a number that a cast to an unsigned count could not hold is refused
	 * here, not turned into undefined behaviour below */
	if (cpus && (!json_is_number(cpus) || !(json_number_value(cpus) >= 0) ||
		     json_number_value(cpus) > 1e6))
		return error_field(eb, YERR(BAD_REQUEST), "cpus",
				   "cpus: expected a number of CPUs from 0 to 1000000");
	if (iface && (!*iface || strlen(iface) > 15 || strspn(iface, "abcdefghijklmnopqrstuvwxyz"
				"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-@") != strlen(iface)))
		return error_field(eb, YERR(BAD_REQUEST), "iface",
				   "iface: expected an interface name of at most 15 characters");
	json_array_foreach(gpus, i, g) {
		const json_t *isl = json_object_get(g, "island");
		if (!json_is_object(g) || !json_is_integer(json_object_get(g, "index")) ||
		    json_integer_value(json_object_get(g, "index")) < 0)
			return error_field(eb, YERR(BAD_REQUEST), "gpus",
					   "gpus: each entry needs an integer index >= 0");
		if (isl && !json_is_null(isl) &&
		    (!json_is_integer(isl) || json_integer_value(isl) < 0 ||
		     json_integer_value(isl) > INT_MAX))
			return error_field(eb, YERR(BAD_REQUEST), "gpus",
					   "gpus: island must be an integer >= 0");
	}
	if (pool && !json_is_null(pool) && !spec_name_valid(json_string_value(pool)))
		return error_field(eb, YERR(BAD_REQUEST), "pool",
				   "pool: expected [a-z0-9][a-z0-9_.-]{0,62}");
	if (labels && !json_is_null(labels)) {
		const char *key;
		json_t *v;
		if (!json_is_object(labels) || json_object_size(labels) > SPEC_MAX_LABELS)
			return error_field(eb, YERR(BAD_REQUEST), "labels",
					   "labels: expected an object of at most %d KEY: VALUE",
					   SPEC_MAX_LABELS);
		json_object_foreach((json_t *)labels, key, v)
			if (!json_is_string(v) || !spec_label_valid(key, json_string_value(v)))
				return error_field(eb, YERR(BAD_REQUEST), "labels",
						   "labels: '%s' is not a valid label", key);
	}
	ret = core_runtimes_from_json(json_object_get(body, "runtimes"), runtimes, eb);
	if (ret)
		return ret;
	if (engine && !json_is_null(engine) && !nodereport_printable(engine, MAX_ENGINE))
		return error_field(eb, YERR(BAD_REQUEST), "engine",
				   "engine: expected a string of 1 to %d printable characters",
				   MAX_ENGINE);
	if (ephemeral && !json_is_boolean(ephemeral))
		return error_field(eb, YERR(BAD_REQUEST), "ephemeral", "ephemeral: expected true or false");
	if (slurm_job && !json_is_null(slurm_job) &&
	    (!json_is_string(slurm_job) || !json_string_length(slurm_job) || json_string_length(slurm_job) > 40 ||
	     strspn(json_string_value(slurm_job), "0123456789_+") != json_string_length(slurm_job)))
		return error_field(eb, YERR(BAD_REQUEST), "slurm_job",
				   "slurm_job: expected a Slurm job id such as 4411 or 4411_0");
	return 0;
}

/* The text of a reported string, as the master keeps it (escaped as every
 * text from a request). */
static char *dup_or_null(const char *s)
{
	return s ? utf8_escape_dup(s) : NULL;
}

void nodereport_set_gpus(struct node *n, const json_t *gpus)
{
	const json_t *g;
	size_t i;

	for (size_t k = 0; k < n->ngpus; k++) {
		free(n->gpus[k].model);
		free(n->gpus[k].uuid);
	}
	free(n->gpus);
	n->ngpus = json_array_size(gpus);
	n->gpus = xcalloc(n->ngpus + 1, sizeof(*n->gpus));
	json_array_foreach(gpus, i, g) {
		n->gpus[i].index = (unsigned)json_integer_value(json_object_get(g, "index"));
		n->gpus[i].model = dup_or_null(json_string_value(json_object_get(g, "model")));
		n->gpus[i].uuid = dup_or_null(json_string_value(json_object_get(g, "uuid")));
		n->gpus[i].memory = nodereport_u64(g, "memory");
		n->gpus[i].island = json_is_integer(json_object_get(g, "island"))
					    ? (unsigned)json_integer_value(json_object_get(g, "island"))
					    : n->gpus[i].index;
	}
}

bool nodereport_set_util(struct node *n, const json_t *gpus)
{
	const json_t *g;
	size_t i;

	json_array_foreach(gpus, i, g) {
		const json_t *idx = json_object_get(g, "index"), *u = json_object_get(g, "util");
		for (size_t k = 0; json_is_integer(idx) && k < n->ngpus; k++) {
			if ((json_int_t)n->gpus[k].index != json_integer_value(idx))
				continue;
			n->gpus[k].has_util = json_is_integer(u) && json_integer_value(u) >= 0 &&
					      json_integer_value(u) <= 100;
			n->gpus[k].util = n->gpus[k].has_util ? (unsigned)json_integer_value(u) : 0;
		}
	}
	return json_array_size(gpus) > 0;
}

