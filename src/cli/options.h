/*
 * The option parser shared by every CLI command. A command declares its
 * options as an array of struct cli_option; cli_options_parse() walks argv,
 * stores each option's value through its pointer and moves the positional
 * arguments to the front of argv.
 *
 * Accepted forms: "--name value", "--name=value", "-n value", "-f" (flags),
 * "--" ends the options. "-h" and "--help" ask for help.
 */
#ifndef YARD_CLI_OPTIONS_H
#define YARD_CLI_OPTIONS_H

#include <stdio.h>

struct errbuf;

enum cli_opt_kind {
	CLI_OPT_FLAG,   /* no argument; value is an int *, set to 1 */
	CLI_OPT_STRING, /* one argument; value is a const char **, the last one wins */
	CLI_OPT_LIST,   /* one argument, repeatable; value is a struct cli_list * */
};

/* The values of a repeatable option, in the order given. */
struct cli_list {
	const char **items; /* owned array; the strings point into argv */
	size_t nr, alloc;
};

void cli_list_release(struct cli_list *l);

struct cli_option {
	const char *name;        /* long name without dashes: "follow" for --follow */
	char short_name;         /* 'f' for -f, or 0 */
	enum cli_opt_kind kind;  /* whether it takes an argument (and how many times) */
	void *value;             /* where the value goes: see enum cli_opt_kind */
	const char *argname;     /* "URL" in "--master URL"; NULL for flags */
	const char *help;        /* one line, or lines separated by '\n' */
};

/* What cli_options_parse returns besides 0. */
#define CLI_PARSE_HELP 1     /* -h or --help was given: print usage, exit 0 */
#define CLI_PARSE_USAGE 2    /* a usage error, in eb: exit 2 */

/* cli_options_parse parses argv[1..argc-1] (argv[0] is the command name) against two option tables (either may be NULL). Positional
 * arguments are moved to argv[1..] and their count stored in *npos. An
 * unknown option or a missing argument returns CLI_PARSE_USAGE with the
 * first such error in eb ("unknown option '--foo'", YERR(BAD_REQUEST)),
 * after storing every other option it could (so that the caller knows the
 * --output to report it in). argv strings are referenced, not copied. */
int cli_options_parse(const struct cli_option *opts, size_t nopts,
		      const struct cli_option *common, size_t ncommon,
		      int argc, char **argv, int *npos, struct errbuf *eb);

/* cli_options_usage prints "usage: yard SYNOPSIS" and one line per option. */
void cli_options_usage(FILE *out, const char *synopsis, const struct cli_option *opts,
		       size_t nopts, const struct cli_option *common, size_t ncommon);

#endif
