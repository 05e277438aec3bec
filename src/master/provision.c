/* What the provisioners share (provision.h): the table of backends, their
 * output's node names, and running their programs. */
#include "base/compat.h"
#include "master/provision.h"

#include <sys/wait.h>

#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/spec.h"
#include "master/provision_run.h"

static const struct provisioner_ops *const backends[] = { &provision_command_ops, &provision_slurm_ops };

const struct provisioner_ops *provisioner_find(const char *kind, size_t len)
{
	for (size_t i = 0; i < ARRAY_SIZE(backends); i++)
		if (strlen(backends[i]->name) == len && !strncmp(backends[i]->name, kind, len))
			return backends[i];
	return NULL;
}

void prov_made_release(struct prov_made *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->names[i]);
		free(m->ids[i]);
	}
	free(m->names);
	free(m->ids);
	free(m->external);
	memset(m, 0, sizeof(*m));
}

static void names_free(char ***names, size_t *n)
{
	for (size_t i = 0; i < *n; i++)
		free((*names)[i]);
	free(*names);
	*names = NULL;
	*n = 0;
}

int prov_parse_names(const char *text, size_t max, char ***names, size_t *n, struct errbuf *eb)
{
	const char *p = text;
	unsigned line = 0;
	int ret = 0;

	*names = NULL;
	*n = 0;
	while (*p && !ret) {
		size_t len = strcspn(p, "\n");
		char *name = xstrndup(p, len);
		size_t end = len;

		line++;
		p += len + (p[len] == '\n');
		while (end && (name[end - 1] == '\r' || name[end - 1] == ' ' || name[end - 1] == '\t'))
			name[--end] = 0;
		if (!end) {
			free(name);
			continue;
		}
		if (!spec_name_valid(name))
			ret = error(eb, YERR(BAD_REQUEST),
				    "line %u: '%.80s' is not a node name ([a-z0-9][a-z0-9_.-]{0,62})", line, name);
		else if (*n == max)
			ret = error(eb, YERR(BAD_REQUEST), "line %u: more than the %zu node names asked for",
				    line, max);
		for (size_t i = 0; i < *n && !ret; i++)
			if (!strcmp((*names)[i], name))
				ret = error(eb, YERR(BAD_REQUEST), "line %u: node '%s' a second time", line, name);
		if (ret) {
			free(name);
			break;
		}
		*names = xrealloc(*names, (*n + 1) * sizeof(**names));
		(*names)[(*n)++] = name;
	}
	if (ret)
		names_free(names, n);
	return ret;
}

void prov_shell_quote(struct strbuf *sb, const char *s)
{
	strbuf_addch(sb, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			strbuf_addstr(sb, "'\\''");
		else
			strbuf_addch(sb, *s);
	}
	strbuf_addch(sb, '\'');
}

/* The last line or so of what a program said, for a message. */
static void tail_of(const char *text, size_t len, struct strbuf *sb)
{
	size_t start = len > 300 ? len - 300 : 0;

	while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
		len--;
	for (size_t i = start; i < len; i++)
		strbuf_addch(sb, text[i] == '\n' ? ' ' : (unsigned char)text[i] < 0x20 ? '?' : text[i]);
}

int prov_run(char *const *argv, const char *const *vars, const char *input, const volatile int *cancel,
	     struct spawn_result *res, struct errbuf *eb)
{
	extern char **environ;
	struct strbuf what = STRBUF_INIT, msg = STRBUF_INIT;
	struct spawn_opts o;
	size_t nenv = 0, nvars = 0;
	char **env;
	int ret, child_errno = 0;

	for (char **e = environ; *e; e++)
		nenv++;
	while (vars && vars[nvars])
		nvars++;
	env = xcalloc(nenv + nvars + 1, sizeof(*env));
	nenv = 0;
	for (char **e = environ; *e; e++) {
		bool ours = false;
		for (size_t v = 0; v < nvars && !ours; v++) {
			size_t k = strcspn(vars[v], "=");
			ours = !strncmp(*e, vars[v], k + 1);
		}
		if (!ours)
			env[nenv++] = *e;
	}
	for (size_t v = 0; v < nvars; v++)
		env[nenv++] = (char *)vars[v];
	for (size_t i = 0; argv[i]; i++)
		strbuf_addf(&what, "%s%s", i ? " " : "", argv[i]);
	spawn_opts_init(&o);
	o.argv = argv;
	o.env = env;
	o.flags = SPAWN_SEARCH_PATH;
	ret = spawn_run(&o, input, input ? strlen(input) : 0, PROV_RUN_TIMEOUT_MS, cancel, 65536, res,
			&child_errno, eb);
	if (ret) {
		if (child_errno == ENOENT)
			error(eb, YERR(UNAVAILABLE), "cannot run '%s': not found", argv[0]);
		goto out;
	}
	if (res->timed_out || res->cancelled) {
		ret = error(eb, YERR(UNAVAILABLE), "'%s' %s", what.buf,
			    res->cancelled ? "was stopped: the master is stopping"
					   : "took longer than 120 s and was killed");
	} else if (!WIFEXITED(res->status) || WEXITSTATUS(res->status)) {
		tail_of(res->err, res->err_len, &msg);
		if (!msg.len)
			tail_of(res->out, res->out_len, &msg);
		if (WIFEXITED(res->status))
			ret = error(eb, YERR(UNAVAILABLE), "'%s' failed (exit %d)%s%s", what.buf,
				    WEXITSTATUS(res->status), msg.len ? ": " : "", msg.buf);
		else
			ret = error(eb, YERR(UNAVAILABLE), "'%s' was killed by signal %d%s%s", what.buf,
				    WIFSIGNALED(res->status) ? WTERMSIG(res->status) : 0,
				    msg.len ? ": " : "", msg.buf);
	}
out:
	free(env);
	strbuf_release(&what);
	strbuf_release(&msg);
	return ret;
}
