#include "base/compat.h"
#include "agent/cgroup.h"

#include <linux/bpf.h>
#include <sys/syscall.h>

#include "base/fsutil.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"

#define DEFAULT_ROOT "/sys/fs/cgroup"
#define CFS_PERIOD_US 100000

/* cpuacct for accounting (cgroup_usage); where it shares cpu's hierarchy
 * (cpu,cpuacct) that one group serves both. */
static const char *const v1_controllers[] = { "cpu", "cpuacct", "memory", "pids", "devices" };

static int write_str(const char *dir, const char *file, const char *value, struct errbuf *eb)
{
	char *path = xasprintf("%s/%s", dir, file);
	int ret = 0;
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write_all(fd, value, strlen(value)) < 0)
		ret = error(eb, YERR(IO), "cannot write '%s' to '%s': %s", value, path, strerror(errno));
	if (fd >= 0)
		close(fd);
	free(path);
	return ret;
}

static int is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const struct cgroup_ops *cgroup_detect(const char *root)
{
	char path[PATH_MAX];
	if (!root)
		root = DEFAULT_ROOT;
	snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
	if (path_exists(path))
		return &cgroup_v2_ops;
	snprintf(path, sizeof(path), "%s/memory/cgroup.procs", root);
	if (path_exists(path))
		return &cgroup_v1_ops;
	snprintf(path, sizeof(path), "%s/devices/cgroup.procs", root);
	if (path_exists(path))
		return &cgroup_v1_ops;
	return NULL;
}

void cgroup_init(struct cgroup *cg, const struct cgroup_ops *ops, const char *root, const char *rel)
{
	size_t n = 0;
	memset(cg, 0, sizeof(*cg));
	cg->ops = ops;
	cg->root = xstrdup(root ? root : DEFAULT_ROOT);
	cg->rel = xstrdup(rel);
	if (ops == &cgroup_v1_ops) {
		char *real[ARRAY_SIZE(v1_controllers)] = { NULL };
		for (size_t i = 0; i < ARRAY_SIZE(v1_controllers); i++) {
			char *hier = xasprintf("%s/%s", cg->root, v1_controllers[i]);
			bool seen = false;
			real[i] = realpath(hier, NULL);
			for (size_t k = 0; k < i && real[i]; k++)
				seen |= real[k] && !strcmp(real[k], real[i]);
			if (is_dir(hier) && !seen) {
				cg->dirs[n] = xasprintf("%s/%s", hier, rel);
				if (!strcmp(v1_controllers[i], "memory"))
					cg->memory_dir = cg->dirs[n];
				n++;
			}
			free(hier);
		}
		for (size_t i = 0; i < ARRAY_SIZE(v1_controllers); i++)
			free(real[i]);
	} else {
		cg->dirs[n++] = xasprintf("%s/%s", cg->root, rel);
		cg->memory_dir = cg->dirs[0];
	}
	for (size_t i = 0; i < n; i++) {
		cg->procs[i] = xasprintf("%s/cgroup.procs", cg->dirs[i]);
		cg->join[i] = xasprintf("%s/%s", cg->dirs[i],
					ops == &cgroup_v1_ops ? "tasks" : "cgroup.procs");
	}
}

void cgroup_release(struct cgroup *cg)
{
	free(cg->root);
	free(cg->rel);
	for (size_t i = 0; i < ARRAY_SIZE(cg->dirs); i++) {
		free(cg->dirs[i]);
		free(cg->procs[i]);
		free(cg->join[i]);
	}
	memset(cg, 0, sizeof(*cg));
}

