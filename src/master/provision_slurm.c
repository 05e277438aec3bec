/*
 * The Slurm provisioner (provision.h): the nodes of a pool are allocations
 * of a Slurm partition, asked for with sbatch, released with scancel and
 * found again after a master restart with squeue; Slurm's command-line
 * tools rather than slurmrestd, as docs/elastic.md says why (no daemon or
 * JWT keys to run beside slurmctld, munge as every Slurm client has it,
 * and the same interface on every Slurm release, where the REST API's
 * versions change).
 *
 * One up of COUNT nodes is one job array of COUNT tasks (`--array
 * 0-(COUNT-1)`), each task a whole node (`--nodes 1 --exclusive`): one
 * Slurm job id for the request (what its reason shows), yet each node is
 * its own allocation, ended alone (`scancel JOB_TASK`) when its agent
 * leaves. The batch script, given on sbatch's stdin, runs `yard agent
 * --ephemeral` named POOL-JOB-TASK, so the master knows the names from the
 * job id; the join token reaches it in the job's environment
 * (YARD_JOIN_TOKEN, `--export`), never on a command line. The job is named
 * after the request's tag, which squeue finds again.
 */
#include "base/compat.h"
#include "master/provision.h"

#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "master/provision_run.h"

static bool slurm_word(const char *s, size_t max)
{
	size_t n = strlen(s);

	return n && n <= max && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

static int slurm_check(const char *what, const char *arg, struct errbuf *eb)
{
	if (!slurm_word(arg, 64))
		return error(eb, YERR(BAD_REQUEST), "%s: expected slurm:PARTITION (letters, digits, "
			     "'_', '.', '-')", what);
	return 0;
}

/* The node an array task of job runs, "POOL-JOB-TASK", into sb; false when
 * that is no node name (a pool name too long for it). */
static bool task_node_name(const char *pool, const char *job, unsigned task, struct strbuf *sb)
{
	strbuf_reset(sb);
	strbuf_addf(sb, "%s-%s-%u", pool, job, task);
	return spec_name_valid(sb->buf);
}

/* The batch script: the ephemeral agent of one array task. */
static void batch_script(const struct prov_env *env, struct strbuf *sb)
{
	strbuf_addf(sb, "#!/bin/sh\n# yard master: an ephemeral agent of pool %s (request %" PRIu64 ")\n",
		    env->pool, env->request);
	strbuf_addstr(sb, "dir=");
	prov_shell_quote(sb, env->work_dir);
	strbuf_addstr(sb, "\nname=");
	prov_shell_quote(sb, env->pool);
	strbuf_addstr(sb, "-\"$SLURM_ARRAY_JOB_ID-$SLURM_ARRAY_TASK_ID\"\n"
			  "mkdir -p \"$dir\" || exit 1\n");
	prov_shell_quote(sb, env->yard);
	strbuf_addstr(sb, " agent --ephemeral --master ");
	prov_shell_quote(sb, env->master_url);
	if (env->master_pin) {
		strbuf_addstr(sb, " --pin ");
		prov_shell_quote(sb, env->master_pin);
	}
	strbuf_addstr(sb, " --pool ");
	prov_shell_quote(sb, env->pool);
	strbuf_addstr(sb, " --name \"$name\" --work-dir \"$dir/$name\"");
	for (size_t i = 0; i < env->nagent_args; i++) {
		strbuf_addch(sb, ' ');
		prov_shell_quote(sb, env->agent_args[i]);
	}
	/* the agent's log beside its work dir, which goes once it has left */
	strbuf_addstr(sb, " >>\"$dir/$name.log\" 2>&1\nrc=$?\nrm -rf \"$dir/$name\"\nexit $rc\n");
}

/* The job ids of squeue's or sbatch's answer: "4411", "4411;cluster",
 * "4411_0": the job's own id into job (up to the first '_' or ';'). */
static bool job_id_of(const char *line, struct strbuf *job)
{
	size_t n = strspn(line, "0123456789");

	strbuf_reset(job);
	if (!n || n > 19 || (line[n] && !strchr("_;\n", line[n])))
		return false;
	strbuf_add(job, line, n);
	return true;
}

/* made from the array tasks of job: names and ids for tasks[0..n). */
static int made_of(const struct prov_env *env, const char *job, const unsigned *tasks, size_t n,
		   struct prov_made *made, struct errbuf *eb)
{
	struct strbuf name = STRBUF_INIT;
	int ret = 0;

	made->names = xcalloc(n + 1, sizeof(*made->names));
	made->ids = xcalloc(n + 1, sizeof(*made->ids));
	made->external = xstrdup(job);
	for (size_t i = 0; i < n && !ret; i++) {
		if (!task_node_name(env->pool, job, tasks[i], &name)) {
			ret = error(eb, YERR(BAD_REQUEST), "pool '%s': '%s' is no node name (a pool of a Slurm "
				    "provisioner needs a name of at most 40 characters)", env->pool, name.buf);
			break;
		}
		made->names[made->n] = strbuf_detach(&name, NULL);
		made->ids[made->n++] = xasprintf("%s_%u", job, tasks[i]);
	}
	strbuf_release(&name);
	return ret;
}

static int slurm_up(const struct prov_env *env, unsigned count, struct prov_made *made,
		    struct errbuf *eb)
{
	struct strbuf script = STRBUF_INIT, token = STRBUF_INIT, job = STRBUF_INIT;
	char *args[16], *tok_var = NULL, *vars[2] = { NULL, NULL };
	char *name = xasprintf("--job-name=%s", env->tag), *part = xasprintf("--partition=%s", env->arg);
	char *array = xasprintf("--array=0-%u", count ? count - 1 : 0), *time = NULL, *acct = NULL, *qos = NULL;
	unsigned *tasks = xcalloc(count + 1, sizeof(*tasks));
	struct spawn_result res = { 0 };
	size_t n = 0;
	int ret;

	memset(made, 0, sizeof(*made));
	if (strbuf_read_file(&token, env->join_token_file, 4096) < 0) {
		ret = error(eb, yerr_of_errno(errno), "cannot read the join token '%s': %s",
			    env->join_token_file, strerror(errno));
		goto out;
	}
	strbuf_trim(&token);
	tok_var = xasprintf("YARD_JOIN_TOKEN=%s", token.buf);
	vars[0] = tok_var;
	args[n++] = "sbatch";
	args[n++] = "--parsable";
	args[n++] = name;
	args[n++] = part;
	args[n++] = array;
	args[n++] = "--nodes=1";
	args[n++] = "--ntasks=1";
	args[n++] = "--exclusive";
	args[n++] = "--output=/dev/null";
	args[n++] = "--export=YARD_JOIN_TOKEN";
	if (env->time_ms)
		args[n++] = time = xasprintf("--time=%" PRIu64, (env->time_ms + 59999) / 60000);
	if (env->account)
		args[n++] = acct = xasprintf("--account=%s", env->account);
	if (env->qos)
		args[n++] = qos = xasprintf("--qos=%s", env->qos);
	args[n] = NULL;
	batch_script(env, &script);
	ret = prov_run(args, (const char *const *)vars, script.buf, env->cancel, &res, eb);
	if (ret)
		goto out;
	if (!job_id_of(res.out, &job)) {
		ret = error(eb, YERR(UNAVAILABLE), "sbatch answered '%.80s', not a job id", res.out);
		goto out;
	}
	for (unsigned i = 0; i < count; i++)
		tasks[i] = i;
	ret = made_of(env, job.buf, tasks, count, made, eb);
out:
	spawn_result_release(&res);
	strbuf_release(&script);
	strbuf_release(&token);
	strbuf_release(&job);
	free(tok_var);
	free(name);
	free(part);
	free(array);
	free(time);
	free(acct);
	free(qos);
	free(tasks);
	return ret;
}

static int slurm_down(const struct prov_env *env, const char *name, const char *id,
		      struct errbuf *eb)
{
	char *argv[] = { "scancel", (char *)id, NULL };
	struct spawn_result res;
	int ret;

	/* a node whose allocation is not known (one adopted from an agent that
	 * did not say) has nothing to cancel: its agent leaving ends it */
	if (!id || !*id)
		return 0;
	ret = prov_run(argv, NULL, NULL, env->cancel, &res, eb);
	spawn_result_release(&res);
	(void)name;
	return ret;
}

static int slurm_recover(const struct prov_env *env, unsigned count, struct prov_made *made,
			 bool *found, struct errbuf *eb)
{
	char *name = xasprintf("--name=%s", env->tag);
	char *argv[] = { "squeue", "--noheader", "--array", name, "--format=%i", NULL };
	struct strbuf job = STRBUF_INIT, first = STRBUF_INIT;
	unsigned *tasks = xcalloc(count + 1, sizeof(*tasks));
	struct spawn_result res;
	size_t n = 0;
	int ret;

	memset(made, 0, sizeof(*made));
	*found = false;
	ret = prov_run(argv, NULL, NULL, env->cancel, &res, eb);
	for (const char *p = res.out; !ret && p && *p; p += strcspn(p, "\n"), p += *p == '\n') {
		const char *us = strchr(p, '_');
		uint64_t task;
		if (!job_id_of(p, &job) || !us || us > p + strcspn(p, "\n"))
			continue;
		us++;
		if (parse_u64(&us, &task) < 0 || task >= count || n == count)
			continue;
		if (!first.len)
			strbuf_addstr(&first, job.buf);
		if (!strcmp(first.buf, job.buf))
			tasks[n++] = (unsigned)task;
	}
	if (!ret && n) {
		*found = true;
		ret = made_of(env, first.buf, tasks, n, made, eb);
	}
	spawn_result_release(&res);
	strbuf_release(&job);
	strbuf_release(&first);
	free(tasks);
	free(name);
	return ret;
}

static void slurm_describe(const char *arg, const char *external, struct strbuf *sb)
{
	strbuf_addf(sb, "slurm partition %s", arg);
	if (external)
		strbuf_addf(sb, " (job %s)", external);
}

const struct provisioner_ops provision_slurm_ops = {
	.name = "slurm",
	.check = slurm_check,
	.up = slurm_up,
	.down = slurm_down,
	.recover = slurm_recover,
	.describe = slurm_describe,
};
