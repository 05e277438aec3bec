/* The daemons' options (master_main.c's and agent_main.c's tables): every
 * key of a config file reaches its field (and, for the master, the settings
 * built from it); docs/configuration.md lists exactly each table's keys,
 * with which ones a reload applies. */
#include "base/compat.h"

#include <fcntl.h>
#include <setjmp.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/conf.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "agent/agent.h"
#include "master/interactive.h"
#include "master/master.h"
#include "master/settings.h"

static const char *doc_path;

/* Every key once (the lists twice); the test fails when the table has a key
 * this text does not set. */
static const char master_keys[] = "listen = 0.0.0.0:7420\n"
				"data-dir = /var/lib/yard/master\n"
				"store = postgres://yard@db/yard\n"
				"store-retry = 20s\n"
				"web-dir = /usr/share/yard/web\n"
				"lease = 20s\n"
				"policy = fair\n"
				"policy = gpu=las\n"
				"thresholds = 100,200\n"
				"team = vision=2:8\n"
				"team = speech=1\n"
				"preempt-min-run = 1m\n"
				"preempt-max-lost = 0\n"
				"data-quota = vision=10GiB\n"
				"outputs-retention = 30d\n"
				"idle-gpu-timeout = 30m\n"
				"idle-gpu-threshold = 10\n"
				"idle-gpu-action = stop\n"
				"interactive-idle-timeout = 2h\n"
				"rate-limit = 50:500\n"
				"visibility = open\n"
				"tls-cert = /etc/yard/cert.pem\n"
				"tls-key = /etc/yard/key.pem\n"
				"tls-self-signed = false\n"
				"tls-san = yard.example\n"
				"tls-san = 10.0.0.1\n"
				"advertise-url = https://yard.example:7420\n"
				"leader-lease = 3s\n"
				"leader-renew = 500ms\n"
				"provisioner = gpu=slurm:a100\n"
				"provisioner = cpu=command:/bin/true\n"
				"provisioner-min = cpu=1\n"
				"provisioner-max = gpu=4\n"
				"provisioner-max = cpu=6\n"
				"provisioner-idle = gpu=5m\n"
				"provisioner-shape = gpu=gpus=8,gpu-model=A100,cpus=64,memory=512GiB,label=net=ib\n"
				"provisioner-max-pending = 3\n"
				"provisioner-cooldown = 1m\n"
				"provisioner-register-timeout = 10m\n"
				"provisioner-url = https://yard.example:7420\n"
				"slurm-time = 2h\n"
				"slurm-account = vision\n"
				"slurm-qos = normal\n"
				"slurm-work-dir = /scratch/yard\n"
				"slurm-yard = /opt/yard/bin/yard\n"
				"slurm-agent-arg = --gpus=auto\n"
				"slurm-agent-arg = --label=site=hpc\n"
				"git-credential = https://git.example/team/=token-file:/etc/yard/git-token\n"
				"git-credential = ssh://git@git.example/=ssh-key:/etc/yard/deploy_key\n"
				"git-timeout = 90s\n"
				"git-hook-secret-file = /etc/yard/git-hook-secret\n"
				"registry = registry.example:5000\n"
				"registry-credential-file = /etc/yard/registry-credential\n"
				"store-images = true\n";

/* Fails naming the first key of opts that text does not set. */
static void check_sets_every_key(const char *text, const struct conf_option *opts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char *key = xasprintf("\n%s = ", opts[i].name);
		if (!strstr(text, key) && strncmp(text, key + 1, strlen(key + 1))) {
			fprintf(stderr, "the test sets no '%s': add it and check its field\n", opts[i].name);
			fail();
		}
		free(key);
	}
}

