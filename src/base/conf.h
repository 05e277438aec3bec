/*
 * A daemon's settings as one table, read from its command line and from a
 * config file (yard master --config FILE, yard agent --config FILE).
 *
 * Every option is a flag and a key of the same name: --data-dir DIR on the
 * command line, "data-dir = DIR" in the file. The file is lines of
 * "key = value"; blank lines and lines whose first non-blank character is
 * '#' are skipped; the value is the rest of the line after the first '=',
 * without the blanks around it (so it may hold '=' and '#'). A repeatable
 * option (CONF_LIST) repeats its key; any other key may be given once.
 *
 * The command line wins over the file, option by option: a list given on
 * the command line replaces the file's list. A reload reads the file again
 * (conf_reload) and keeps the command line's values.
 *
 * Every value is checked where it is read, so that an error names where it
 * came from: "--lease 'x': expected ..." or "'/etc/yard/master.conf' line
 * 4: lease 'x': expected ...".
 */
#ifndef YARD_BASE_CONF_H
#define YARD_BASE_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct errbuf;

enum conf_kind {
	CONF_STRING,   /* const char *: the value */
	CONF_LIST,     /* struct conf_list: every value, in order */
	CONF_BOOL,     /* bool: a flag with no value on the command line; in a file
			* true|false|yes|no|on|off|1|0 */
	CONF_DURATION, /* uint64_t: milliseconds, as parse_duration_str reads them */
};

enum conf_option_flags {
	CONF_RELOAD = 1 << 0,   /* a reload applies a change of it; others need a restart */
	CONF_REQUIRED = 1 << 1, /* the daemon cannot start without it */
};

/* The values of a CONF_LIST option: borrowed from the struct conf. */
struct conf_list {
	const char *const *items;
	size_t n;
};

/* The check of one value. what names the option and where it came from
 * ("--lease", "'FILE' line 4: lease"); the message it leaves in eb starts
 * with it: "%s '%s': expected ...". Returns 0 or a negative YERR. */
typedef int (*conf_check_fn)(const char *what, const char *value, struct errbuf *eb);

struct conf_option {
	const char *name;    /* "data-dir": the flag --data-dir and the key data-dir */
	enum conf_kind kind;
	unsigned flags;      /* enum conf_option_flags */
	size_t offset;       /* where conf_apply() writes it in the daemon's config struct */
	conf_check_fn check; /* NULL: any text (a duration: any duration) */
	const char *argname; /* "DIR" in "--data-dir DIR"; NULL for a bool */
	const char *help;    /* one line, or lines separated by '\n' */
};

/* The values one source (the command line, or the file) gave an option. */
struct conf_values {
	char **items; /* owned copies */
	size_t n, alloc;
	unsigned line; /* the file's line of the last one (0: the command line) */
};

struct conf {
	const char *role;            /* "master": how messages and the usage name the daemon */
	const struct conf_option *opts;
	size_t nopts;
	char *file;                  /* --config FILE (owned), or NULL */
	struct conf_values *args;    /* per option: what the command line gave */
	struct conf_values *keys;    /* per option: what the file gave */
};

void conf_init(struct conf *c, const char *role, const struct conf_option *opts, size_t nopts);
void conf_release(struct conf *c);

/* What conf_parse_args returns besides 0 and errors. */
#define CONF_HELP 1 /* -h or --help was given: print conf_usage, exit 0 */

/* conf_parse_args reads argv[1..argc-1] ("--name VALUE", "--name=VALUE",
 * "--flag", "--config FILE"), then the config file if one was given. An
 * unknown option, a missing value, a bad value, or any error of the file
 * fails (YERR(BAD_REQUEST); an unreadable file YERR(IO)) with the message
 * in eb. argv strings are copied. */
int conf_parse_args(struct conf *c, int argc, char **argv, struct errbuf *eb);

/* conf_load: conf_parse_args, then conf_apply into target; -h or --help
 * prints conf_usage on stdout and returns CONF_HELP. What a daemon's main
 * calls. */
int conf_load(struct conf *c, int argc, char **argv, void *target, struct errbuf *eb);

/* conf_parse_file reads text as the config file named origin into the
 * file's values of c (replacing them only when all of it is good): an
 * unknown key, a line that is not "key = value", a key given twice that is
 * not a list, a value that fails its check: an error naming origin, the
 * line and the reason. */
int conf_parse_file(struct conf *c, const char *text, size_t len, const char *origin,
		    struct errbuf *eb);

/* conf_reload reads c->file again into the file's values; on error they
 * are unchanged. */
int conf_reload(struct conf *c, struct errbuf *eb);

/* conf_clone: dst (not initialised) gets src's table, command line and
 * file name but no file values: what a reload reads the file into, to
 * take only what it applies (conf_take_keys). Release dst. */
void conf_clone(struct conf *dst, const struct conf *src);

/* conf_take_keys moves the file's values of option opt from src into c. */
void conf_take_keys(struct conf *c, struct conf *src, size_t opt);

/* conf_apply writes every option's value into the struct at target, at
 * each option's offset: the command line's, else the file's; an option
 * neither gave is left as it is (the caller's default). The strings are
 * borrowed from c: valid until its next reload or release. Fails, naming
 * it, when a CONF_REQUIRED option has no value. */
int conf_apply(const struct conf *c, void *target, struct errbuf *eb);

/* conf_value_text: the value an option has now, as one text ("a, b" for a
 * list; "" when none): how a reload tells what changed. Caller frees. */
char *conf_value_text(const struct conf *c, size_t opt);

/* conf_key_text: conf_value_text of the file's values alone. */
char *conf_key_text(const struct conf *c, size_t opt);

/* conf_usage prints "usage: yard ROLE [--config FILE] [options]" and a line
 * per option. */
void conf_usage(const struct conf *c, FILE *out);

/* One "key = value" line of config text, as both config readers (this
 * one and the CLI's) split it. */
struct conf_line {
	const char *key, *value; /* into the text; not terminated */
	size_t keylen, valuelen;
	unsigned lineno;         /* from 1 */
};

/* conf_next_line: the next key = value line of text[*pos..len) (comments
 * and blank lines skipped) into *out, advancing *pos and *lineno; 1 when
 * there was one, 0 at the end, or an error naming origin and the line for
 * a line without '=' or with an empty key. */
int conf_next_line(const char *text, size_t len, size_t *pos, unsigned *lineno,
		   const char *origin, struct conf_line *out, struct errbuf *eb);

#endif