size_t cgroup_default_devs(struct cgroup_dev *out, size_t max)
{
	static const struct cgroup_dev defaults[] = {
		{ 1, 3 },   /* null */
		{ 1, 5 },   /* zero */
		{ 1, 7 },   /* full */
		{ 1, 8 },   /* random */
		{ 1, 9 },   /* urandom */
		{ 5, 0 },   /* tty */
		{ 5, 2 },   /* ptmx */
		{ 136, CGROUP_ANY }, /* pts/N */
	};
	size_t n = 0;
	for (; n < ARRAY_SIZE(defaults) && n < max; n++)
		out[n] = defaults[n];
	return n;
}

static int make_dirs(struct cgroup *cg, struct errbuf *eb)
{
	for (size_t i = 0; cg->dirs[i]; i++)
		if (mkdir_p(cg->dirs[i], 0755) < 0)
			return error(eb, YERR(IO), "cannot create cgroup '%s': %s", cg->dirs[i],
				     strerror(errno));
	return 0;
}

/* ---- cgroup v1 ---- */

static const char *v1_dir(struct cgroup *cg, const char *controller)
{
	char *hier = xasprintf("%s/%s/", cg->root, controller);
	const char *found = NULL;
	for (size_t i = 0; cg->dirs[i] && !found; i++)
		if (!strncmp(cg->dirs[i], hier, strlen(hier)))
			found = cg->dirs[i];
	free(hier);
	return found;
}

static int v1_create(struct cgroup *cg, const struct cgroup_limits *lim, struct errbuf *eb)
{
	char buf[64];
	const char *dir;
	int ret = make_dirs(cg, eb);
	if (ret)
		return ret;
	if (lim->cpus_milli) {
		if (!(dir = v1_dir(cg, "cpu")))
			return error(eb, YERR(IO), "no cpu cgroup hierarchy under '%s'", cg->root);
		snprintf(buf, sizeof(buf), "%d", CFS_PERIOD_US);
		if ((ret = write_str(dir, "cpu.cfs_period_us", buf, eb)))
			return ret;
		uint64_t quota = lim->cpus_milli * (CFS_PERIOD_US / 1000);
		snprintf(buf, sizeof(buf), "%" PRIu64, quota < 1000 ? 1000 : quota);
		if ((ret = write_str(dir, "cpu.cfs_quota_us", buf, eb)))
			return ret;
	}
	if (lim->memory) {
		if (!(dir = v1_dir(cg, "memory")))
			return error(eb, YERR(IO), "no memory cgroup hierarchy under '%s'", cg->root);
		snprintf(buf, sizeof(buf), "%" PRIu64, lim->memory);
		if ((ret = write_str(dir, "memory.limit_in_bytes", buf, eb)))
			return ret;
		/* with swap accounting, swap counts too (ignored where absent) */
		char *memsw = xasprintf("%s/memory.memsw.limit_in_bytes", dir);
		if (path_exists(memsw))
			write_str(dir, "memory.memsw.limit_in_bytes", buf, NULL);
		free(memsw);
	}
	if (lim->pids) {
		if (!(dir = v1_dir(cg, "pids")))
			return error(eb, YERR(IO), "no pids cgroup hierarchy under '%s'", cg->root);
		snprintf(buf, sizeof(buf), "%" PRIu64, lim->pids);
		if ((ret = write_str(dir, "pids.max", buf, eb)))
			return ret;
	}
	if (lim->devices) {
		if (!(dir = v1_dir(cg, "devices")))
			return error(eb, YERR(IO), "no devices cgroup hierarchy under '%s'", cg->root);
		if ((ret = write_str(dir, "devices.deny", "a", eb)))
			return ret;
		for (size_t i = 0; i < lim->ndevs; i++) {
			char maj[16] = "*", min[16] = "*";
			if (lim->devs[i].major != CGROUP_ANY)
				snprintf(maj, sizeof(maj), "%d", lim->devs[i].major);
			if (lim->devs[i].minor != CGROUP_ANY)
				snprintf(min, sizeof(min), "%d", lim->devs[i].minor);
			snprintf(buf, sizeof(buf), "c %s:%s rwm", maj, min);
			if ((ret = write_str(dir, "devices.allow", buf, eb)))
				return ret;
		}
	}
	return 0;
}

