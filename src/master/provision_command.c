/*
 * The command provisioner (provision.h): an admin's script, the way cloud
 * VMs (and the seeds' hybrid cloud) plug in. `SCRIPT up POOL COUNT` asks
 * for COUNT nodes and prints the name of each node it asked for, one a
 * line: the names their agents register with. `SCRIPT down NODE` removes
 * one, and must succeed for a node that is gone already. Both run with the
 * master's environment plus YARD_MASTER (where the new agents reach the
 * master), YARD_POOL, YARD_REQUEST (the request's id) and YARD_REQUEST_TAG
 * (its name, unique to this master's store), YARD_JOIN_TOKEN_FILE (the
 * join token's file) and, for an https master, YARD_PIN.
 */
#include "base/compat.h"
#include "master/provision.h"

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "master/provision_run.h"

static int command_check(const char *what, const char *arg, struct errbuf *eb)
{
	if (arg[0] != '/')
		return error(eb, YERR(BAD_REQUEST), "%s: expected command:/ABSOLUTE/PATH of a script", what);
	if (access(arg, X_OK))
		return error(eb, YERR(BAD_REQUEST), "%s: script '%s': %s", what, arg, strerror(errno));
	return 0;
}

/* The variables the script gets (NULL-terminated; caller frees each). */
static char **command_vars(const struct prov_env *env)
{
	char **v = xcalloc(8, sizeof(*v));
	size_t n = 0;

	v[n++] = xasprintf("YARD_MASTER=%s", env->master_url);
	v[n++] = xasprintf("YARD_POOL=%s", env->pool);
	v[n++] = xasprintf("YARD_REQUEST=%" PRIu64, env->request);
	v[n++] = xasprintf("YARD_REQUEST_TAG=%s", env->tag);
	v[n++] = xasprintf("YARD_JOIN_TOKEN_FILE=%s", env->join_token_file);
	if (env->master_pin)
		v[n++] = xasprintf("YARD_PIN=%s", env->master_pin);
	return v;
}

static void vars_free(char **v)
{
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

static int command_up(const struct prov_env *env, unsigned count, struct prov_made *made,
		      struct errbuf *eb)
{
	char n[16], **vars = command_vars(env);
	char *argv[] = { (char *)env->arg, "up", (char *)env->pool, n, NULL };
	struct spawn_result res;
	int ret;

	memset(made, 0, sizeof(*made));
	snprintf(n, sizeof(n), "%u", count);
	ret = prov_run(argv, (const char *const *)vars, NULL, env->cancel, &res, eb);
	vars_free(vars);
	if (res.out) {
		/* what it printed was asked for, also when it failed after: the
		 * master tracks those nodes, so that they are released */
		struct errbuf peb = ERRBUF_INIT;
		if (prov_parse_names(res.out, PROV_NAMES_MAX, &made->names, &made->n, &peb) && !ret)
			ret = error(eb, YERR(UNAVAILABLE), "'%s up %s %u' printed %s", env->arg, env->pool,
				    count, peb.msg);
		else if (!made->n && !ret)
			ret = error(eb, YERR(UNAVAILABLE), "'%s up %s %u' printed no node name", env->arg,
				    env->pool, count);
		made->ids = xcalloc(made->n + 1, sizeof(*made->ids));
	}
	spawn_result_release(&res);
	return ret;
}

static int command_down(const struct prov_env *env, const char *name, const char *id,
			struct errbuf *eb)
{
	char **vars = command_vars(env);
	char *argv[] = { (char *)env->arg, "down", (char *)name, NULL };
	struct spawn_result res;
	int ret = prov_run(argv, (const char *const *)vars, NULL, env->cancel, &res, eb);

	vars_free(vars);
	spawn_result_release(&res);
	(void)id;
	return ret;
}

static void command_describe(const char *arg, const char *external, struct strbuf *sb)
{
	strbuf_addf(sb, "command %s", arg);
	(void)external;
}

const struct provisioner_ops provision_command_ops = {
	.name = "command",
	.check = command_check,
	.up = command_up,
	.down = command_down,
	.recover = NULL, /* a script cannot say: the nodes' registrations will */
	.describe = command_describe,
};