static void test_master_every_key(void **state)
{
	size_t n;
	const struct conf_option *opts = master_conf_options(&n);
	struct master_config cfg = { .tls_self_signed = true };
	struct master_settings s;
	struct errbuf eb = ERRBUF_INIT;
	struct conf c;

	check_sets_every_key(master_keys, opts, n);
	conf_init(&c, "master", opts, n);
	assert_int_equal(conf_parse_file(&c, master_keys, strlen(master_keys), "master.conf", &eb), 0);
	assert_int_equal(conf_apply(&c, &cfg, &eb), 0);
	assert_string_equal(cfg.listen, "0.0.0.0:7420");
	assert_string_equal(cfg.data_dir, "/var/lib/yard/master");
	assert_string_equal(cfg.store, "postgres://yard@db/yard");
	assert_int_equal(cfg.store_retry_ms, 20000);
	assert_string_equal(cfg.web_dir, "/usr/share/yard/web");
	assert_int_equal(cfg.lease_ms, 20000);
	assert_int_equal(cfg.policies.n, 2);
	assert_string_equal(cfg.policies.items[1], "gpu=las");
	assert_string_equal(cfg.thresholds, "100,200");
	assert_int_equal(cfg.teams.n, 2);
	assert_string_equal(cfg.preempt_min_run, "1m");
	assert_string_equal(cfg.preempt_max_lost, "0");
	assert_int_equal(cfg.data_quotas.n, 1);
	assert_int_equal(cfg.outputs_retention_ms, 30ull * 86400 * 1000);
	assert_int_equal(cfg.idle_gpu_timeout_ms, 30 * 60 * 1000);
	assert_string_equal(cfg.idle_gpu_threshold, "10");
	assert_string_equal(cfg.idle_gpu_action, "stop");
	assert_string_equal(cfg.interactive_idle_timeout, "2h");
	assert_string_equal(cfg.rate_limit, "50:500");
	assert_string_equal(cfg.visibility, "open");
	assert_string_equal(cfg.tls_cert, "/etc/yard/cert.pem");
	assert_string_equal(cfg.tls_key, "/etc/yard/key.pem");
	assert_false(cfg.tls_self_signed);
	assert_int_equal(cfg.tls_sans.n, 2);
	assert_string_equal(cfg.tls_sans.items[1], "10.0.0.1");
	assert_string_equal(cfg.advertise_url, "https://yard.example:7420");
	assert_int_equal(cfg.leader_lease_ms, 3000);
	assert_int_equal(cfg.leader_renew_ms, 500);
	assert_int_equal(cfg.provisioners.n, 2);
	assert_string_equal(cfg.provisioners.items[1], "cpu=command:/bin/true");
	assert_int_equal(cfg.provisioner_mins.n, 1);
	assert_int_equal(cfg.provisioner_maxes.n, 2);
	assert_int_equal(cfg.provisioner_idles.n, 1);
	assert_int_equal(cfg.provisioner_shapes.n, 1);
	assert_string_equal(cfg.provisioner_max_pending, "3");
	assert_string_equal(cfg.provisioner_cooldown, "1m");
	assert_string_equal(cfg.provisioner_register_timeout, "10m");
	assert_string_equal(cfg.provisioner_url, "https://yard.example:7420");
	assert_string_equal(cfg.slurm_time, "2h");
	assert_string_equal(cfg.slurm_account, "vision");
	assert_string_equal(cfg.slurm_qos, "normal");
	assert_string_equal(cfg.slurm_work_dir, "/scratch/yard");
	assert_string_equal(cfg.slurm_yard, "/opt/yard/bin/yard");
	assert_int_equal(cfg.slurm_agent_args.n, 2);
	assert_string_equal(cfg.slurm_agent_args.items[0], "--gpus=auto");
	assert_int_equal(cfg.git_credentials.n, 2);
	assert_string_equal(cfg.git_credentials.items[1], "ssh://git@git.example/=ssh-key:/etc/yard/deploy_key");
	assert_int_equal(cfg.git_timeout_ms, 90000);
	assert_string_equal(cfg.registry, "registry.example:5000");
	assert_true(cfg.store_images);
	assert_string_equal(cfg.registry_credential_file, "/etc/yard/registry-credential");
	assert_string_equal(cfg.git_hook_secret_file, "/etc/yard/git-hook-secret");
	/* the secret is read by settings_build, from a file that exists */
	char secret_file[] = "/tmp/yard-test-hook-XXXXXX";
	int fd = mkstemp(secret_file);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789abcdef0123\n", 21), 21);
	close(fd);
	cfg.git_hook_secret_file = secret_file;

	/* and what a reload would install from them */
	assert_int_equal(settings_build(&cfg, &s, &eb), 0);
	assert_int_equal(s.policy.policy, SCHED_POLICY_FAIR);
	assert_int_equal(s.npool_policies, 1);
	assert_string_equal(s.pool_policies[0].pool, "gpu");
	assert_int_equal(s.pool_policies[0].conf.policy, SCHED_POLICY_LAS);
	assert_int_equal(s.pool_policies[0].conf.nthresholds, 2);
	assert_int_equal(s.pool_policies[0].conf.thresholds[1], 200);
	assert_int_equal(s.policy.min_run_s, 60);
	assert_int_equal(s.policy.max_lost_s, 0);
	assert_false(s.policy.need_checkpoint);
	assert_int_equal(s.nteams, 2);
	assert_string_equal(s.teams[0].team, "vision");
	assert_int_equal(s.teams[0].quota, 8);
	assert_true(s.teams[1].weight == 1.0);
	assert_int_equal(s.ndata_quotas, 1);
	assert_int_equal(s.data_quotas[0].bytes, 10ull << 30);
	assert_int_equal(s.rate, 50);
	assert_int_equal(s.burst, 500);
	assert_true(s.visibility_open);
	assert_int_equal(s.gpuidle.threshold, 10);
	assert_true(s.gpuidle.stop);
	assert_int_equal(s.gpuidle.timeout_ms, 30 * 60 * 1000);
	assert_int_equal(s.outputs_retention_ms, 30ull * 86400 * 1000);
	assert_int_equal(s.interactive_idle_ms, 2 * 3600 * 1000);
	assert_int_equal(s.elastic.npools, 2);
	assert_int_equal(s.elastic.max_pending, 3);
	assert_int_equal(s.elastic.cooldown_ms, 60000);
	assert_int_equal(s.elastic.register_ms, 600000);
	assert_string_equal(s.elastic.url, "https://yard.example:7420");
	assert_int_equal(s.elastic.slurm_time_ms, 2 * 3600 * 1000);
	assert_string_equal(s.elastic.slurm_account, "vision");
	assert_string_equal(s.elastic.slurm_qos, "normal");
	assert_string_equal(s.elastic.slurm_work_dir, "/scratch/yard");
	assert_string_equal(s.elastic.slurm_yard, "/opt/yard/bin/yard");
	assert_int_equal(s.elastic.nslurm_agent_args, 2);
	assert_string_equal(s.elastic.slurm_agent_args[1], "--label=site=hpc");
	assert_true(elastic_conf_pool_is(&s.elastic, "gpu", "slurm:a100", 0, 4, 5 * 60 * 1000));
	assert_true(elastic_conf_pool_is(&s.elastic, "cpu", "command:/bin/true", 1, 6, ELASTIC_DEFAULT_IDLE_MS));
	assert_string_equal(s.git_hook_secret, "0123456789abcdef0123");
	settings_release(&s);
	/* a secret too short to hold: the build fails naming the option */
	fd = open(secret_file, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "short\n", 6), 6);
	close(fd);
	assert_int_not_equal(settings_build(&cfg, &s, &eb), 0);
	assert_non_null(strstr(eb.msg, "--git-hook-secret-file"));
	assert_null(strstr(eb.msg, "short\n"));
	settings_release(&s);
	unlink(secret_file);
	conf_release(&c);
	(void)state;
}

