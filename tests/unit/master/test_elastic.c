/* Elastic pools' settings and the command provisioner (master/elastic.h,
 * master/provision.h): every bad value is refused naming the option, the
 * value and the reason; a script's output is read as the names of the nodes
 * it made, and what it printed before failing is kept; a real script (sh)
 * is run for up and down. */
#include "base/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "master/elastic.h"
#include "master/master.h"
#include "master/provision.h"

struct bad {
	const char *provisioner, *min, *max, *idle, *shape, *slurm_time;
	const char *msg;
};

static const struct bad bads[] = {
	{ .provisioner = "gpu=cloud:x",
	  .msg = "--provisioner 'gpu=cloud:x': expected POOL=command:/PATH or POOL=slurm:PARTITION" },
	{ .provisioner = "gpu=slurm:",
	  .msg = "--provisioner 'gpu=slurm:': expected POOL=command:/PATH or POOL=slurm:PARTITION" },
	{ .provisioner = "GPU=slurm:a",
	  .msg = "--provisioner 'GPU=slurm:a': expected POOL=command:/PATH or POOL=slurm:PARTITION" },
	{ .provisioner = "gpu=command:up.sh",
	  .msg = "--provisioner 'gpu=command:up.sh': expected command:/ABSOLUTE/PATH of a script" },
	{ .provisioner = "gpu=command:/nonexistent/up.sh",
	  .msg = "--provisioner 'gpu=command:/nonexistent/up.sh': script '/nonexistent/up.sh': No such file or directory" },
	{ .provisioner = "gpu=slurm:a b",
	  .msg = "--provisioner 'gpu=slurm:a b': expected slurm:PARTITION (letters, digits, '_', '.', '-')" },
	{ .provisioner = "a-pool-name-of-thirty-seven-letters-x=slurm:a",
	  .msg = "--provisioner 'a-pool-name-of-thirty-seven-letters-x=slurm:a': the pool of a Slurm "
		 "provisioner has a name of at most 36 characters (its nodes are POOL-JOB-TASK)" },
	{ .provisioner = "gpu=slurm:a", .min = "cpu=1",
	  .msg = "--provisioner-min 'cpu=1': pool 'cpu' has no --provisioner" },
	{ .provisioner = "gpu=slurm:a", .max = "gpu=many",
	  .msg = "--provisioner-max 'gpu=many': expected POOL=N, N from 0 to 10000" },
	{ .provisioner = "gpu=slurm:a", .min = "gpu=5", .max = "gpu=2",
	  .msg = "--provisioner-min of pool 'gpu' (5) is above its --provisioner-max (2)" },
	{ .provisioner = "gpu=slurm:a", .idle = "gpu=0",
	  .msg = "--provisioner-idle 'gpu=0': expected POOL=DURATION such as gpu=10m (more than 0)" },
	{ .provisioner = "gpu=slurm:a", .shape = "gpu=gpus=two",
	  .msg = "--provisioner-shape 'gpu=gpus=two': bad 'gpus=two' (expected gpus=N, gpu-model=NAME, "
		 "gpu-memory=SIZE, cpus=N, memory=SIZE, runtime=process|docker or label=KEY=VALUE)" },
	{ .provisioner = "gpu=slurm:a", .shape = "gpu=label=net",
	  .msg = "--provisioner-shape 'gpu=label=net': bad 'label=net' (expected gpus=N, gpu-model=NAME, "
		 "gpu-memory=SIZE, cpus=N, memory=SIZE, runtime=process|docker or label=KEY=VALUE)" },
	{ .provisioner = "gpu=slurm:a", .slurm_time = "30s",
	  .msg = "--slurm-time '30s': expected a duration of at least 1m (0: the partition's limit)" },
};

