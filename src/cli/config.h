/*
 * Where the master is, how to trust it and who we are: --master/--token/
 * --ca/--pin, else the environment (YARD_MASTER, YARD_TOKEN, YARD_CA,
 * YARD_PIN), else the config file $XDG_CONFIG_HOME/yard/config (default
 * ~/.config/yard/config):
 *
 *   # comments and blank lines are skipped
 *   master = https://10.0.0.1:7420
 *   token = yard_u_...
 *   pin = sha256//...        (or: ca = /path/to/ca.pem)
 *
 * The master may be a comma-separated list, wherever it comes from: the
 * masters sharing one store (`master = https://m1:7420,https://m2:7420`),
 * whose leader httpc finds. The file's ca and pin belong to the file's
 * master(s): they are used only when the master comes from the file too.
 */
#ifndef YARD_CLI_CONFIG_H
#define YARD_CLI_CONFIG_H

#include <stddef.h>

#include "base/error.h"

struct cli_config {
	char *master; /* owned or NULL */
	char *token;  /* owned or NULL */
	char *ca;     /* owned or NULL: CA file that an https master's certificate chains to */
	char *pin;    /* owned or NULL: "sha256//..." of an https master's public key */
};

#define CLI_CONFIG_INIT { NULL, NULL, NULL, NULL }

/* What the user gave on the command line; NULL fields were not given. */
struct cli_config_opts {
	const char *master, *token, *ca, *pin;
};

void cli_config_release(struct cli_config *cfg);

/* cli_config_parse reads config text into cfg; a key already set in cfg is
 * replaced. Unknown keys are ignored (newer CLIs may add some); a line that is
 * not "key = value" fails with YERR(BAD_REQUEST) naming origin and line. */
int cli_config_parse(const char *text, size_t len, const char *origin, struct cli_config *cfg,
		     struct errbuf *eb);

/* cli_config_path: the config file's path (caller frees), or NULL when
 * neither XDG_CONFIG_HOME nor HOME is set. */
char *cli_config_path(void);

/* cli_config_resolve fills cfg by precedence: the options (opts may be
 * NULL), the environment, the config file (a missing file is not an error).
 * A master that is still unknown is left NULL: the caller decides whether it
 * matters. A master list with an entry that is not an http(s) URL
 * (httpc_urls_check), or a ca or pin that is not usable (httpc_tls_check),
 * is an error naming where it came from and the bad entry. */
int cli_config_resolve(const struct cli_config_opts *opts, struct cli_config *cfg,
		       struct errbuf *eb);

#endif
