/*
 * The provisioner settings of elastic pools (docs/elastic.md): the
 * provisioner-* and slurm-* options of the master, each checked where it is
 * read (base/conf.h) and built whole into a struct elastic_conf like the
 * other reloadable settings (settings.h), then installed by elastic.h.
 */
#ifndef YARD_MASTER_ELASTIC_CONF_H
#define YARD_MASTER_ELASTIC_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "sched/elastic.h"

struct master_config;
struct provisioner_ops;

/* A shape's labels and strings, owned beside the struct that borrows them. */
struct owned_shape {
	struct elastic_shape s;
	char *model;
	struct sched_label *labels;
	char **keys, **values;
	size_t nlabels;
};

/* One provisioned pool: its provisioner, bounds and declared shape. */
struct elastic_conf_pool {
	char *pool;
	char *provisioner;          /* "KIND:ARG", as given */
	const struct provisioner_ops *ops;
	char *arg;                  /* after "KIND:" */
	unsigned min, max;
	uint64_t idle_ms;
	bool has_shape;
	struct owned_shape shape;
};

/* Defaults of the options (docs/configuration.md). */
#define ELASTIC_DEFAULT_MAX 10
#define ELASTIC_DEFAULT_IDLE_MS (10 * 60 * 1000)
#define ELASTIC_DEFAULT_MAX_PENDING 8
#define ELASTIC_DEFAULT_COOLDOWN_MS (30 * 1000)
#define ELASTIC_DEFAULT_REGISTER_MS (5 * 60 * 1000)
#define ELASTIC_DEFAULT_SLURM_WORK_DIR "/var/tmp/yard-slurm"

/* The provisioner settings (the provisioner-* and slurm-* options), built
 * whole from a master_config like the other reloadable settings
 * (settings.h) and installed at once. */
struct elastic_conf {
	struct elastic_conf_pool *pools; /* owned */
	size_t npools;
	unsigned max_pending;
	uint64_t cooldown_ms, register_ms;
	char *url;                       /* owned or NULL: where new agents reach the master */
	uint64_t slurm_time_ms;          /* 0: the partition's limit */
	char *slurm_account, *slurm_qos; /* owned or NULL */
	char *slurm_work_dir, *slurm_yard; /* owned */
	char **slurm_agent_args;         /* owned */
	size_t nslurm_agent_args;
};

/* elastic_conf_build reads cfg's provisioner options into *out (released
 * with elastic_conf_release, also on error): YERR(BAD_REQUEST) naming the
 * option and the value for a bad value; YERR(CONFLICT) for values that are
 * each good but not together (a bound of a pool without a provisioner, a
 * minimum above the maximum, a pool given twice), which no one line of a
 * file is to blame for. */
int elastic_conf_build(const struct master_config *cfg, struct elastic_conf *out, struct errbuf *eb);
void elastic_conf_release(struct elastic_conf *c);
/* elastic_conf_pool_is: whether c has pool with that provisioner ("KIND:ARG")
 * and bounds (what tests check of a build). */
bool elastic_conf_pool_is(const struct elastic_conf *c, const char *pool, const char *provisioner,
			  unsigned min, unsigned max, uint64_t idle_ms);

/* The checks of one value each (base/conf.h's conf_check_fn). */
int elastic_check_provisioner(const char *what, const char *value, struct errbuf *eb);
int elastic_check_pool_count(const char *what, const char *value, struct errbuf *eb);
int elastic_check_pool_duration(const char *what, const char *value, struct errbuf *eb);
int elastic_check_pool_shape(const char *what, const char *value, struct errbuf *eb);
int elastic_check_count(const char *what, const char *value, struct errbuf *eb);
int elastic_check_duration(const char *what, const char *value, struct errbuf *eb);
int elastic_check_register_timeout(const char *what, const char *value, struct errbuf *eb);
int elastic_check_slurm_time(const char *what, const char *value, struct errbuf *eb);
int elastic_check_slurm_word(const char *what, const char *value, struct errbuf *eb);
int elastic_check_path(const char *what, const char *value, struct errbuf *eb);

/* elastic_conf_pool: c's pool named pool, or NULL. */
struct elastic_conf_pool *elastic_conf_pool(const struct elastic_conf *c, const char *pool);

/* A shape's owned strings: owned_shape_release frees them (o is left
 * empty); owned_shape_add_label adds KEY (its first klen bytes) = value. */
void owned_shape_release(struct owned_shape *o);
void owned_shape_add_label(struct owned_shape *o, const char *key, size_t klen, const char *value);

#endif