static void test_settings_refused(void **state)
{
	for (size_t i = 0; i < ARRAY_SIZE(bads); i++) {
		const struct bad *b = &bads[i];
		const char *const provs[] = { b->provisioner, "gpu=slurm:again" };
		struct master_config cfg = { 0 };
		struct elastic_conf c;
		struct errbuf eb = ERRBUF_INIT;

		cfg.provisioners = (struct conf_list){ provs, 1 };
		if (b->min)
			cfg.provisioner_mins = (struct conf_list){ &b->min, 1 };
		if (b->max)
			cfg.provisioner_maxes = (struct conf_list){ &b->max, 1 };
		if (b->idle)
			cfg.provisioner_idles = (struct conf_list){ &b->idle, 1 };
		if (b->shape)
			cfg.provisioner_shapes = (struct conf_list){ &b->shape, 1 };
		cfg.slurm_time = b->slurm_time;
		assert_int_equal(elastic_conf_build(&cfg, &c, &eb),
				 strstr(b->msg, "no --provisioner") || strstr(b->msg, "above its")
					 ? YERR(CONFLICT) : YERR(BAD_REQUEST));
		if (strcmp(eb.msg, b->msg))
			print_message("case %zu\n", i);
		assert_string_equal(eb.msg, b->msg);
		elastic_conf_release(&c);
	}
	/* a pool given twice */
	{
		const char *const provs[] = { "gpu=slurm:a", "gpu=slurm:b" };
		struct master_config cfg = { .provisioners = { provs, 2 } };
		struct elastic_conf c;
		struct errbuf eb = ERRBUF_INIT;
		assert_int_equal(elastic_conf_build(&cfg, &c, &eb), YERR(CONFLICT));
		assert_string_equal(eb.msg, "--provisioner 'gpu=slurm:b': pool 'gpu' has one already");
		elastic_conf_release(&c);
	}
	(void)state;
}

static void test_settings_shape(void **state)
{
	const char *const provs[] = { "gpu=slurm:a" };
	const char *const shape[] = { "gpu=gpus=8,gpu-model=A100,gpu-memory=80GiB,cpus=64,memory=512GiB,"
				      "runtime=docker,label=net=ib,label=rack=r3" };
	struct master_config cfg = { .provisioners = { provs, 1 }, .provisioner_shapes = { shape, 1 } };
	struct elastic_conf c;
	struct errbuf eb = ERRBUF_INIT;

	assert_int_equal(elastic_conf_build(&cfg, &c, &eb), 0);
	assert_true(elastic_conf_pool_is(&c, "gpu", "slurm:a", 0, ELASTIC_DEFAULT_MAX, ELASTIC_DEFAULT_IDLE_MS));
	assert_false(elastic_conf_pool_is(&c, "cpu", "slurm:a", 0, ELASTIC_DEFAULT_MAX, ELASTIC_DEFAULT_IDLE_MS));
	elastic_conf_release(&c);
	(void)state;
}

