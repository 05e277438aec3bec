/*
 * The task-side helpers of the MPI launcher (src/launch/launch.h, mpi):
 *
 *   yard mpirun -- ARGV...   in rank 0's task: writes the hostfile the
 *                            launcher gave in YARD_MPI_HOSTFILE and execs
 *                            OpenMPI's mpirun over it, with `yard mpi-rsh`
 *                            as its remote launch agent instead of ssh
 *   yard mpi-rsh HOST CMD... what mpirun runs to start its daemon on HOST:
 *                            asks the master to exec "sh -c CMD" in the
 *                            job's task on HOST (POST /v1/jobs/ID/exec, with
 *                            the job's own token) and waits for its exit
 *   yard mpi-worker          every other task: holds the node's slots and
 *                            hosts the ranks mpirun starts there, until the
 *                            job ends (the way mpi-operator's workers run sshd)
 *
 * They read YARD_MASTER, YARD_JOB_ID and YARD_JOB_TOKEN from the task's
 * environment, and YARD_CA or YARD_PIN when the master serves https.
 * docs/design-notes.md tells the whole path.
 */
#include "base/compat.h"

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/fsutil.h"
#include "base/xalloc.h"
#include "cli/cmd.h"

#define HOSTFILE ".yard-mpi-hostfile"

static int need_env(const char *cmd, const char *name, const char **out)
{
	*out = getenv(name);
	if (*out && **out)
		return 0;
	fprintf(stderr, "yard %s: %s is not set (this helper runs inside a yard task)\n", cmd, name);
	return -1;
}

int cmd_mpirun(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *hosts, *ifname = getenv("YARD_MPI_IFNAME");
	char self[PATH_MAX], np[24], agent[PATH_MAX + 16];
	struct strvec {
		char **v;
		size_t n, a;
	} av = { 0 };
	unsigned long slots = 0;
	int first = 1;
	ssize_t len;

	if (argc > 1 && !strcmp(argv[1], "--"))
		first = 2;
	if (first >= argc) {
		fprintf(stderr, "usage: yard mpirun -- PROGRAM [ARGS...]\n");
		return EXIT_USAGE;
	}
	if (need_env("mpirun", "YARD_MPI_HOSTFILE", &hosts))
		return EXIT_USAGE;
	/* slots: the sum of "slots=N" over the hostfile's lines */
	for (const char *p = strstr(hosts, "slots="); p; p = strstr(p, "slots=")) {
		uint64_t n = 0;
		p += 6;
		if (parse_u64(&p, &n) == 0)
			slots += n;
	}
	if (!slots) {
		fprintf(stderr, "yard mpirun: YARD_MPI_HOSTFILE lists no slots\n");
		return EXIT_USAGE;
	}
	if (write_file_atomic(HOSTFILE, hosts, strlen(hosts), 0644) < 0) {
		fprintf(stderr, "yard mpirun: cannot write '%s': %s\n", HOSTFILE, strerror(errno));
		return EXIT_FAIL;
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0) {
		fprintf(stderr, "yard mpirun: cannot find my own binary: %s\n", strerror(errno));
		return EXIT_FAIL;
	}
	self[len] = '\0';
	snprintf(agent, sizeof(agent), "%s mpi-rsh", self);
	snprintf(np, sizeof(np), "%lu", slots);
#define PUSH(s)                                      \
	do {                                         \
		ALLOC_GROW(av.v, av.n + 2, av.a);    \
		av.v[av.n++] = (char *)(s);          \
		av.v[av.n] = NULL;                   \
	} while (0)
	PUSH("mpirun");
	PUSH("--hostfile");
	PUSH(HOSTFILE);
	PUSH("-np");
	PUSH(np);
	PUSH("--bind-to");
	PUSH("none");
	PUSH("--mca");
	PUSH("plm_rsh_agent");
	PUSH(agent);
	PUSH("--mca");
	PUSH("btl");
	PUSH("self,vader,tcp");
	if (ifname && *ifname) {
		PUSH("--mca");
		PUSH("btl_tcp_if_include");
		PUSH(ifname);
		PUSH("--mca");
		PUSH("oob_tcp_if_include");
		PUSH(ifname);
	}
	if (geteuid() == 0)
		PUSH("--allow-run-as-root");
	for (int i = first; i < argc; i++)
		PUSH(argv[i]);
#undef PUSH
	fflush(NULL);
	execvp("mpirun", av.v);
	fprintf(stderr, "yard mpirun: cannot run 'mpirun': %s (is OpenMPI installed?)\n", strerror(errno));
	free(av.v);
	return 127;
}

