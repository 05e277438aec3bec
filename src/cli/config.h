/*
 * Where the master is and who we are: --master/--token, else the
 * environment (YARD_MASTER, YARD_TOKEN), else the config file
 * $XDG_CONFIG_HOME/yard/config (default ~/.config/yard/config):
 *
 *   # comments and blank lines are skipped
 *   master = http://10.0.0.1:7420
 *   token = yard_u_...
 */
#ifndef YARD_CLI_CONFIG_H
#define YARD_CLI_CONFIG_H

#include <stddef.h>

#include "base/error.h"

struct cli_config {
	char *master; /* owned or NULL */
	char *token;  /* owned or NULL */
};

#define CLI_CONFIG_INIT { NULL, NULL }

void cli_config_release(struct cli_config *cfg);

/* cli_config_parse reads config text into cfg; a key already set in cfg is
 * replaced. Unknown keys are ignored (newer CLIs may add some); a line that is
 * not "key = value" fails with YERR(BAD_REQUEST) naming origin and line. */
int cli_config_parse(const char *text, size_t len, const char *origin, struct cli_config *cfg,
		     struct errbuf *eb);

/* cli_config_path: the config file's path (caller frees), or NULL when
 * neither XDG_CONFIG_HOME nor HOME is set. */
char *cli_config_path(void);

/* cli_config_resolve fills cfg by precedence: the options (may be NULL), the
 * environment, the config file (a missing file is not an error). A master
 * that is still unknown is left NULL: the caller decides whether it matters. */
int cli_config_resolve(const char *opt_master, const char *opt_token, struct cli_config *cfg,
		       struct errbuf *eb);

#endif