static void test_parse_names(void **state)
{
	struct errbuf eb = ERRBUF_INIT;
	char **names;
	size_t n;

	assert_int_equal(prov_parse_names("vm-1\n\n  \nvm-2\r\n", 8, &names, &n, &eb), 0);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "vm-1");
	assert_string_equal(names[1], "vm-2");
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	assert_int_equal(prov_parse_names("", 8, &names, &n, &eb), 0);
	assert_int_equal(n, 0);
	free(names);
	assert_int_equal(prov_parse_names("vm-1\nVM 2\n", 8, &names, &n, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "line 2: 'VM 2' is not a node name ([a-z0-9][a-z0-9_.-]{0,62})");
	assert_null(names);
	assert_int_equal(prov_parse_names("a\nb\na\n", 8, &names, &n, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "line 3: node 'a' a second time");
	assert_int_equal(prov_parse_names("a\nb\nc\n", 2, &names, &n, &eb), YERR(BAD_REQUEST));
	assert_string_equal(eb.msg, "line 3: more than the 2 node names asked for");
	(void)state;
}

/* A script of text in dir; returns its path (caller frees). */
static char *script(const char *dir, const char *name, const char *text)
{
	char *path = xasprintf("%s/%s", dir, name);
	assert_int_equal(write_file_atomic(path, text, strlen(text), 0755), 0);
	return path;
}

static void test_command_provisioner(void **state)
{
	char tmpl[] = "/tmp/yard-prov-XXXXXX";
	char *dir = mkdtemp(tmpl), *good, *bad, *log;
	struct prov_env env = { .pool = "gpu", .tag = "yard-0123456789abcdef-7", .request = 7,
				.master_url = "http://10.0.0.1:7420", .join_token_file = "/var/lib/yard/master/join-token" };
	struct strbuf sb = STRBUF_INIT;
	struct prov_made made;
	struct errbuf eb = ERRBUF_INIT;

	assert_non_null(dir);
	log = xasprintf("%s/calls", dir);
	{
		char *text = xasprintf("#!/bin/sh\necho \"$* $YARD_POOL $YARD_REQUEST $YARD_REQUEST_TAG $YARD_MASTER "
				       "$YARD_JOIN_TOKEN_FILE\" >> %s\n"
				       "[ \"$1\" = up ] && for i in $(seq 1 $3); do echo \"$2-$YARD_REQUEST-$i\"; done\n"
				       "exit 0\n", log);
		good = script(dir, "good", text);
		free(text);
	}
	bad = script(dir, "bad", "#!/bin/sh\necho vm-1\necho 'no quota left' >&2\nexit 3\n");
	assert_int_equal(provision_command_ops.check("--provisioner 'gpu=command:X'", good, &eb), 0);
	env.arg = good;
	assert_int_equal(provision_command_ops.up(&env, 2, &made, &eb), 0);
	assert_int_equal(made.n, 2);
	assert_string_equal(made.names[1], "gpu-7-2");
	assert_null(made.ids[0]);
	assert_null(made.external);
	prov_made_release(&made);
	assert_int_equal(provision_command_ops.down(&env, "gpu-7-1", NULL, &eb), 0);
	assert_int_equal(strbuf_read_file(&sb, log, 4096), 0);
	assert_string_equal(sb.buf, "up gpu 2 gpu 7 yard-0123456789abcdef-7 http://10.0.0.1:7420 /var/lib/yard/master/join-token\n"
				    "down gpu-7-1 gpu 7 yard-0123456789abcdef-7 http://10.0.0.1:7420 /var/lib/yard/master/join-token\n");
	/* a failure says the command, the exit and what the script said; what
	 * it printed before is kept (that node exists) */
	env.arg = bad;
	assert_int_equal(provision_command_ops.up(&env, 2, &made, &eb), YERR(UNAVAILABLE));
	{
		char *want = xasprintf("'%s up gpu 2' failed (exit 3): no quota left", bad);
		assert_string_equal(eb.msg, want);
		free(want);
	}
	assert_int_equal(made.n, 1);
	assert_string_equal(made.names[0], "vm-1");
	prov_made_release(&made);
	assert_int_equal(provision_command_ops.down(&env, "vm-1", NULL, &eb), YERR(UNAVAILABLE));
	strbuf_reset(&sb);
	provision_command_ops.describe(bad, NULL, &sb);
	{
		char *want = xasprintf("command %s", bad);
		assert_string_equal(sb.buf, want);
		free(want);
	}
	strbuf_reset(&sb);
	provision_slurm_ops.describe("a100", "4411", &sb);
	assert_string_equal(sb.buf, "slurm partition a100 (job 4411)");
	assert_non_null(provisioner_find("slurm", 5));
	assert_null(provisioner_find("slurmrestd", 10));
	rm_rf(dir);
	strbuf_release(&sb);
	free(good);
	free(bad);
	free(log);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_settings_refused),
		cmocka_unit_test(test_settings_shape),
		cmocka_unit_test(test_parse_names),
		cmocka_unit_test(test_command_provisioner),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