/* The counter "oom_kill N" of a flat keyed file (memory.oom_control, memory.events). */
/* The number after "KEY " on a line of DIR/FILE (key NULL: the file's
 * first number): 0 and *v, or -1 when the file or the key is not there. */
static int read_stat(const char *dir, const char *file, const char *key, uint64_t *v)
{
	struct strbuf sb = STRBUF_INIT;
	char *path = xasprintf("%s/%s", dir, file);
	size_t n = key ? strlen(key) : 0;
	int ret = -1;

	if (strbuf_read_file(&sb, path, 1 << 16) == 0) {
		for (const char *p = sb.buf; p && *p && ret; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
			const char *q = p + n + (key ? 1 : 0);
			if ((!key || (!strncmp(p, key, n) && p[n] == ' ')) && parse_u64(&q, v) == 0)
				ret = 0;
			if (!key)
				break;
		}
	}
	strbuf_release(&sb);
	free(path);
	return ret;
}

static uint64_t read_oom_kill(const char *dir, const char *file)
{
	uint64_t n = 0;
	return read_stat(dir, file, "oom_kill", &n) ? 0 : n;
}

static uint64_t v1_oom_kills(struct cgroup *cg)
{
	return cg->memory_dir ? read_oom_kill(cg->memory_dir, "memory.oom_control") : 0;
}

/* cpuacct.usage (ns), and memory.max_usage_in_bytes. */
static void v1_usage(struct cgroup *cg, struct cgroup_usage *u)
{
	const char *cpu = v1_dir(cg, "cpuacct") ? v1_dir(cg, "cpuacct") : v1_dir(cg, "cpu");
	uint64_t ns;

	if (cpu && !read_stat(cpu, "cpuacct.usage", NULL, &ns)) {
		u->cpu_usec = ns / 1000;
		u->has_cpu = true;
	}
	if (cg->memory_dir && !read_stat(cg->memory_dir, "memory.max_usage_in_bytes", NULL, &u->memory_peak))
		u->has_memory = true;
}

const struct cgroup_ops cgroup_v1_ops = {
	.name = "v1",
	.create = v1_create,
	.oom_kills = v1_oom_kills,
	.usage = v1_usage,
};

/* ---- cgroup v2 ---- */

static int bpf_sys(int cmd, union bpf_attr *attr)
{
	return (int)syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
	struct bpf_insn i;
	memset(&i, 0, sizeof(i));
	i.code = code;
	i.dst_reg = dst & 0xf;
	i.src_reg = src & 0xf;
	i.off = off;
	i.imm = imm;
	return i;
}

/*
 * The device filter, as runc's devicefilter builds it: r2 = device type,
 * r4 = major, r5 = minor; one block per allowed device that returns 1 when
 * everything matches; 0 at the end.
 */
