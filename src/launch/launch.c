/* The framework launchers (launch.h): one table row per framework. */
#include "base/compat.h"
#include "launch/launch.h"

#include "base/strbuf.h"
#include "base/xalloc.h"

struct framework {
	const char *name;
	bool port;              /* every task gets a port */
	bool ifname;            /* GLOO/NCCL_SOCKET_IFNAME */
	int (*validate)(const struct job_spec *spec, struct errbuf *eb);
	bool (*decides)(const struct job_spec *spec, const char *role, unsigned index);
	int (*fill)(const struct launch_job *job, size_t i, char ***argv, json_t *env,
		    struct errbuf *eb);
};

/* ---- helpers ---- */

static void set_env(json_t *env, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_env(json_t *env, const char *key, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	json_object_set_new(env, key, json_string(sb.buf));
	strbuf_release(&sb);
}

static const struct spec_role *find_role(const struct job_spec *spec, const char *name)
{
	for (size_t i = 0; i < spec->nroles; i++)
		if (!strcmp(spec->roles[i].name, name))
			return &spec->roles[i];
	return NULL;
}

static const char *task_addr(const struct launch_job *job, size_t i)
{
	return job->nodes[job->tasks[i].node].addr;
}

/* Whether task i is the job's first (lowest-ranked) task on its node. */
static bool first_on_node(const struct launch_job *job, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (job->tasks[k].node == job->tasks[i].node)
			return false;
	return true;
}

/* Nodes are ranked by the rank of their first task. */
static size_t node_rank(const struct launch_job *job, size_t node)
{
	size_t rank = 0;
	for (size_t i = 0; i < job->ntasks; i++) {
		if (!first_on_node(job, i))
			continue;
		if (job->tasks[i].node == node)
			return rank;
		rank++;
	}
	return rank;
}

static int need_addrs(const struct launch_job *job, struct errbuf *eb)
{
	for (size_t i = 0; i < job->ntasks; i++) {
		const struct launch_node *n = &job->nodes[job->tasks[i].node];
		if (!n->addr || !*n->addr)
			return error(eb, YERR(BAD_REQUEST), "node '%s' has no advertised address",
				     n->name ? n->name : "?");
	}
	return 0;
}

static int need_ports(const struct launch_job *job, struct errbuf *eb)
{
	for (size_t i = 0; i < job->ntasks; i++)
		if (!job->tasks[i].port)
			return error(eb, YERR(BAD_REQUEST), "%s/%u has no port", job->tasks[i].role,
				     job->tasks[i].index);
	return need_addrs(job, eb);
}

static int bad_role(struct errbuf *eb, const char *framework, const char *role, const char *allowed)
{
	char field[80];
	snprintf(field, sizeof(field), "tasks.%s", role);
	return error_field(eb, YERR(INVALID_SPEC), field,
			   "tasks.%s: %s jobs have no role '%s' (roles: %s)", role, framework, role,
			   allowed);
}

static int bad_replicas(struct errbuf *eb, const char *role, const char *why)
{
	char field[80];
	snprintf(field, sizeof(field), "tasks.%s.replicas", role);
	return error_field(eb, YERR(INVALID_SPEC), field, "tasks.%s.replicas: %s", role, why);
}

static bool decides_all(const struct job_spec *spec, const char *role, unsigned index)
{
	return true;
}

static int validate_any(const struct job_spec *spec, struct errbuf *eb)
{
	return 0;
}

/* ---- command ---- */

static int fill_none(const struct launch_job *job, size_t i, char ***argv, json_t *env,
		     struct errbuf *eb)
{
	return 0;
}

/* ---- pytorch ---- */

static int fill_pytorch(const struct launch_job *job, size_t i, char ***argv, json_t *env,
			struct errbuf *eb)
{
	const struct launch_task *t = &job->tasks[i];
	size_t local_rank = 0, local_size = 0;
	int ret;

	if ((ret = need_ports(job, eb)))
		return ret;
	for (size_t k = 0; k < job->ntasks; k++) {
		if (job->tasks[k].node != t->node)
			continue;
		local_size++;
		if (k < i)
			local_rank++;
	}
	set_env(env, "MASTER_ADDR", "%s", task_addr(job, 0));
	set_env(env, "MASTER_PORT", "%u", job->tasks[0].port);
	set_env(env, "WORLD_SIZE", "%zu", job->ntasks);
	set_env(env, "RANK", "%zu", i);
	set_env(env, "LOCAL_RANK", "%zu", local_rank);
	set_env(env, "LOCAL_WORLD_SIZE", "%zu", local_size);
	set_env(env, "NODE_RANK", "%zu", node_rank(job, t->node));
	set_env(env, "PET_NNODES", "%zu", job->ntasks);
	set_env(env, "PET_NODE_RANK", "%zu", i);
	set_env(env, "PET_MASTER_ADDR", "%s", task_addr(job, 0));
	set_env(env, "PET_MASTER_PORT", "%u", job->tasks[0].port);
	set_env(env, "PET_NPROC_PER_NODE", "%u", t->ngpus ? t->ngpus : 1);
	return 0;
}

/* ---- tensorflow ---- */

static const char *const tf_roles[] = { "chief", "worker", "ps", "evaluator" };

static int validate_tensorflow(const struct job_spec *spec, struct errbuf *eb)
{
	for (size_t r = 0; r < spec->nroles; r++) {
		const struct spec_role *role = &spec->roles[r];
		bool known = false;
		for (size_t k = 0; k < ARRAY_SIZE(tf_roles); k++)
			known |= !strcmp(role->name, tf_roles[k]);
		if (!known)
			return bad_role(eb, "tensorflow", role->name, "chief, worker, ps, evaluator");
		if ((!strcmp(role->name, "chief") || !strcmp(role->name, "evaluator")) &&
		    role->replicas > 1)
			return bad_replicas(eb, role->name, "a tensorflow job has at most one");
	}
	if (!find_role(spec, "chief") && !find_role(spec, "worker"))
		return error_field(eb, YERR(INVALID_SPEC), "tasks",
				   "tasks: a tensorflow job needs a chief or a worker role");
	return 0;
}

static bool decides_tensorflow(const struct job_spec *spec, const char *role, unsigned index)
{
	if (find_role(spec, "chief"))
		return !strcmp(role, "chief");
	return !strcmp(role, "worker") && index == 0;
}

static int fill_tensorflow(const struct launch_job *job, size_t i, char ***argv, json_t *env,
			   struct errbuf *eb)
{
	const struct launch_task *t = &job->tasks[i];
	json_t *cluster = json_object(), *doc;
	char *text;
	int ret;

	if ((ret = need_ports(job, eb))) {
		json_decref(cluster);
		return ret;
	}
	for (size_t k = 0; k < job->ntasks; k++) {
		const struct launch_task *o = &job->tasks[k];
		json_t *list;
		if (!strcmp(o->role, "evaluator"))
			continue;
		list = json_object_get(cluster, o->role);
		if (!list) {
			list = json_array();
			json_object_set_new(cluster, o->role, list);
		}
		json_array_append_new(list, json_sprintf("%s:%u", task_addr(job, k), o->port));
	}
	doc = json_pack("{s:o, s:{s:s, s:i}}", "cluster", cluster, "task", "type", t->role, "index",
			(int)t->index);
	text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	json_object_set_new(env, "TF_CONFIG", json_string(text));
	free(text);
	json_decref(doc);
	return 0;
}

/* ---- mxnet (ps-lite) ---- */

static int validate_mxnet(const struct job_spec *spec, struct errbuf *eb)
{
	const struct spec_role *sched = find_role(spec, "scheduler");
	for (size_t r = 0; r < spec->nroles; r++) {
		const char *n = spec->roles[r].name;
		if (strcmp(n, "scheduler") && strcmp(n, "server") && strcmp(n, "worker"))
			return bad_role(eb, "mxnet", n, "scheduler, server, worker");
	}
	if (!sched)
		return error_field(eb, YERR(INVALID_SPEC), "tasks.scheduler",
				   "tasks.scheduler: an mxnet job needs one scheduler");
	if (sched->replicas != 1)
		return bad_replicas(eb, "scheduler", "an mxnet job has exactly one scheduler");
	if (!find_role(spec, "worker"))
		return error_field(eb, YERR(INVALID_SPEC), "tasks.worker",
				   "tasks.worker: an mxnet job needs at least one worker");
	return 0;
}

static bool decides_mxnet(const struct job_spec *spec, const char *role, unsigned index)
{
	return !strcmp(role, "worker");
}

static int fill_mxnet(const struct launch_job *job, size_t i, char ***argv, json_t *env,
		      struct errbuf *eb)
{
	const struct launch_task *t = &job->tasks[i];
	size_t sched = job->ntasks, servers = 0, workers = 0;
	int ret;

	if ((ret = need_ports(job, eb)))
		return ret;
	for (size_t k = 0; k < job->ntasks; k++) {
		const char *r = job->tasks[k].role;
		if (!strcmp(r, "scheduler"))
			sched = k;
		else if (!strcmp(r, "server"))
			servers++;
		else if (!strcmp(r, "worker"))
			workers++;
	}
	if (sched == job->ntasks)
		return error(eb, YERR(BAD_REQUEST), "the mxnet job has no scheduler task");
	set_env(env, "DMLC_ROLE", "%s", t->role);
	set_env(env, "DMLC_PS_ROOT_URI", "%s", task_addr(job, sched));
	set_env(env, "DMLC_PS_ROOT_PORT", "%u", job->tasks[sched].port);
	set_env(env, "DMLC_NUM_SERVER", "%zu", servers);
	set_env(env, "DMLC_NUM_WORKER", "%zu", workers);
	if (!strcmp(t->role, "worker"))
		set_env(env, "DMLC_WORKER_ID", "%u", t->index);
	return 0;
}

/* ---- jax ---- */

static int fill_jax(const struct launch_job *job, size_t i, char ***argv, json_t *env,
		    struct errbuf *eb)
{
	int ret;
	if ((ret = need_ports(job, eb)))
		return ret;
	set_env(env, "JAX_COORDINATOR_ADDRESS", "%s:%u", task_addr(job, 0), job->tasks[0].port);
	set_env(env, "JAX_NUM_PROCESSES", "%zu", job->ntasks);
	set_env(env, "JAX_PROCESS_ID", "%zu", i);
	return 0;
}

/* ---- mpi / horovod ---- */

/* An mpi job's tasks run the agent's own binary ("yard mpirun", "yard
 * mpi-worker", see fill_mpi), which an image does not have: refused until a
 * container runtime puts it there. */
static int validate_mpi(const struct job_spec *spec, struct errbuf *eb)
{
	if (spec->nroles != 1)
		return error_field(eb, YERR(INVALID_SPEC), "tasks",
				   "tasks: an mpi job has exactly one role (its ranks), got %zu",
				   spec->nroles);
	if (spec->image || spec->image_build)
		return error_field(eb, YERR(INVALID_SPEC), "image",
				   "image: framework %s cannot run in an image yet: rank 0 runs "
				   "'yard mpirun' and the other ranks 'yard mpi-worker', helpers "
				   "that an image does not have (leave image out to use the "
				   "process runtime)", spec->framework);
	return 0;
}

static bool decides_mpi(const struct job_spec *spec, const char *role, unsigned index)
{
	return spec->nroles && !strcmp(role, spec->roles[0].name) && index == 0;
}

static void replace_argv(char ***argv, char **next)
{
	argv_free(*argv);
	*argv = next;
}

static int fill_mpi(const struct launch_job *job, size_t i, char ***argv, json_t *env,
		    struct errbuf *eb)
{
	struct strbuf hosts = STRBUF_INIT;
	size_t n = argv_len(*argv);
	char **next;
	int ret;

	if ((ret = need_addrs(job, eb)))
		return ret;
	if (i != 0) {
		next = xcalloc(3, sizeof(*next));
		next[0] = xstrdup("yard");
		next[1] = xstrdup("mpi-worker");
		replace_argv(argv, next);
		return 0;
	}
	/* nodes in the order of their first rank, with the job's tasks there */
	for (size_t k = 0; k < job->ntasks; k++) {
		size_t node = job->tasks[k].node, slots = 0;
		if (!first_on_node(job, k))
			continue;
		for (size_t p = 0; p < job->ntasks; p++)
			if (job->tasks[p].node == node)
				slots++;
		strbuf_addf(&hosts, "%s slots=%zu\n", job->nodes[node].addr, slots);
	}
	set_env(env, "YARD_MPI_HOSTFILE", "%s", hosts.buf);
	if (job->nodes[job->tasks[0].node].iface)
		set_env(env, "YARD_MPI_IFNAME", "%s", job->nodes[job->tasks[0].node].iface);
	strbuf_release(&hosts);
	next = xcalloc(n + 4, sizeof(*next));
	next[0] = xstrdup("yard");
	next[1] = xstrdup("mpirun");
	next[2] = xstrdup("--");
	for (size_t k = 0; k < n; k++)
		next[3 + k] = xstrdup((*argv)[k]);
	replace_argv(argv, next);
	return 0;
}

/* ---- caffe ---- */

static bool argv_has_gpus(char *const *argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		if (strstr(argv[i], "{gpus}"))
			return true;
	return false;
}

static int validate_caffe(const struct job_spec *spec, struct errbuf *eb)
{
	if (spec_total_tasks(spec) != 1)
		return bad_replicas(eb, spec->roles[0].name,
				    "caffe trains on one node: a caffe job has exactly one task");
	const struct spec_role *r = &spec->roles[0];
	if (!r->gpus && argv_has_gpus(r->command ? r->command : spec->command)) {
		char field[80];
		snprintf(field, sizeof(field), "tasks.%s.gpus", r->name);
		return error_field(eb, YERR(INVALID_SPEC), field,
				   "tasks.%s.gpus: the command uses {gpus}, so the task needs at least one GPU",
				   r->name);
	}
	return 0;
}

static int fill_caffe(const struct launch_job *job, size_t i, char ***argv, json_t *env,
		      struct errbuf *eb)
{
	const struct launch_task *t = &job->tasks[i];
	struct strbuf list = STRBUF_INIT;

	/* CUDA_VISIBLE_DEVICES shows the task its GPUs as devices 0..N-1 */
	for (unsigned g = 0; g < t->ngpus; g++)
		strbuf_addf(&list, "%s%u", g ? "," : "", g);
	for (size_t a = 0; *argv && (*argv)[a]; a++) {
		struct strbuf out = STRBUF_INIT;
		const char *p = (*argv)[a], *hit;
		if (!strstr(p, "{gpus}"))
			continue;
		while ((hit = strstr(p, "{gpus}"))) {
			strbuf_add(&out, p, (size_t)(hit - p));
			strbuf_add(&out, list.buf, list.len);
			p = hit + 6;
		}
		strbuf_addstr(&out, p);
		free((*argv)[a]);
		(*argv)[a] = strbuf_detach(&out, NULL);
	}
	strbuf_release(&list);
	return 0;
}

/* ---- jupyter ---- */

static int validate_jupyter(const struct job_spec *spec, struct errbuf *eb)
{
	if (spec_total_tasks(spec) != 1)
		return bad_replicas(eb, spec->roles[0].name,
				    "a jupyter job is one notebook server: it has exactly one task");
	return 0;
}

/* The command (jupyter-notebook, or another that takes NotebookApp's
 * options) serves on the task's port of its node's loopback, under the
 * path of the master's proxy to it, and never moves to another port (the
 * path names this one). The token is Jupyter's own: JUPYTER_TOKEN in the
 * spec's env (yard notebook sets one), else the one it makes and logs. */
static int fill_jupyter(const struct launch_job *job, size_t i, char ***argv, json_t *env,
			struct errbuf *eb)
{
	const struct launch_task *t = &job->tasks[i];
	size_t n = argv_len(*argv), k = 0;
	char **next;

	(void)env;
	if (!t->port)
		return error(eb, YERR(UNAVAILABLE), "task %s/%u: node '%s' has no port left in its range for "
			     "the notebook server", t->role, t->index, job->nodes[t->node].name);
	next = xcalloc(n + 8, sizeof(*next));
	for (; k < n; k++)
		next[k] = xstrdup((*argv)[k]);
	next[k++] = xstrdup("--no-browser");
	next[k++] = xstrdup("--ip=127.0.0.1");
	next[k++] = xasprintf("--port=%u", t->port);
	next[k++] = xstrdup("--NotebookApp.port_retries=0");
	next[k++] = xasprintf("--NotebookApp.base_url=/v1/jobs/%" PRIu64 "/proxy/%s/%u/%u/", job->job_id,
			      t->role, t->index, t->port);
	/* its requests come through the proxy, naming the master's host */
	next[k++] = xstrdup("--NotebookApp.allow_remote_access=True");
	/* a task of an agent without --run-as runs as root */
	next[k++] = xstrdup("--NotebookApp.allow_root=True");
	replace_argv(argv, next);
	return 0;
}

static const struct framework frameworks[] = {
	{ "command", false, false, validate_any, decides_all, fill_none },
	{ "pytorch", true, true, validate_any, decides_all, fill_pytorch },
	{ "tensorflow", true, true, validate_tensorflow, decides_tensorflow, fill_tensorflow },
	{ "mxnet", true, true, validate_mxnet, decides_mxnet, fill_mxnet },
	{ "jax", true, true, validate_any, decides_all, fill_jax },
	{ "mpi", false, true, validate_mpi, decides_mpi, fill_mpi },
	{ "horovod", false, true, validate_mpi, decides_mpi, fill_mpi },
	{ "caffe", false, false, validate_caffe, decides_all, fill_caffe },
	{ "jupyter", true, false, validate_jupyter, decides_all, fill_jupyter },
};

static const struct framework *find_framework(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(frameworks); i++)
		if (name && !strcmp(frameworks[i].name, name))
			return &frameworks[i];
	return NULL;
}

