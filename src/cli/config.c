#include "base/compat.h"
#include "cli/config.h"

#include <ctype.h>

#include "base/strbuf.h"
#include "base/xalloc.h"

void cli_config_release(struct cli_config *cfg)
{
	free(cfg->master);
	free(cfg->token);
	cfg->master = cfg->token = NULL;
}

static void set(char **slot, const char *s, size_t n)
{
	free(*slot);
	*slot = xstrndup(s, n);
}

int cli_config_parse(const char *text, size_t len, const char *origin, struct cli_config *cfg,
		     struct errbuf *eb)
{
	const char *p = text, *end = text + len;
	unsigned lineno = 0;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *s = p, *e = eol ? eol : end, *eq, *ke, *v;

		p = eol ? eol + 1 : end;
		lineno++;
		while (s < e && isspace((unsigned char)*s))
			s++;
		while (e > s && isspace((unsigned char)e[-1]))
			e--;
		if (s == e || *s == '#')
			continue;
		eq = memchr(s, '=', (size_t)(e - s));
		if (!eq)
			return error(eb, YERR(BAD_REQUEST), "'%s' line %u: expected 'key = value'",
				     origin, lineno);
		ke = eq;
		while (ke > s && isspace((unsigned char)ke[-1]))
			ke--;
		v = eq + 1;
		while (v < e && isspace((unsigned char)*v))
			v++;
		if (ke - s == 6 && !strncmp(s, "master", 6))
			set(&cfg->master, v, (size_t)(e - v));
		else if (ke - s == 5 && !strncmp(s, "token", 5))
			set(&cfg->token, v, (size_t)(e - v));
	}
	return 0;
}

char *cli_config_path(void)
{
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");

	if (xdg && *xdg == '/')
		return xasprintf("%s/yard/config", xdg);
	if (home && *home)
		return xasprintf("%s/.config/yard/config", home);
	return NULL;
}

static const char *nonempty(const char *s)
{
	return s && *s ? s : NULL;
}

int cli_config_resolve(const char *opt_master, const char *opt_token, struct cli_config *cfg,
		       struct errbuf *eb)
{
	const char *env_master = nonempty(getenv("YARD_MASTER"));
	const char *env_token = nonempty(getenv("YARD_TOKEN"));
	char *path = NULL;
	struct strbuf text = STRBUF_INIT;
	int ret = 0;

	opt_master = nonempty(opt_master);
	opt_token = nonempty(opt_token);
	if ((!opt_master && !env_master) || (!opt_token && !env_token)) {
		path = cli_config_path();
		if (path && strbuf_read_file(&text, path, 1 << 20) == 0)
			ret = cli_config_parse(text.buf, text.len, path, cfg, eb);
		else if (path && errno != ENOENT)
			ret = error(eb, YERR(IO), "cannot read '%s': %s", path, strerror(errno));
		if (ret)
			goto out;
	}
	if (opt_master || env_master)
		set(&cfg->master, opt_master ? opt_master : env_master,
		    strlen(opt_master ? opt_master : env_master));
	if (opt_token || env_token)
		set(&cfg->token, opt_token ? opt_token : env_token,
		    strlen(opt_token ? opt_token : env_token));
	if (cfg->master && !*cfg->master) {
		free(cfg->master);
		cfg->master = NULL;
	}
out:
	free(path);
	strbuf_release(&text);
	return ret;
}
