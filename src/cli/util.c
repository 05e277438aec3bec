#include "base/compat.h"

#include "base/clock.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/cli.h"
#include "cli/cmd.h"
#include "common/state.h"

/*
 * report is the one place the CLI shows an error. With --output json it is
 * {"error": {"code": CODE, "message": MSG, "field": FIELD or null}} on stdout
 * (a script reads one stream, as for answers); else "PREFIX: MSG" and the
 * hint line, if any, on stderr. msg may be NULL: CODE's default message.
 */
static void report(const struct cli_ctx *ctx, const char *code, const char *field,
		   const char *prefix, const char *msg, const char *hint)
{
	if (ctx->json) {
		json_t *doc = json_pack("{s:{s:s, s:s, s:o}}", "error", "code", code, "message", msg,
					"field", field && *field ? json_string(field) : json_null());
		cli_print_json(doc);
		json_decref(doc);
		return;
	}
	fprintf(stderr, "%s: %s\n", prefix, msg);
	if (hint)
		fprintf(stderr, "%s\n", hint);
}

/* usage_report: a usage error, exit status EXIT_USAGE. */
static int usage_report(const struct cli_ctx *ctx, const char *msg, const char *hint)
{
	char prefix[64], see[96];
	snprintf(prefix, sizeof(prefix), "yard %s", ctx->cmd);
	snprintf(see, sizeof(see), "(see 'yard %s --help')", ctx->cmd);
	report(ctx, "usage", NULL, prefix, msg, hint ? hint : see);
	return EXIT_USAGE;
}

/* --output csv: cli_table_print writes CSV (one process runs one command). */
static bool table_csv;

int cli_parse(struct cli_ctx *ctx, const char *synopsis, const struct cli_option *opts,
	      size_t nopts, int argc, char **argv, int *npos)
{
	const struct cli_option common[] = {
		{ "master", 0, CLI_OPT_STRING, &ctx->opt_master, "URL[,URL...]",
		  "the master's URL, or a comma list of masters sharing a store, whose\n"
		  "leader is found (default: $YARD_MASTER, then the config file)" },
		{ "token", 0, CLI_OPT_STRING, &ctx->opt_token, "TOKEN",
		  "the API token (default: $YARD_TOKEN, then the config file)" },
		{ "ca", 0, CLI_OPT_STRING, &ctx->opt_ca, "FILE",
		  "trust an https master whose certificate chains to FILE (default: $YARD_CA)" },
		{ "pin", 0, CLI_OPT_STRING, &ctx->opt_pin, "PIN",
		  "trust an https master by its key's pin, sha256//... (default: $YARD_PIN)" },
		{ "output", 'o', CLI_OPT_STRING, &ctx->opt_output, "FORMAT",
		  "'json' prints the server's JSON instead of text, and errors as\n"
		  "{\"error\": {\"code\", \"message\", \"field\"}} on stdout; 'csv' prints\n"
		  "a table as CSV (RFC 4180), its header first" },
	};
	struct errbuf eb = ERRBUF_INIT;
	int rc;

	rc = cli_options_parse(opts, nopts, common, ARRAY_SIZE(common), argc, argv, npos, &eb);
	if (rc == CLI_PARSE_HELP) {
		cli_options_usage(stdout, synopsis, opts, nopts, common, ARRAY_SIZE(common));
		return EXIT_OK;
	}
	/* --output first: the errors below are reported in it */
	ctx->json = ctx->opt_output && !strcmp(ctx->opt_output, "json");
	if (rc)
		return usage_report(ctx, eb.msg, NULL);
	table_csv = ctx->opt_output && !strcmp(ctx->opt_output, "csv");
	if (ctx->opt_output && !ctx->json && !table_csv && strcmp(ctx->opt_output, "text"))
		return cli_usage_error(ctx, "unknown output format '%s' (json, csv or text)",
				       ctx->opt_output);
	if (!(ctx->flags & NEED_MASTER))
		return -1;
	struct cli_config_opts given = { ctx->opt_master, ctx->opt_token, ctx->opt_ca,
					  ctx->opt_pin };
	if (cli_config_resolve(&given, &ctx->cfg, &eb) < 0) {
		report(ctx, "usage", eb.field, "yard", eb.msg, NULL);
		return EXIT_USAGE;
	}
	if (!ctx->cfg.master)
		return usage_report(ctx, "no master given",
				    "hint: pass --master URL, set YARD_MASTER, or put 'master = URL' "
				    "in ~/.config/yard/config");
	client_open(&ctx->client, ctx->cfg.master, &(struct httpc_tls){ ctx->cfg.ca, ctx->cfg.pin },
		    ctx->cfg.token);
	ctx->has_client = true;
	return -1;
}