int launch_validate(const struct job_spec *spec, struct errbuf *eb)
{
	const struct framework *f = find_framework(spec->framework);
	if (!f)
		return error_field(eb, YERR(INVALID_SPEC), "framework",
				   "framework: unknown framework '%s'", spec->framework);
	return f->validate(spec, eb);
}

bool launch_needs_port(const char *framework)
{
	const struct framework *f = find_framework(framework);
	return f && f->port;
}

bool launch_decides(const struct job_spec *spec, const char *role, unsigned index)
{
	const struct framework *f = find_framework(spec->framework);
	return !f || f->decides(spec, role, index);
}

int launch_task(const struct launch_job *job, size_t i, char ***argv, json_t *env,
		struct errbuf *eb)
{
	const struct framework *f = find_framework(job->framework);
	if (!f)
		return error(eb, YERR(BAD_REQUEST), "unknown framework '%s'", job->framework);
	if (i >= job->ntasks)
		return error(eb, YERR(BAD_REQUEST), "no task %zu in a job of %zu", i, job->ntasks);
	if (f->ifname) {
		const char *ifname = job->nodes[job->tasks[i].node].iface;
		if (ifname && *ifname) {
			set_env(env, "GLOO_SOCKET_IFNAME", "%s", ifname);
			set_env(env, "NCCL_SOCKET_IFNAME", "%s", ifname);
		}
	}
	return f->fill(job, i, argv, env, eb);
}