static const char agent_keys[] = "master = https://m1:7420,https://m2:7420\n"
			       "name = gpu-17\n"
			       "work-dir = /var/lib/yard/agent\n"
			       "gpus = auto\n"
			       "advertise-addr = 10.0.0.17\n"
			       "join-token-file = /etc/yard/join-token\n"
			       "dev-dir = /dev\n"
			       "ports = 40000-41000\n"
			       "pool = a100\n"
			       "label = rack=r3\n"
			       "label = net=ib\n"
			       "runtime = process,docker\n"
			       "docker-socket = /run/podman/podman.sock\n"
			       "cache-size = 200GiB\n"
			       "s3-endpoint = https://s3.example\n"
			       "s3-region = eu-west-1\n"
			       "s3-credentials = /etc/yard/s3\n"
			       "ca = /etc/hosts\n"
			       "pin = sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
			       "run-as = 61000-61999\n"
			       "ephemeral = true\n"
			       "idle = 15m\n";

static void test_agent_every_key(void **state)
{
	size_t n;
	const struct conf_option *opts = agent_conf_options(&n);
	struct agent_options o = { 0 };
	struct errbuf eb = ERRBUF_INIT;
	struct conf c;

	check_sets_every_key(agent_keys, opts, n);
	conf_init(&c, "agent", opts, n);
	if (conf_parse_file(&c, agent_keys, strlen(agent_keys), "agent.conf", &eb)) {
		fprintf(stderr, "%s\n", eb.msg);
		fail();
	}
	assert_int_equal(conf_apply(&c, &o, &eb), 0);
	assert_string_equal(o.master, "https://m1:7420,https://m2:7420");
	assert_string_equal(o.name, "gpu-17");
	assert_string_equal(o.work_dir, "/var/lib/yard/agent");
	assert_string_equal(o.gpus, "auto");
	assert_string_equal(o.advertise_addr, "10.0.0.17");
	assert_string_equal(o.join_token_file, "/etc/yard/join-token");
	assert_string_equal(o.dev_dir, "/dev");
	assert_string_equal(o.ports, "40000-41000");
	assert_string_equal(o.pool, "a100");
	assert_int_equal(o.labels.n, 2);
	assert_string_equal(o.labels.items[1], "net=ib");
	assert_string_equal(o.runtime, "process,docker");
	assert_string_equal(o.docker_socket, "/run/podman/podman.sock");
	assert_string_equal(o.cache_size, "200GiB");
	assert_string_equal(o.s3_endpoint, "https://s3.example");
	assert_string_equal(o.s3_region, "eu-west-1");
	assert_string_equal(o.s3_credentials, "/etc/yard/s3");
	assert_string_equal(o.ca, "/etc/hosts");
	assert_string_equal(o.pin, "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
	assert_string_equal(o.run_as, "61000-61999");
	assert_true(o.ephemeral);
	assert_string_equal(o.idle, "15m");
	conf_release(&c);
	(void)state;
}

/* Without any key: the defaults the master documents. */
static void test_defaults(void **state)
{
	struct master_config cfg = { 0 };
	struct master_settings s;
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(settings_build(&cfg, &s, &eb), 0);
	assert_int_equal(s.policy.policy, SCHED_POLICY_DEFAULT);
	assert_int_equal(s.policy.min_run_s, SCHED_PREEMPT_MIN_RUN_S);
	assert_int_equal(s.policy.max_lost_s, SCHED_PREEMPT_MAX_LOST_S);
	assert_int_equal(s.rate, RATELIMIT_DEFAULT_RATE);
	assert_false(s.visibility_open);
	assert_int_equal(s.gpuidle.threshold, GPUIDLE_DEFAULT_THRESHOLD);
	assert_int_equal(s.interactive_idle_ms, INTERACTIVE_IDLE_DEFAULT_MS);
	assert_int_equal(s.elastic.npools, 0);
	assert_int_equal(s.elastic.max_pending, ELASTIC_DEFAULT_MAX_PENDING);
	assert_int_equal(s.elastic.cooldown_ms, ELASTIC_DEFAULT_COOLDOWN_MS);
	assert_int_equal(s.elastic.register_ms, ELASTIC_DEFAULT_REGISTER_MS);
	assert_string_equal(s.elastic.slurm_work_dir, ELASTIC_DEFAULT_SLURM_WORK_DIR);
	settings_release(&s);
	/* 0 turns it off; what is no duration is refused naming the flag */
	cfg.interactive_idle_timeout = "0";
	assert_int_equal(settings_build(&cfg, &s, &eb), 0);
	assert_int_equal(s.interactive_idle_ms, 0);
	settings_release(&s);
	cfg.interactive_idle_timeout = "soon";
	assert_int_equal(settings_build(&cfg, &s, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "--interactive-idle-timeout 'soon': expected a duration such as 1h (0: off)");
	settings_release(&s);
	(void)state;
}

/* A line is refused for what settings_build would refuse it for alone (a
 * fuzz finding: a Slurm pool's name too long for its nodes' names passed
 * the line and failed only the build). */
static void test_line_refused_as_the_build_would(void **state)
{
	size_t n;
	const struct conf_option *opts = master_conf_options(&n);
	static const char text[] = "data-dir = /tmp/x\n"
				   "provisioner = p0123456789012345678901234567890123456=slurm:a100\n";
	struct errbuf eb = ERRBUF_INIT;
	struct conf c;

	static const char slurm_time[] = "slurm-time = 20\n";
	static const char register_timeout[] = "provisioner-register-timeout = 0s\n";

	conf_init(&c, "master", opts, n);
	assert_int_not_equal(conf_parse_file(&c, text, strlen(text), "master.conf", &eb), 0);
	assert_string_equal(eb.msg, "'master.conf' line 2: provisioner "
			    "'p0123456789012345678901234567890123456=slurm:a100': the pool of a Slurm "
			    "provisioner has a name of at most 36 characters (its nodes are POOL-JOB-TASK)");
	conf_release(&c);
	/* a second finding of the same kind: two durations the build bounded */
	conf_init(&c, "master", opts, n);
	assert_int_not_equal(conf_parse_file(&c, slurm_time, strlen(slurm_time), "master.conf", &eb), 0);
	assert_string_equal(eb.msg, "'master.conf' line 1: slurm-time '20': expected a duration of at "
			    "least 1m (0: the partition's limit)");
	conf_release(&c);
	conf_init(&c, "master", opts, n);
	assert_int_not_equal(conf_parse_file(&c, register_timeout, strlen(register_timeout), "master.conf", &eb), 0);
	assert_string_equal(eb.msg, "'master.conf' line 1: provisioner-register-timeout '0s': expected a "
			    "duration of more than 0");
	conf_release(&c);
	(void)state;
}

/* What no one key's check sees: the keys together (master_config_check). */
static void test_master_keys_together(void **state)
{
	struct master_config cfg = { .data_dir = "/tmp/x" };
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(master_config_check(&cfg, &eb), 0);
	cfg.store_images = true;
	assert_int_equal(master_config_check(&cfg, &eb), 0);
	cfg.registry = "registry.example:5000";
	assert_int_equal(master_config_check(&cfg, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "registry 'registry.example:5000' and store-images: an image built is shared "
			    "through the cluster's registry or through the master's store, not both (give one)");
	cfg.store_images = false;
	assert_int_equal(master_config_check(&cfg, &eb), 0);
	cfg.registry_credential_file = "/etc/yard/registry-credential";
	assert_int_equal(master_config_check(&cfg, &eb), 0);
	cfg.registry = NULL;
	assert_int_equal(master_config_check(&cfg, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "registry-credential-file: the credential of the cluster's registry needs "
			    "registry");
	cfg.registry_credential_file = NULL;
	cfg.leader_lease_ms = 1000;
	cfg.leader_renew_ms = 600;
	assert_int_equal(master_config_check(&cfg, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "leader-renew 600ms must be at most half of leader-lease (1000ms): the "
			    "lease would lapse between renewals");
	(void)state;
}

/* docs/configuration.md: under "## yard master", one row per key in the
 * table's order, "| `KEY` | ... | yes |" for the reloadable ones. */
static void check_doc_section(const char *section, const struct conf_option *opts, size_t n)
{
	struct strbuf doc = STRBUF_INIT, want = STRBUF_INIT, got = STRBUF_INIT;
	const char *p, *end;

	assert_int_equal(strbuf_read_file(&doc, doc_path, 0), 0);
	for (size_t i = 0; i < n; i++)
		strbuf_addf(&want, "%s %s\n", opts[i].name, opts[i].flags & CONF_RELOAD ? "yes" : "no");
	p = strstr(doc.buf, section);
	assert_non_null(p);
	end = strstr(p + strlen(section), "\n## ");
	if (!end)
		end = doc.buf + doc.len;
	while ((p = strstr(p, "\n| `")) && p < end) {
		const char *key = p + 4, *k_end = strchr(key, '`'), *eol = strchr(key, '\n');
		const char *last = eol;
		/* the last cell: reloadable */
		while (last > key && (last[-1] == ' ' || last[-1] == '|'))
			last--;
		const char *cell = last;
		while (cell > key && cell[-1] != ' ' && cell[-1] != '|')
			cell--;
		strbuf_addf(&got, "%.*s %.*s\n", (int)(k_end - key), key, (int)(last - cell), cell);
		p = eol;
	}
	assert_string_equal(got.buf, want.buf);
	strbuf_release(&doc);
	strbuf_release(&want);
	strbuf_release(&got);
}

static void test_doc_lists_every_key(void **state)
{
	size_t n;
	const struct conf_option *opts = master_conf_options(&n);

	check_doc_section("\n## yard master\n", opts, n);
	opts = agent_conf_options(&n);
	check_doc_section("\n## yard agent\n", opts, n);
	(void)state;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_master_every_key),
		cmocka_unit_test(test_agent_every_key),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_line_refused_as_the_build_would),
		cmocka_unit_test(test_master_keys_together),
		cmocka_unit_test(test_doc_lists_every_key),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: test_daemon_conf docs/configuration.md\n");
		return 2;
	}
	doc_path = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