int cli_finish(int status)
{
	int err = fflush(stdout) ? errno : 0;
	bool earlier = ferror(stdout); /* a write before failed: its writer said why */

	if (fclose(stdout) && !err)
		err = errno;
	if (!err && !earlier)
		return status;
	if (err && err != EPIPE)
		fprintf(stderr, "yard: cannot write output: %s\n", strerror(err));
	return status ? status : 1;
}

int cli_run(const struct cli_command *c, int argc, char **argv)
{
	struct cli_ctx ctx;
	int status;

	memset(&ctx, 0, sizeof(ctx));
	ctx.cmd = c->name;
	ctx.flags = c->flags;
	status = c->fn(&ctx, argc, argv);
	if (ctx.has_client)
		client_close(&ctx.client);
	cli_config_release(&ctx.cfg);
	return status;
}

int cli_usage_error(struct cli_ctx *ctx, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return usage_report(ctx, msg, NULL);
}

int cli_fail(struct cli_ctx *ctx, const struct errbuf *eb)
{
	const char *msg = eb->msg[0] ? eb->msg : yerr_default_message(eb->code);
	size_t flen = strlen(eb->field);

	if (eb->code == YERR(INVALID_SPEC)) {
		/* the message starts with the field's path; add it when it does not */
		struct strbuf full = STRBUF_INIT;
		if (flen && strncmp(msg, eb->field, flen))
			strbuf_addf(&full, "%s: %s", eb->field, msg);
		else
			strbuf_addstr(&full, msg);
		report(ctx, yerr_code_str(eb->code), eb->field, "yard: invalid spec", full.buf, NULL);
		strbuf_release(&full);
		return EXIT_USAGE;
	}
	report(ctx, yerr_code_str(eb->code), eb->field, "yard", msg, NULL);
	return EXIT_FAIL;
}

int cli_parse_job(struct cli_ctx *ctx, const char *synopsis, const struct cli_option *opts,
		  size_t nopts, int argc, char **argv, uint64_t *id)
{
	int npos, rc = cli_parse(ctx, synopsis, opts, nopts, argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 1)
		return cli_usage_error(ctx, "expected one job id");
	if (parse_u64_str(argv[1], id) < 0 || *id == 0)
		return cli_usage_error(ctx, "'%s' is not a job id", argv[1]);
	return -1;
}

int cli_parse_jobs(struct cli_ctx *ctx, const char *synopsis, const struct cli_option *opts,
		   size_t nopts, int argc, char **argv, bool none_ok, int *npos)
{
	uint64_t id;
	int rc = cli_parse(ctx, synopsis, opts, nopts, argc, argv, npos);

	if (rc >= 0)
		return rc;
	if (*npos < 1 && !none_ok)
		return cli_usage_error(ctx, "expected one or more job ids");
	for (int i = 1; i <= *npos; i++)
		if (parse_u64_str(argv[i], &id) < 0 || !id)
			return cli_usage_error(ctx, "'%s' is not a job id", argv[i]);
	return -1;
}

int cli_experiment_id(struct cli_ctx *ctx, const char *opt, uint64_t *id)
{
	*id = 0;
	if (opt && (parse_u64_str(opt, id) < 0 || !*id))
		return cli_usage_error(ctx, "--experiment expects an experiment id, got '%s'", opt);
	return -1;
}

void cli_print_json(const json_t *doc)
{
	if (doc)
		json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	else
		fputs("null", stdout);
	fputc('\n', stdout);
}

const char *cli_jstr(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? s : "-";
}

int64_t cli_jint(const json_t *obj, const char *key)
{
	return json_integer_value(json_object_get(obj, key));
}

char *cli_reason(const json_t *reason)
{
	const char *code = json_string_value(json_object_get(reason, "code"));
	const char *msg = json_string_value(json_object_get(reason, "message"));

	if (!json_is_object(reason) || (!code && !msg))
		return xstrdup("-");
	if (code && msg && *msg)
		return xasprintf("%s: %s", code, msg);
	return xstrdup(code ? code : msg);
}

/* s seconds (>= 0) as "45s", "12m", "3h" or "5d", after prefix. */
static void span_text(const char *prefix, int64_t s, char *buf, size_t len)
{
	if (s < 120)
		snprintf(buf, len, "%s%" PRId64 "s", prefix, s);
	else if (s < 120 * 60)
		snprintf(buf, len, "%s%" PRId64 "m", prefix, s / 60);
	else if (s < 48 * 3600)
		snprintf(buf, len, "%s%" PRId64 "h", prefix, s / 3600);
	else
		snprintf(buf, len, "%s%" PRId64 "d", prefix, s / 86400);
}

