/*
 * `yard admin`: an operator's commands, one table of subcommands. backup
 * and restore run on the master's host, beside the master, as
 * `gitlab-backup` or `pg_dump` are run, reading where the master keeps its
 * state from the options `yard master` takes for it (or its config file);
 * reload is a client of the running master, from anywhere, with an admin's
 * token.
 */
#include "base/compat.h"
#include "admin.h"

#include "base/error.h"
#include "base/xalloc.h"
#include "cli/cli.h"
#include "cli/options.h"
#include "master/backup.h"
#include "master/master.h"
#include "master/store.h"

/*
 * Parses argv of a subcommand: its own options (opts) and the master's
 * settings into *s; OUT *npos the positional arguments, moved to argv[1..].
 * Returns -1 to go on, or the exit status (help printed: 0; a usage error
 * printed: 2).
 */
static int parse(int argc, char **argv, const char *synopsis, const struct cli_option *opts, size_t nopts,
		 struct backup_settings *s, struct conf *master, int *npos)
{
	const char *config = NULL;
	/* where the master keeps its state, as `yard master` takes it */
	const struct cli_option settings[] = {
		{ "config", 0, CLI_OPT_STRING, &config, "FILE",
		  "the master's config file (its --config): its data-dir and store" },
		{ "data-dir", 0, CLI_OPT_STRING, &s->data_dir, "DIR", "the master's data dir (its --data-dir)" },
		{ "store", 0, CLI_OPT_STRING, &s->store, "CONNINFO",
		  "the master's PostgreSQL store (its --store); default: SQLite in DIR" },
	};
	struct errbuf eb = ERRBUF_INIT;
	int rc = cli_options_parse(opts, nopts, settings, ARRAY_SIZE(settings), argc, argv, npos, &eb);

	if (rc == CLI_PARSE_HELP) {
		cli_options_usage(stdout, synopsis, opts, nopts, settings, ARRAY_SIZE(settings));
		return 0;
	}
	if (rc == 0 && config) {
		/* the master's own file, read by its own table; a flag here wins over it */
		char *args[] = { "master", "--config", (char *)config, NULL };
		struct master_config cfg = { 0 };
		if (!conf_parse_args(master, 3, args, &eb) && !conf_apply(master, &cfg, &eb)) {
			if (!s->data_dir)
				s->data_dir = cfg.data_dir;
			if (!s->store)
				s->store = cfg.store;
		}
	}
	if (rc == 0 && !s->data_dir)
		error(&eb, YERR(BAD_REQUEST), "--data-dir is required: the master's data dir");
	if (rc == 0 && s->data_dir && !*s->data_dir)
		error(&eb, YERR(BAD_REQUEST), "--data-dir '': expected a directory");
	if (rc == 0 && s->store && !*s->store)
		error(&eb, YERR(BAD_REQUEST), "--store '': expected a PostgreSQL connection string");
	if (rc || eb.code) {
		fprintf(stderr, "yard %s: %s\n", argv[0], eb.msg);
		if (config && eb.code && eb.code != YERR(BAD_REQUEST))
			return 1;
		cli_options_usage(stderr, synopsis, opts, nopts, settings, ARRAY_SIZE(settings));
		return 2;
	}
	return -1;
}

/* A size for people: bytes, KiB, MiB or GiB. */
static void human(uint64_t n, char out[32])
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	size_t u = 0;

	if (n < 1024) {
		snprintf(out, 32, "%" PRIu64 " bytes", n);
		return;
	}
	for (v /= 1024; v >= 1024 && u + 1 < ARRAY_SIZE(units); u++)
		v /= 1024;
	snprintf(out, 32, "%.1f %s", v, units[u]);
}