int cmd_mpi_rsh(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *master, *job, *token, *host = NULL;
	struct strbuf cmd = STRBUF_INIT;
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL;
	struct client c;
	uint64_t id = 0, exec = 0;
	int i, status = 255;

	/* ssh-style options before the host ("-x", "-l USER", ...) mean nothing here */
	for (i = 1; i < argc && argv[i][0] == '-'; i++)
		if (!strcmp(argv[i], "-l") || !strcmp(argv[i], "-p") || !strcmp(argv[i], "-o"))
			i++;
	if (i < argc)
		host = argv[i++];
	if (!host || i >= argc) {
		fprintf(stderr, "usage: yard mpi-rsh [ssh options] HOST COMMAND...\n");
		return EXIT_USAGE;
	}
	if (need_env("mpi-rsh", "YARD_MASTER", &master) || need_env("mpi-rsh", "YARD_JOB_ID", &job) ||
	    need_env("mpi-rsh", "YARD_JOB_TOKEN", &token))
		return EXIT_USAGE;
	if (parse_u64_str(job, &id)) {
		fprintf(stderr, "yard mpi-rsh: YARD_JOB_ID '%s' is not a job id\n", job);
		return EXIT_USAGE;
	}
	/* like ssh, the remote side gets one command line for its shell */
	for (; i < argc; i++)
		strbuf_addf(&cmd, "%s%s", cmd.len ? " " : "", argv[i]);
	char *remote[] = { "/bin/sh", "-c", cmd.buf, NULL };
	struct httpc_tls tls = { getenv("YARD_CA"), getenv("YARD_PIN") };
	if (tls.ca_file && !*tls.ca_file)
		tls.ca_file = NULL;
	if (tls.pin && !*tls.pin)
		tls.pin = NULL;
	client_open(&c, master, &tls, token);
	if (client_exec_start(&c, id, host, remote, &reply, &eb)) {
		fprintf(stderr, "yard mpi-rsh: cannot start the command on '%s': %s\n", host, eb.msg);
		goto out;
	}
	exec = (uint64_t)cli_jint(reply, "id");
	for (;;) {
		json_decref(reply);
		reply = NULL;
		errbuf_reset(&eb);
		if (client_exec_get(&c, id, exec, 25, &reply, &eb)) {
			if (eb.code == YERR(UNAVAILABLE) || eb.code == YERR(NOT_LEADER)) {
				sleep(1); /* the master restarts, is busy or fails over: ask again */
				continue;
			}
			fprintf(stderr, "yard mpi-rsh: lost the command on '%s': %s\n", host, eb.msg);
			goto out;
		}
		if (!strcmp(cli_jstr(reply, "state"), "exited"))
			break;
	}
	if (json_is_integer(json_object_get(reply, "exit_code")))
		status = (int)cli_jint(reply, "exit_code");
	else if (json_is_integer(json_object_get(reply, "signal")))
		status = 128 + (int)cli_jint(reply, "signal");
	if (status)
		fprintf(stderr, "yard mpi-rsh: the command on '%s' ended: %s\n", host,
			cli_jstr(reply, "message"));
out:
	json_decref(reply);
	client_close(&c);
	strbuf_release(&cmd);
	return status;
}

static volatile sig_atomic_t worker_stop;

static void on_worker_signal(int sig)
{
	worker_stop = 1;
}

int cmd_mpi_worker(struct cli_ctx *ctx, int argc, char **argv)
{
	struct sigaction sa;
	const char *job = getenv("YARD_JOB_ID");

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_worker_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	printf("yard mpi-worker: hosting the MPI ranks of job %s on this node\n", job ? job : "?");
	fflush(stdout);
	while (!worker_stop)
		pause();
	return EXIT_OK;
}