static struct bpf_insn *build_dev_prog(const struct cgroup_limits *lim, size_t *count)
{
	struct bpf_insn *p = xcalloc(4 + lim->ndevs * 5 + 2, sizeof(*p));
	size_t n = 0;
	p[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 0, 0);
	p[n++] = insn(BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xFFFF);
	p[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_4, BPF_REG_1, 4, 0);
	p[n++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_5, BPF_REG_1, 8, 0);
	for (size_t i = 0; i < lim->ndevs; i++) {
		const struct cgroup_dev *d = &lim->devs[i];
		int jumps = 1 + (d->major != CGROUP_ANY) + (d->minor != CGROUP_ANY);
		int j = 0;
		p[n++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, (int16_t)(jumps - 1 - j++ + 2),
			      BPF_DEVCG_DEV_CHAR);
		if (d->major != CGROUP_ANY)
			p[n++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0,
				      (int16_t)(jumps - 1 - j++ + 2), d->major);
		if (d->minor != CGROUP_ANY)
			p[n++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_5, 0,
				      (int16_t)(jumps - 1 - j++ + 2), d->minor);
		p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1);
		p[n++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	}
	p[n++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);
	p[n++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	*count = n;
	return p;
}

static int v2_attach_devices(struct cgroup *cg, const struct cgroup_limits *lim, struct errbuf *eb)
{
	union bpf_attr attr;
	size_t count;
	char log[4096] = "";
	int prog_fd = -1, cg_fd = -1, ret = 0;
	struct bpf_insn *prog = build_dev_prog(lim, &count);

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	attr.insns = (uint64_t)(uintptr_t)prog;
	attr.insn_cnt = (uint32_t)count;
	attr.license = (uint64_t)(uintptr_t)"Apache";
	attr.log_buf = (uint64_t)(uintptr_t)log;
	attr.log_size = sizeof(log);
	attr.log_level = 1;
	prog_fd = bpf_sys(BPF_PROG_LOAD, &attr);
	if (prog_fd < 0 && errno == ENOSPC) {
		/* the verifier log did not fit: load again without it */
		attr.log_buf = 0;
		attr.log_size = 0;
		attr.log_level = 0;
		prog_fd = bpf_sys(BPF_PROG_LOAD, &attr);
	}
	if (prog_fd < 0) {
		ret = error(eb, YERR(IO), "cannot load the device program for '%s': %s%s%s", cg->dirs[0],
			    strerror(errno), log[0] ? ": " : "", log);
		goto out;
	}
	cg_fd = open(cg->dirs[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg_fd < 0) {
		ret = error(eb, YERR(IO), "cannot open cgroup '%s': %s", cg->dirs[0], strerror(errno));
		goto out;
	}
	memset(&attr, 0, sizeof(attr));
	attr.target_fd = (uint32_t)cg_fd;
	attr.attach_bpf_fd = (uint32_t)prog_fd;
	attr.attach_type = BPF_CGROUP_DEVICE;
	attr.attach_flags = BPF_F_ALLOW_MULTI;
	if (bpf_sys(BPF_PROG_ATTACH, &attr) < 0)
		ret = error(eb, YERR(IO), "cannot attach the device program to '%s': %s", cg->dirs[0],
			    strerror(errno));
out:
	if (cg_fd >= 0)
		close(cg_fd);
	if (prog_fd >= 0)
		close(prog_fd); /* the attachment keeps the program */
	free(prog);
	return ret;
}

/* Enable cpu, memory and pids for the children of every ancestor of the group. */
static void v2_enable_controllers(struct cgroup *cg)
{
	struct strbuf dir = STRBUF_INIT;
	const char *rel = cg->rel;
	strbuf_addstr(&dir, cg->root);
	for (;;) {
		static const char *const ctl[] = { "+cpu", "+memory", "+pids" };
		for (size_t i = 0; i < ARRAY_SIZE(ctl); i++)
			write_str(dir.buf, "cgroup.subtree_control", ctl[i], NULL);
		const char *slash = strchr(rel, '/');
		if (!slash)
			break;
		strbuf_addch(&dir, '/');
		strbuf_add(&dir, rel, (size_t)(slash - rel));
		rel = slash + 1;
	}
	strbuf_release(&dir);
}

static int v2_create(struct cgroup *cg, const struct cgroup_limits *lim, struct errbuf *eb)
{
	char buf[64];
	int ret = make_dirs(cg, eb);
	if (ret)
		return ret;
	if (lim->cpus_milli || lim->memory || lim->pids)
		v2_enable_controllers(cg);
	if (lim->cpus_milli) {
		uint64_t quota = lim->cpus_milli * (CFS_PERIOD_US / 1000);
		snprintf(buf, sizeof(buf), "%" PRIu64 " %d", quota < 1000 ? 1000 : quota, CFS_PERIOD_US);
		if ((ret = write_str(cg->dirs[0], "cpu.max", buf, eb)))
			return ret;
	}
	if (lim->memory) {
		snprintf(buf, sizeof(buf), "%" PRIu64, lim->memory);
		if ((ret = write_str(cg->dirs[0], "memory.max", buf, eb)))
			return ret;
		char *swap = xasprintf("%s/memory.swap.max", cg->dirs[0]);
		if (path_exists(swap))
			write_str(cg->dirs[0], "memory.swap.max", "0", NULL);
		free(swap);
	}
	if (lim->pids) {
		snprintf(buf, sizeof(buf), "%" PRIu64, lim->pids);
		if ((ret = write_str(cg->dirs[0], "pids.max", buf, eb)))
			return ret;
	}
	if (lim->devices)
		ret = v2_attach_devices(cg, lim, eb);
	return ret;
}

static uint64_t v2_oom_kills(struct cgroup *cg)
{
	return read_oom_kill(cg->dirs[0], "memory.events");
}

/* cpu.stat's usage_usec, and memory.peak (Linux 5.19 and later). */
static void v2_usage(struct cgroup *cg, struct cgroup_usage *u)
{
	u->has_cpu = !read_stat(cg->dirs[0], "cpu.stat", "usage_usec", &u->cpu_usec);
	u->has_memory = !read_stat(cg->dirs[0], "memory.peak", NULL, &u->memory_peak);
}

const struct cgroup_ops cgroup_v2_ops = {
	.name = "v2",
	.create = v2_create,
	.oom_kills = v2_oom_kills,
	.usage = v2_usage,
};

/* ---- common ---- */

int cgroup_create(struct cgroup *cg, const struct cgroup_limits *lim, struct errbuf *eb)
{
	int ret = cg->ops->create(cg, lim, eb);
	if (ret)
		cgroup_destroy(cg, NULL);
	return ret;
}

void cgroup_usage(struct cgroup *cg, struct cgroup_usage *u)
{
	memset(u, 0, sizeof(*u));
	cg->ops->usage(cg, u);
}

int cgroup_signal_all(struct cgroup *cg, int sig)
{
	int count = 0;
	for (size_t i = 0; cg->procs[i]; i++) {
		struct strbuf sb = STRBUF_INIT;
		if (strbuf_read_file(&sb, cg->procs[i], 0) == 0) {
			const char *p = sb.buf;
			while (*p) {
				uint64_t pid;
				if (parse_u64(&p, &pid) == 0 && pid > 0 && pid < INT_MAX) {
					if (kill((pid_t)pid, sig) == 0)
						count++;
				} else if (*p) {
					p++;
				}
				while (*p == '\n')
					p++;
			}
		}
		strbuf_release(&sb);
	}
	return count;
}

int cgroup_kill_all(struct cgroup *cg, unsigned timeout_ms, void (*reap)(void))
{
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		int n = cgroup_signal_all(cg, SIGKILL);
		if (reap)
			reap();
		if (n == 0)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
		if (ms >= (long)timeout_ms)
			return -1;
		struct timespec d = { 0, 5 * 1000 * 1000 };
		nanosleep(&d, NULL);
	}
}

uint64_t cgroup_oom_kills(struct cgroup *cg)
{
	return cg->ops->oom_kills(cg);
}

int cgroup_destroy(struct cgroup *cg, struct errbuf *eb)
{
	int ret = 0;
	for (size_t i = 0; cg->dirs[i]; i++) {
		int tries = 0;
		while (rmdir(cg->dirs[i]) < 0) {
			if (errno == ENOENT)
				break;
			if (errno == EBUSY && ++tries < 100) {
				struct timespec d = { 0, 10 * 1000 * 1000 };
				nanosleep(&d, NULL);
				continue;
			}
			ret = error(eb, YERR(IO), "cannot remove cgroup '%s': %s", cg->dirs[i],
				    strerror(errno));
			break;
		}
	}
	return ret;
}