void cli_age(int64_t since_us, char *buf, size_t len)
{
	int64_t s;

	if (since_us <= 0) {
		snprintf(buf, len, "-");
		return;
	}
	s = ((int64_t)wall_us() - since_us) / 1000000;
	span_text("", s < 0 ? 0 : s, buf, len);
}

void cli_until(int64_t at_us, char *buf, size_t len)
{
	int64_t s = (at_us - (int64_t)wall_us()) / 1000000;

	if (s <= 0)
		snprintf(buf, len, "now");
	else
		span_text("in ", s, buf, len);
}

uint64_t cli_job_gpus(const json_t *job)
{
	json_t *tasks = json_object_get(json_object_get(job, "spec"), "tasks");
	const char *role;
	json_t *r;
	uint64_t n = 0;

	json_object_foreach(tasks, role, r) {
		json_t *rep = json_object_get(r, "replicas");
		uint64_t replicas = json_is_integer(rep) ? (uint64_t)json_integer_value(rep) : 1;
		n += replicas * (uint64_t)json_integer_value(json_object_get(r, "gpus"));
	}
	return n;
}

bool cli_job_is_final(const json_t *job, bool *succeeded)
{
	int st = job_state_parse(cli_jstr(job, "state"));
	*succeeded = st == JOB_SUCCEEDED;
	return st >= 0 && job_state_is_final((enum job_state)st);
}

int cli_job_next(struct cli_ctx *ctx, json_t **job, unsigned max_ms, struct errbuf *eb)
{
	uint64_t id = (uint64_t)cli_jint(*job, "id");
	char *state = xstrdup(cli_jstr(*job, "state"));
	unsigned wait_s = max_ms && max_ms < 30000 ? (max_ms + 999) / 1000 : 30;
	uint64_t t0 = mono_ms();
	json_t *next = NULL;
	int ret = client_job_wait(&ctx->client, id, state, wait_s, &next, eb);

	/* the same state at once: a master that does not hold the request
	 * (older than the long poll); do not spin on it */
	if (!ret && !strcmp(cli_jstr(next, "state"), state) && mono_ms() - t0 < 100)
		usleep(200 * 1000);
	free(state);
	if (ret)
		return ret;
	json_decref(*job);
	*job = next;
	return 0;
}

void cli_table_init(struct cli_table *t, size_t ncols, const char *const *headers)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	for (size_t i = 0; i < ncols; i++)
		cli_table_add(t, "%s", headers[i]);
}

void cli_table_add(struct cli_table *t, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	/* a cell is one line: control characters from the server are blanked */
	for (size_t i = 0; i < sb.len; i++)
		if ((unsigned char)sb.buf[i] < 0x20)
			sb.buf[i] = ' ';
	ALLOC_GROW(t->cells, t->nr + 1, t->alloc);
	t->cells[t->nr++] = strbuf_detach(&sb, NULL);
}

/* A CSV field: quoted when it holds a comma, a quote or a space at an end. */
static void csv_field(const char *s, FILE *out)
{
	size_t n = strlen(s);

	if (!strpbrk(s, ",\"") && (!n || (s[0] != ' ' && s[n - 1] != ' '))) {
		fputs(s, out);
		return;
	}
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

void cli_table_print(const struct cli_table *t, FILE *out)
{
	size_t *width;

	if (table_csv) {
		for (size_t i = 0; i < t->nr; i++) {
			csv_field(t->cells[i], out);
			fputs(i % t->ncols == t->ncols - 1 || i == t->nr - 1 ? "\r\n" : ",", out);
		}
		return;
	}
	width = xcalloc(t->ncols, sizeof(*width));

	for (size_t i = 0; i < t->nr; i++) {
		size_t w = strlen(t->cells[i]);
		if (w > width[i % t->ncols])
			width[i % t->ncols] = w;
	}
	for (size_t i = 0; i < t->nr; i++) {
		size_t col = i % t->ncols;
		bool last = col == t->ncols - 1 || i == t->nr - 1;
		if (last)
			fprintf(out, "%s\n", t->cells[i]);
		else
			fprintf(out, "%-*s  ", (int)width[col], t->cells[i]);
	}
	free(width);
}

void cli_table_release(struct cli_table *t)
{
	for (size_t i = 0; i < t->nr; i++)
		free(t->cells[i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}
