/*
 * `yard up`: the zero-configuration way to use Trainyard on one workstation.
 * A master and a local agent run in one process (the agent in a thread,
 * talking to the master over loopback like any other agent), with the data
 * under ~/.local/share/yard. The CLI is pointed at it through
 * ~/.config/yard/config when that file does not exist yet.
 */
#include "base/compat.h"
#include "up.h"

#include <pthread.h>

#include "agent/agent.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "cli/config.h"
#include "master/master.h"

struct up {
	struct master *master;
	struct agent_config agent;
	volatile sig_atomic_t agent_stop;
	int agent_status;
	sigset_t signals;
};

static void *agent_thread(void *arg)
{
	struct up *up = arg;
	struct errbuf eb = ERRBUF_INIT;
	up->agent_status = agent_run(&up->agent, &up->agent_stop, &eb);
	if (up->agent_status < 0) {
		fprintf(stderr, "yard up: agent: %s\n", eb.msg);
		master_stop(up->master);
	}
	return NULL;
}

static void *signal_thread(void *arg)
{
	struct up *up = arg;
	int sig = 0;
	sigwait(&up->signals, &sig);
	up->agent_stop = 1;
	master_stop(up->master);
	return NULL;
}

static int read_token(const char *path, struct strbuf *out)
{
	if (strbuf_read_file(out, path, 4096) < 0)
		return -1;
	strbuf_trim(out);
	return 0;
}

/* Says where the web UI signs in: the token goes in the URL's fragment,
 * which the browser never sends (docs/api.md, "The web app"). */
static void print_web_url(const char *url, const char *admin_token_path)
{
	struct strbuf token = STRBUF_INIT;
	if (read_token(admin_token_path, &token) == 0)
		fprintf(stderr, "yard up: the web UI: %s/#token=%s\n", url, token.buf);
	strbuf_release(&token);
}

/* Points the CLI at this master unless the user has a config already. */
static void write_cli_config(const char *url, const char *admin_token_path)
{
	struct strbuf token = STRBUF_INIT, text = STRBUF_INIT;
	char *path = cli_config_path();
	char *slash = path ? strrchr(path, '/') : NULL;
	if (!slash || path_exists(path) || read_token(admin_token_path, &token) < 0)
		goto out;
	*slash = '\0';
	int made = mkdir_p(path, 0700);
	*slash = '/';
	if (made < 0)
		goto out;
	strbuf_addf(&text, "# written by yard up\nmaster = %s\ntoken = %s\n", url, token.buf);
	if (write_file_atomic(path, text.buf, text.len, 0600) == 0)
		fprintf(stderr, "yard up: the CLI now talks to %s (%s)\n", url, path);
out:
	free(path);
	strbuf_release(&token);
	strbuf_release(&text);
}

static void usage(void)
{
	fprintf(stderr, "usage: yard up [--listen HOST:PORT] [--data-dir DIR] [--gpus auto|none|sim:N]\n");
}

int cmd_up(int argc, char **argv)
{
	struct up up;
	struct master_config mc = { .listen = "127.0.0.1:7420", .lease_ms = 15000 };
	struct strbuf data_dir = STRBUF_INIT, work_dir = STRBUF_INIT, join_path = STRBUF_INIT;
	struct strbuf join = STRBUF_INIT, admin_path = STRBUF_INIT;
	struct errbuf eb = ERRBUF_INIT;
	const char *gpus = "auto";
	char host[256] = "localhost";
	pthread_t agent_tid, sig_tid;
	int ret = 1;

	memset(&up, 0, sizeof(up));
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc) {
			mc.listen = argv[++i];
		} else if (!strcmp(argv[i], "--data-dir") && i + 1 < argc) {
			strbuf_addstr(&data_dir, argv[++i]);
		} else if (!strcmp(argv[i], "--gpus") && i + 1 < argc) {
			gpus = argv[++i];
		} else {
			usage();
			return 2;
		}
	}
	if (!data_dir.len) {
		const char *xdg = getenv("XDG_DATA_HOME");
		const char *home = getenv("HOME");
		if (xdg && *xdg)
			strbuf_addf(&data_dir, "%s/yard", xdg);
		else
			strbuf_addf(&data_dir, "%s/.local/share/yard", home && *home ? home : "/tmp");
	}
	mc.data_dir = data_dir.buf;
	strbuf_addf(&work_dir, "%s/agent", data_dir.buf);
	strbuf_addf(&join_path, "%s/join-token", data_dir.buf);
	strbuf_addf(&admin_path, "%s/admin-token", data_dir.buf);

	/* every thread inherits the blocked set; one thread takes the signals */
	sigemptyset(&up.signals);
	sigaddset(&up.signals, SIGINT);
	sigaddset(&up.signals, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &up.signals, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (master_open(&mc, &up.master, &eb) < 0) {
		fprintf(stderr, "yard up: %s\n", eb.msg);
		goto out;
	}
	if (read_token(join_path.buf, &join) < 0) {
		fprintf(stderr, "yard up: cannot read '%s': %s\n", join_path.buf, strerror(errno));
		goto out_master;
	}
	printf("yard master ready url=%s\n", master_url(up.master));
	fflush(stdout);
	write_cli_config(master_url(up.master), admin_path.buf);
	print_web_url(master_url(up.master), admin_path.buf);
	gethostname(host, sizeof(host) - 1);
	up.agent.master_url = master_url(up.master);
	up.agent.name = host;
	up.agent.work_dir = work_dir.buf;
	up.agent.gpus = gpus;
	up.agent.join_token = join.buf;
	up.agent.dev_dir = "/dev";
	up.agent.master_in_process = true;
	if (pthread_create(&sig_tid, NULL, signal_thread, &up) != 0 ||
	    pthread_create(&agent_tid, NULL, agent_thread, &up) != 0) {
		fprintf(stderr, "yard up: cannot start threads\n");
		goto out_master;
	}
	ret = master_run(up.master) < 0 ? 1 : 0;
	up.agent_stop = 1;
	pthread_join(agent_tid, NULL);
	pthread_cancel(sig_tid);
	pthread_join(sig_tid, NULL);
	if (up.agent_status < 0)
		ret = 1;
out_master:
	master_free(up.master);
out:
	strbuf_release(&data_dir);
	strbuf_release(&work_dir);
	strbuf_release(&join_path);
	strbuf_release(&join);
	strbuf_release(&admin_path);
	return ret;
}