static int admin_backup(int argc, char **argv, struct conf *master)
{
	struct backup_settings s = { 0 };
	struct backup_report rep;
	struct errbuf eb = ERRBUF_INIT;
	char bytes[32], store[32], archive[32];
	int npos, rc = parse(argc, argv, "admin backup FILE --config FILE | --data-dir DIR [--store CONNINFO]\n\n"
				 "Copies the master's store (as of one moment), then its logs, code, dataset\n"
				 "chunks, token files and tls/, into the new archive FILE, while the master runs.\n"
				 "FILE.gz or .tgz: gzip, FILE.zst: zstd, anything else: an uncompressed tar.",
			     NULL, 0, &s, master, &npos);

	if (rc >= 0)
		return rc;
	if (npos != 1) {
		fprintf(stderr, "yard admin backup: expected one FILE, got %d arguments\n", npos);
		return 2;
	}
	if (backup_create(&s, argv[1], &rep, &eb)) {
		fprintf(stderr, "yard admin backup: %s\n", eb.msg);
		return 1;
	}
	human(rep.bytes, bytes);
	human(rep.store_bytes, store);
	human(rep.archive_bytes, archive);
	printf("yard admin backup: wrote '%s' (%s) in %.1f s: the %s store at schema version %" PRId64
	       " (%s) and %" PRIu64 " files, %s in all\n",
	       argv[1], archive, rep.seconds, rep.store, rep.schema_version, store, rep.files, bytes);
	return 0;
}

static int admin_restore(int argc, char **argv, struct conf *master)
{
	struct backup_settings s = { 0 };
	struct backup_report rep;
	struct errbuf eb = ERRBUF_INIT;
	int force = 0;
	const struct cli_option opts[] = {
		{ "force", 0, CLI_OPT_FLAG, &force, NULL,
		  "replace the state the data dir (or database) holds: it is moved aside,\n"
		  "into DIR/before-restore-TIME (PostgreSQL: the schema of that name)" },
	};
	char bytes[32];
	int npos, rc = parse(argc, argv, "admin restore FILE --config FILE | --data-dir DIR [--store CONNINFO] [--force]\n\n"
				 "Brings the backup FILE back as the state of a master that is stopped: the\n"
				 "archive is checked whole first; a store of an older schema is upgraded when\n"
				 "the master starts.",
			     opts, ARRAY_SIZE(opts), &s, master, &npos);

	if (rc >= 0)
		return rc;
	if (npos != 1) {
		fprintf(stderr, "yard admin restore: expected one FILE, got %d arguments\n", npos);
		return 2;
	}
	if (backup_restore(&s, argv[1], force, &rep, &eb)) {
		fprintf(stderr, "yard admin restore: %s\n", eb.msg);
		return 1;
	}
	human(rep.bytes, bytes);
	printf("yard admin restore: restored '%s' (made %s by yard %s) in %.1f s: the %s store at schema"
	       " version %" PRId64 " and %" PRIu64 " files, %s in all\n",
	       argv[1], rep.created_at, rep.yard_version, rep.seconds, rep.store, rep.schema_version, rep.files,
	       bytes);
	if (rep.aside[0])
		printf("yard admin restore: the state it replaced is kept in '%s/%s'%s\n", s.data_dir, rep.aside,
		       s.store ? " and in the database's schema of that name" : "");
	if (rep.schema_version < STORE_SCHEMA_VERSION)
		printf("yard admin restore: the master upgrades the store from schema version %" PRId64
		       " to %d when it starts\n", rep.schema_version, STORE_SCHEMA_VERSION);
	return 0;
}

/* reload is a client of the running master, as the CLI's commands are */
static int admin_reload(int argc, char **argv, struct conf *master)
{
	return cli_main(argc, argv);
}

/* The subcommands: one line each. */
static const struct admin_command {
	const char *name;
	/* argv[0] is the subcommand; master is for the master's config file
	 * (--config), released by the caller; returns the exit status */
	int (*fn)(int argc, char **argv, struct conf *master);
	const char *help;
} commands[] = {
	{ "backup", admin_backup, "copy the master's store, logs and blobs into one archive, while it runs" },
	{ "restore", admin_restore, "bring a backup back as the state of a stopped master" },
	{ "reload", admin_reload, "make the running master read its config file again (any host, an admin's token)" },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: yard admin COMMAND [options]\n\ncommands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].help);
	fprintf(out, "\nRun 'yard admin COMMAND --help' for its options.\n");
}

int cmd_admin(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (!strcmp(argv[1], commands[i].name)) {
			char *sub = xasprintf("admin %s", argv[1]), *saved = argv[1];
			size_t n;
			const struct conf_option *opts = master_conf_options(&n);
			struct conf master;
			int rc;
			conf_init(&master, "master", opts, n);
			argv[1] = sub;
			rc = commands[i].fn(argc - 1, argv + 1, &master);
			argv[1] = saved;
			free(sub);
			conf_release(&master);
			return rc;
		}
	fprintf(stderr, "yard admin: '%s' is not an admin command\n\n", argv[1]);
	usage(stderr);
	return 2;
}
