/*
 * `yard agent`: its options, one table read from the command line and from
 * the config file (base/conf.h), turned into a struct agent_config.
 */
#include "base/compat.h"
#include "agent/agent.h"

#include <unistd.h>

#include "agent/runas.h"
#include "agent/stage.h"
#include "base/conf.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/httpc.h"
#include "common/spec.h"

static int check_masters(const char *what, const char *v, struct errbuf *eb)
{
	return httpc_urls_check(v, what, eb);
}

static int check_name(const char *what, const char *v, struct errbuf *eb)
{
	if (!spec_name_valid(v))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected [a-z0-9][a-z0-9_.-]{0,62}", what, v);
	return 0;
}

static int check_label(const char *what, const char *v, struct errbuf *eb)
{
	const char *eq = strchr(v, '=');
	char *key = eq ? xstrndup(v, (size_t)(eq - v)) : NULL;
	bool ok = key && spec_label_valid(key, eq + 1);

	free(key);
	if (!ok)
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected KEY=VALUE (KEY: letters, digits, '-', "
			     "'_', '.', '/'; VALUE: letters, digits, '-', '_', '.')", what, v);
	return 0;
}

/* "process", "docker" or both, comma-separated; *docker (may be NULL) OUT. */
static int parse_runtimes(const char *what, const char *v, bool *docker, struct errbuf *eb)
{
	for (const char *p = v; *p;) {
		size_t n = strcspn(p, ",");
		if (n == 6 && !strncmp(p, "docker", 6)) {
			if (docker)
				*docker = true;
		} else if (!(n == 7 && !strncmp(p, "process", 7))) {
			return error(eb, YERR(BAD_REQUEST), "%s '%s': unknown runtime '%.*s' (known: process, docker)",
				     what, v, (int)n, p);
		}
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

static int check_runtimes(const char *what, const char *v, struct errbuf *eb)
{
	return parse_runtimes(what, v, NULL, eb);
}

/* "LOW-HIGH" within 1024-65535 */
static int parse_ports(const char *what, const char *v, unsigned *lo, unsigned *hi, struct errbuf *eb)
{
	const char *p = v;
	uint64_t a = 0, b = 0;

	if (parse_u64(&p, &a) < 0 || *p++ != '-' || parse_u64(&p, &b) < 0 || *p || a < 1024 || b > 65535 ||
	    a > b)
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected LOW-HIGH within 1024-65535", what, v);
	*lo = (unsigned)a;
	*hi = (unsigned)b;
	return 0;
}

static int check_ports(const char *what, const char *v, struct errbuf *eb)
{
	unsigned lo, hi;

	return parse_ports(what, v, &lo, &hi, eb);
}

static int check_size(const char *what, const char *v, struct errbuf *eb)
{
	uint64_t n;

	if (parse_size_str(v, &n) < 0 || !n)
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a size such as 50GiB", what, v);
	return 0;
}

static int check_url(const char *what, const char *v, struct errbuf *eb)
{
	if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected an http:// or https:// URL", what, v);
	return 0;
}

static int check_ca(const char *what, const char *v, struct errbuf *eb)
{
	struct httpc_tls tls = { v, NULL };

	return httpc_tls_check(&tls, what, what, eb);
}

static int check_pin(const char *what, const char *v, struct errbuf *eb)
{
	struct httpc_tls tls = { NULL, v };

	return httpc_tls_check(&tls, what, what, eb);
}

static int check_run_as(const char *what, const char *v, struct errbuf *eb)
{
	struct runas ra;
	int ret = runas_parse(what, v, &ra, eb);

	runas_release(&ra);
	return ret;
}

static int check_idle(const char *what, const char *v, struct errbuf *eb)
{
	uint64_t ms;

	if (parse_duration_str(v, &ms))
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected a duration such as 30m (0: never)", what, v);
	return 0;
}

#define OPT(name, kind, flags, field, check, arg, help) \
	{ name, kind, flags, offsetof(struct agent_options, field), check, arg, help }

static const struct conf_option agent_options_table[] = {
	OPT("master", CONF_STRING, CONF_REQUIRED, master, check_masters, "URL[,URL...]",
	    "the master, or the masters sharing a store (the agent finds the leader)"),
	OPT("name", CONF_STRING, 0, name, check_name, "NAME", "the node's name (default: the host name)"),
	OPT("work-dir", CONF_STRING, CONF_REQUIRED, work_dir, NULL, "DIR",
	    "the agent's state: tasks' dirs, the data cache"),
	OPT("gpus", CONF_STRING, 0, gpus, NULL, "auto|none|sim:N[:MODEL]",
	    "the GPUs it offers: found through NVML, none, or simulated\n(default none)"),
	OPT("advertise-addr", CONF_STRING, 0, advertise_addr, NULL, "IP",
	    "the address tasks of other nodes reach this node's tasks at\n"
	    "(default: the one used to reach the master)"),
	OPT("join-token-file", CONF_STRING, 0, join_token_file, NULL, "FILE",
	    "the master's join token (default: $YARD_JOIN_TOKEN)"),
	OPT("dev-dir", CONF_STRING, 0, dev_dir, NULL, "DIR", "where GPU device nodes live (default /dev)"),
	OPT("ports", CONF_STRING, 0, ports, check_ports, "LOW-HIGH", "task ports (default 30000-32000)"),
	OPT("pool", CONF_STRING, 0, pool, check_name, "NAME", "the node's pool (default: default)"),
	OPT("label", CONF_LIST, 0, labels, check_label, "KEY=VALUE", "a label jobs may ask for"),
	OPT("runtime", CONF_STRING, 0, runtime, check_runtimes, "process[,docker]",
	    "docker: container tasks through the Docker Engine API (Podman's too)"),
	OPT("docker-socket", CONF_STRING, 0, docker_socket, NULL, "PATH",
	    "the engine's socket (default /var/run/docker.sock)"),
	OPT("cache-size", CONF_STRING, 0, cache_size, check_size, "SIZE", "the data cache's cap (default 50GiB)"),
	OPT("s3-endpoint", CONF_STRING, 0, s3_endpoint, check_url, "URL", "the S3-compatible store of s3:// data"),
	OPT("s3-region", CONF_STRING, 0, s3_region, NULL, "REGION", "its region (default us-east-1)"),
	OPT("s3-credentials", CONF_STRING, 0, s3_credentials, NULL, "FILE",
	    "AWS_ACCESS_KEY_ID=... and AWS_SECRET_ACCESS_KEY=... lines"),
	OPT("ca", CONF_STRING, 0, ca, check_ca, "FILE", "trust an https master whose certificate this CA signed"),
	OPT("pin", CONF_STRING, 0, pin, check_pin, "sha256//BASE64", "or whose public key has this pin"),
	OPT("run-as", CONF_STRING, 0, run_as, check_run_as, "USER|UID|FIRST-LAST",
	    "tasks run as that user, or a uid of the range per job; never root\n"
	    "(the agent must run as root)"),
	OPT("ephemeral", CONF_BOOL, 0, ephemeral, NULL, NULL,
	    "the node of an elastic pool: leave for good when the master says,\n"
	    "when idle, or when stopped (its tasks stopped first)"),
	OPT("idle", CONF_STRING, 0, idle, check_idle, "DURATION",
	    "with --ephemeral: leave after this long without a task, whatever\n"
	    "the master says (default 30m; 0: only when told or stopped)"),
};

const struct conf_option *agent_conf_options(size_t *n)
{
	*n = ARRAY_SIZE(agent_options_table);
	return agent_options_table;
}

static volatile sig_atomic_t agent_stop;

static void on_signal(int sig)
{
	agent_stop = 1;
}

/* What no single option's check can tell. */
static int check_together(const struct agent_options *o, struct errbuf *eb)
{
	if (o->docker_socket && !(o->runtime && strstr(o->runtime, "docker")))
		return error(eb, YERR(BAD_REQUEST), "docker-socket needs runtime process,docker");
	if ((o->s3_credentials || o->s3_region) && !o->s3_endpoint)
		return error(eb, YERR(BAD_REQUEST), "s3-credentials and s3-region need s3-endpoint");
	if (o->idle && !o->ephemeral)
		return error(eb, YERR(BAD_REQUEST), "idle '%s' needs ephemeral: only an ephemeral agent leaves "
			     "when idle", o->idle);
	if (o->run_as && geteuid() != 0)
		return error(eb, YERR(BAD_REQUEST), "run-as '%s': the agent must run as root to start tasks "
			     "as another user", o->run_as);
	return 0;
}

/* Everything the options say, into cfg (its strings borrowed from o and
 * from the buffers given, which the caller releases). */
static int agent_configure(const struct agent_options *o, struct agent_config *cfg, struct runas *ra,
			   struct strbuf *host, struct strbuf *tok, char **ca_path, char **s3_key,
			   char **s3_secret, struct errbuf *eb)
{
	int ret;

	if ((ret = check_together(o, eb)))
		return ret;
	cfg->master_url = o->master;
	cfg->master_pin = o->pin;
	cfg->name = o->name;
	if (!cfg->name) {
		char h[256] = "";
		if (gethostname(h, sizeof(h) - 1) || !spec_name_valid(h))
			return error(eb, YERR(BAD_REQUEST), "this host's name '%s' is not a node name "
				     "([a-z0-9][a-z0-9_.-]{0,62}): give --name", h);
		strbuf_addstr(host, h);
		cfg->name = host->buf;
	}
	cfg->work_dir = o->work_dir;
	cfg->gpus = o->gpus ? o->gpus : "none";
	cfg->advertise_addr = o->advertise_addr;
	cfg->dev_dir = o->dev_dir;
	cfg->pool = o->pool;
	cfg->labels = o->labels.items;
	cfg->nlabels = o->labels.n;
	cfg->docker_socket = o->docker_socket;
	cfg->ephemeral = o->ephemeral;
	cfg->idle_ms = AGENT_EPHEMERAL_IDLE_MS;
	if (o->idle)
		parse_duration_str(o->idle, &cfg->idle_ms);
	cfg->s3_endpoint = o->s3_endpoint;
	cfg->s3_region = o->s3_region;
	if (o->runtime)
		parse_runtimes("--runtime", o->runtime, &cfg->docker, eb);
	if (o->ports)
		parse_ports("--ports", o->ports, &cfg->port_lo, &cfg->port_hi, eb);
	if (o->cache_size)
		parse_size_str(o->cache_size, &cfg->cache_size);
	if (o->s3_credentials && (ret = stage_s3_credentials(o->s3_credentials, s3_key, s3_secret, eb)))
		return ret;
	cfg->s3_key = *s3_key;
	cfg->s3_secret = *s3_secret;
	/* tasks get the CA file's path in YARD_CA: it must not depend on their cwd */
	if (o->ca && !(*ca_path = realpath(o->ca, NULL)))
		return error(eb, yerr_of_errno(errno), "ca '%s': %s", o->ca, strerror(errno));
	cfg->master_ca = *ca_path;
	if (o->run_as) {
		if ((ret = runas_parse("--run-as", o->run_as, ra, eb)))
			return ret;
		cfg->run_as = ra;
	}
	if (o->join_token_file) {
		if (strbuf_read_file(tok, o->join_token_file, 4096) < 0)
			return error(eb, yerr_of_errno(errno), "cannot read '%s': %s", o->join_token_file,
				     strerror(errno));
		strbuf_trim(tok);
		cfg->join_token = tok->buf;
	} else {
		cfg->join_token = getenv("YARD_JOIN_TOKEN");
	}
	return 0;
}

int cmd_agent(int argc, char **argv)
{
	struct agent_options o = { 0 };
	struct agent_config cfg = { 0 };
	struct errbuf eb = ERRBUF_INIT;
	struct strbuf tok = STRBUF_INIT, host = STRBUF_INIT;
	char *s3_key = NULL, *s3_secret = NULL, *ca_path = NULL;
	struct sigaction sa;
	struct runas ra;
	struct conf conf;
	int ret;

	memset(&ra, 0, sizeof(ra));
	conf_init(&conf, "agent", agent_options_table, ARRAY_SIZE(agent_options_table));
	ret = conf_load(&conf, argc, argv, &o, &eb);
	if (ret == CONF_HELP) {
		ret = 0;
		goto out;
	}
	if (!ret)
		ret = agent_configure(&o, &cfg, &ra, &host, &tok, &ca_path, &s3_key, &s3_secret, &eb);
	if (ret) {
		fprintf(stderr, "yard agent: %s\n", eb.msg);
		ret = ret == YERR(BAD_REQUEST) ? 2 : 1;
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	ret = agent_run(&cfg, &agent_stop, &eb);
	if (ret) {
		fprintf(stderr, "yard agent: %s\n", eb.msg);
		ret = 1;
	}
out:
	runas_release(&ra);
	strbuf_release(&tok);
	strbuf_release(&host);
	free(ca_path);
	free(s3_key);
	free(s3_secret);
	conf_release(&conf);
	return ret;
}
