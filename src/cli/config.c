#include "base/compat.h"
#include "cli/config.h"

#include <ctype.h>

#include "base/conf.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/httpc.h"

void cli_config_release(struct cli_config *cfg)
{
	free(cfg->master);
	free(cfg->token);
	free(cfg->ca);
	free(cfg->pin);
	cfg->master = cfg->token = cfg->ca = cfg->pin = NULL;
}

static void set(char **slot, const char *s, size_t n)
{
	free(*slot);
	*slot = xstrndup(s, n);
}

int cli_config_parse(const char *text, size_t len, const char *origin, struct cli_config *cfg,
		     struct errbuf *eb)
{
	static const struct {
		const char *key;
		size_t offset;
	} keys[] = {
		{ "master", offsetof(struct cli_config, master) },
		{ "token", offsetof(struct cli_config, token) },
		{ "ca", offsetof(struct cli_config, ca) },
		{ "pin", offsetof(struct cli_config, pin) },
	};
	struct conf_line l;
	size_t pos = 0;
	unsigned lineno = 0;
	int ret;

	while ((ret = conf_next_line(text, len, &pos, &lineno, origin, &l, eb)) == 1)
		for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
			if (strlen(keys[i].key) == l.keylen && !strncmp(keys[i].key, l.key, l.keylen))
				set((char **)(void *)((char *)cfg + keys[i].offset), l.value, l.valuelen);
	return ret;
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

/* The first given of an option and a variable; *from (may be NULL) gets
 * the name of the one that was. */
static const char *pick(const char *opt, const char *opt_name, const char *var, const char **from)
{
	const char *v = nonempty(opt) ? opt : nonempty(getenv(var));

	if (v && from)
		*from = v == opt ? opt_name : var;
	return v;
}

int cli_config_resolve(const struct cli_config_opts *opts, struct cli_config *cfg,
		       struct errbuf *eb)
{
	static const struct cli_config_opts none;
	const char *from_ca = "the config file's ca", *from_pin = "the config file's pin";
	const char *from_master = "the config file's master";
	const char *master, *token, *ca, *pin;
	char *path = NULL;
	struct strbuf text = STRBUF_INIT;
	int ret = 0;

	if (!opts)
		opts = &none;
	master = pick(opts->master, "--master", "YARD_MASTER", &from_master);
	token = pick(opts->token, "--token", "YARD_TOKEN", NULL);
	if (!master || !token) {
		path = cli_config_path();
		if (path && strbuf_read_file(&text, path, 1 << 20) == 0)
			ret = cli_config_parse(text.buf, text.len, path, cfg, eb);
		else if (path && errno != ENOENT)
			ret = error(eb, YERR(IO), "cannot read '%s': %s", path, strerror(errno));
		if (ret)
			goto out;
	}
	if (master) {
		/* the file's trust is for the file's master, not this one */
		free(cfg->ca);
		free(cfg->pin);
		cfg->ca = cfg->pin = NULL;
		set(&cfg->master, master, strlen(master));
	}
	if (token)
		set(&cfg->token, token, strlen(token));
	if ((ca = pick(opts->ca, "--ca", "YARD_CA", &from_ca)))
		set(&cfg->ca, ca, strlen(ca));
	if ((pin = pick(opts->pin, "--pin", "YARD_PIN", &from_pin)))
		set(&cfg->pin, pin, strlen(pin));
	if (cfg->master && !*cfg->master) {
		free(cfg->master);
		cfg->master = NULL;
	}
	if (cfg->ca && !*cfg->ca) {
		free(cfg->ca);
		cfg->ca = NULL;
	}
	if (cfg->pin && !*cfg->pin) {
		free(cfg->pin);
		cfg->pin = NULL;
	}
	if (cfg->master && (ret = httpc_urls_check(cfg->master, from_master, eb)))
		goto out;
	ret = httpc_tls_check(&(struct httpc_tls){ cfg->ca, cfg->pin }, from_ca, from_pin, eb);
out:
	free(path);
	strbuf_release(&text);
	return ret;
}
