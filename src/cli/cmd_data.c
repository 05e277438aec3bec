/* yard data push|ls|show|rm: datasets on the master (docs/datasets.md). */
#include "base/compat.h"

#include <dirent.h>
#include <sys/stat.h>

#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "cli/cmd.h"
#include "common/dataset.h"

/* Digests asked about per POST /v1/blobs/missing (well under its 1 MiB body). */
#define MISSING_BATCH 8192

struct push_file {
	char *rel;       /* owned: the manifest path */
	char *abs;       /* owned: where it is read from */
	uint64_t size;
	unsigned mode;
};

struct push {
	struct push_file *files;
	size_t n, alloc;
};

static int cmp_files(const void *a, const void *b)
{
	return strcmp(((const struct push_file *)a)->rel, ((const struct push_file *)b)->rel);
}

/* Collects the regular files under abs (rel its manifest path, "" at the top). */
static int walk(struct push *p, const char *abs, const char *rel, struct errbuf *eb)
{
	struct stat st;

	if (lstat(abs, &st))
		return error(eb, YERR(BAD_REQUEST), "cannot read '%s': %s", abs, strerror(errno));
	if (strchr(rel, '\n'))
		return error(eb, YERR(BAD_REQUEST), "'%s': names with a newline cannot be pushed", abs);
	if (S_ISLNK(st.st_mode))
		return error(eb, YERR(BAD_REQUEST), "'%s' is a symbolic link: datasets hold regular files only",
			     abs);
	if (S_ISREG(st.st_mode)) {
		struct push_file *f;
		if (!dataset_path_valid(rel))
			return error(eb, YERR(BAD_REQUEST), "'%s': not a valid dataset path", abs);
		ALLOC_GROW(p->files, p->n + 1, p->alloc);
		f = &p->files[p->n++];
		f->rel = xstrdup(rel);
		f->abs = xstrdup(abs);
		f->size = (uint64_t)st.st_size;
		f->mode = st.st_mode & 0777;
		return 0;
	}
	if (!S_ISDIR(st.st_mode))
		return error(eb, YERR(BAD_REQUEST), "'%s' is a special file: datasets hold regular files only",
			     abs);
	{
		DIR *d = opendir(abs);
		struct dirent *de;
		int ret = 0;
		if (!d)
			return error(eb, YERR(BAD_REQUEST), "cannot open '%s': %s", abs, strerror(errno));
		while (!ret && (de = readdir(d))) {
			char *ca, *cr;
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			ca = xasprintf("%s/%s", abs, de->d_name);
			cr = *rel ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
			ret = walk(p, ca, cr, eb);
			free(ca);
			free(cr);
		}
		closedir(d);
		return ret;
	}
}

/* Reads chunk i (of DATASET_CHUNK_MAX) of f into buf; returns its length or -1. */
static ssize_t read_chunk(const struct push_file *f, uint64_t i, char *buf, struct errbuf *eb)
{
	uint64_t off = i * DATASET_CHUNK_MAX, len = f->size - off;
	int fd = open(f->abs, O_RDONLY | O_CLOEXEC);
	ssize_t got = 0;

	if (len > DATASET_CHUNK_MAX)
		len = DATASET_CHUNK_MAX;
	if (fd < 0) {
		error(eb, YERR(IO), "cannot open '%s': %s", f->abs, strerror(errno));
		return -1;
	}
	while ((uint64_t)got < len) {
		ssize_t r = pread(fd, buf + got, len - (uint64_t)got, (off_t)off + got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			error(eb, YERR(IO), "cannot read '%s': %s", f->abs, r ? strerror(errno) : "it shrank");
			close(fd);
			return -1;
		}
		got += r;
	}
	close(fd);
	return got;
}

/* --from-job ID: job ID's outputs unpacked into a fresh temp dir (*tmp,
 * caller removes and frees). -1 to go on, else the exit status. */
static int push_from_job(struct cli_ctx *ctx, const char *job, const char *task, char **tmp)
{
	struct errbuf eb = ERRBUF_INIT;
	const char *base = getenv("TMPDIR");
	uint64_t id;

	if (parse_u64_str(job, &id))
		return cli_usage_error(ctx, "--from-job: '%s' is not a job id", job);
	*tmp = xasprintf("%s/yard-push-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(*tmp)) {
		free(*tmp);
		*tmp = NULL;
		error(&eb, YERR(IO), "cannot create a temp dir: %s", strerror(errno));
		return cli_fail(ctx, &eb);
	}
	if (cli_outputs_fetch(ctx, id, task, NULL, *tmp, &eb))
		return cli_fail(ctx, &eb);
	return -1;
}

static int data_push(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *team = NULL, *from_job = NULL, *from_task = NULL;
	const struct cli_option opts[] = {
		{ "team", 0, CLI_OPT_STRING, &team, "TEAM", "the team whose quota it counts against" },
		{ "from-job", 0, CLI_OPT_STRING, &from_job, "ID", "push job ID's outputs (yard download's layout)" },
		{ "task", 0, CLI_OPT_STRING, &from_task, "ROLE/INDEX", "with --from-job: only this task's" },
	};
	char *tmp = NULL;
	struct errbuf eb = ERRBUF_INIT;
	struct push p = { NULL, 0, 0 };
	json_t *files = json_array(), *where = json_object(), *reply = NULL, *body;
	char *buf = xmalloc(DATASET_CHUNK_MAX);
	uint64_t nchunks = 0, uploaded = 0, upbytes = 0;
	const char *src, *name;
	struct stat st;
	int npos, rc, ret = EXIT_OK;

	rc = cli_parse(ctx, "data push DIR|FILE NAME [--team TEAM] | --from-job ID [--task ROLE/INDEX] NAME",
		       opts, ARRAY_SIZE(opts), argc, argv, &npos);
	if (rc >= 0)
		goto out_rc;
	if (npos != (from_job ? 1 : 2)) {
		rc = cli_usage_error(ctx, from_job ? "expected NAME after --from-job ID" : "expected DIR|FILE and NAME");
		goto out_rc;
	}
	if (from_job && (rc = push_from_job(ctx, from_job, from_task, &tmp)) >= 0)
		goto out_rc;
	src = from_job ? tmp : argv[1];
	name = argv[npos];
	if (!dataset_name_valid(name)) {
		rc = cli_usage_error(ctx, "'%s' is not a dataset name ([a-z0-9][a-z0-9_.-]{0,62})", name);
		goto out_rc;
	}
	if (lstat(src, &st)) {
		rc = cli_usage_error(ctx, "cannot read '%s': %s", src, strerror(errno));
		goto out_rc;
	}
	if (S_ISREG(st.st_mode)) {
		const char *base = strrchr(src, '/');
		rc = walk(&p, src, base ? base + 1 : src, &eb);
	} else {
		rc = walk(&p, src, "", &eb);
	}
	if (rc) {
		rc = cli_fail(ctx, &eb);
		goto out_rc;
	}
	sort_array(p.files, p.n, sizeof(*p.files), cmp_files);
	/* chunk and hash; where[digest] = [file, chunk index] of one copy */
	for (size_t i = 0; i < p.n; i++) {
		const struct push_file *f = &p.files[i];
		json_t *chunks = json_array();
		for (uint64_t c = 0; c * DATASET_CHUNK_MAX < f->size; c++) {
			char hex[SHA256_HEX_LEN + 1], digest[80];
			ssize_t len = read_chunk(f, c, buf, &eb);
			if (len < 0) {
				json_decref(chunks);
				rc = cli_fail(ctx, &eb);
				goto out_rc;
			}
			sha256_hex(buf, (size_t)len, hex);
			snprintf(digest, sizeof(digest), "sha256:%s", hex);
			json_array_append_new(chunks, json_string(digest));
			if (!json_object_get(where, digest))
				json_object_set_new(where, digest, json_pack("[I, I]", (json_int_t)i, (json_int_t)c));
			nchunks++;
		}
		json_array_append_new(files, json_pack("{s:s, s:I, s:i, s:o}", "path", f->rel, "size",
						       (json_int_t)f->size, "mode", (int)f->mode, "chunks",
						       chunks));
	}
	/* ask which are missing, in batches, and upload only those */
	{
		const char *key;
		json_t *v;
		json_t *batch = json_array();
		size_t left = json_object_size(where);
		json_object_foreach(where, key, v) {
			json_array_append_new(batch, json_string(key));
			left--;
			if (json_array_size(batch) < MISSING_BATCH && left)
				continue;
			json_t *req = json_pack("{s:o}", "digests", batch), *missing = NULL, *d;
			size_t k;
			batch = json_array();
			rc = client_json(&ctx->client, "POST", "/v1/blobs/missing", req, &missing, NULL, &eb);
			json_decref(req);
			if (rc) {
				json_decref(batch);
				rc = cli_fail(ctx, &eb);
				goto out_rc;
			}
			json_array_foreach(json_object_get(missing, "missing"), k, d) {
				json_t *w = json_object_get(where, json_string_value(d));
				const struct push_file *f;
				ssize_t len;
				if (!w)
					continue;
				f = &p.files[json_integer_value(json_array_get(w, 0))];
				len = read_chunk(f, (uint64_t)json_integer_value(json_array_get(w, 1)), buf, &eb);
				if (len < 0 || client_blob_put(&ctx->client, json_string_value(d), buf,
							       (size_t)len, &eb)) {
					json_decref(missing);
					json_decref(batch);
					rc = cli_fail(ctx, &eb);
					goto out_rc;
				}
				uploaded++;
				upbytes += (uint64_t)len;
			}
			json_decref(missing);
		}
		json_decref(batch);
	}
	body = json_pack("{s:s, s:{s:O}}", "name", name, "manifest", "files", files);
	if (team)
		json_object_set_new(body, "team", json_string(team));
	rc = client_json(&ctx->client, "POST", "/v1/datasets", body, &reply, NULL, &eb);
	json_decref(body);
	if (rc) {
		rc = cli_fail(ctx, &eb);
		goto out_rc;
	}
	json_object_set_new(reply, "chunks", json_integer((json_int_t)nchunks));
	json_object_set_new(reply, "uploaded", json_integer((json_int_t)uploaded));
	json_object_set_new(reply, "uploaded_bytes", json_integer((json_int_t)upbytes));
	if (ctx->json) {
		cli_print_json(reply);
	} else {
		char size[32];
		format_size((uint64_t)cli_jint(reply, "size"), size, sizeof(size));
		printf("%s@%" PRId64 " %s, %" PRId64 " files, %s (uploaded %" PRIu64 " of %" PRIu64
		       " chunks)\n", cli_jstr(reply, "name"), cli_jint(reply, "version"), size,
		       cli_jint(reply, "files"),
		       json_is_true(json_object_get(reply, "created")) ? "new version" : "unchanged",
		       uploaded, nchunks);
	}
	rc = -1;
out_rc:
	ret = rc >= 0 ? rc : EXIT_OK;
	json_decref(reply);
	json_decref(files);
	json_decref(where);
	for (size_t i = 0; i < p.n; i++) {
		free(p.files[i].rel);
		free(p.files[i].abs);
	}
	free(p.files);
	free(buf);
	if (tmp)
		rm_rf(tmp);
	free(tmp);
	return ret;
}

static int data_ls(struct cli_ctx *ctx, int argc, char **argv)
{
	static const char *const headers[] = { "NAME", "LATEST", "VERSIONS", "SIZE", "TEAM" };
	struct errbuf eb = ERRBUF_INIT;
	struct cli_table t;
	json_t *reply = NULL, *d;
	size_t i;
	int npos, rc;

	rc = cli_parse(ctx, "data ls", NULL, 0, argc, argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos)
		return cli_usage_error(ctx, "unexpected argument '%s'", argv[1]);
	if (client_json(&ctx->client, "GET", "/v1/datasets", NULL, &reply, NULL, &eb))
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
		json_decref(reply);
		return EXIT_OK;
	}
	cli_table_init(&t, ARRAY_SIZE(headers), headers);
	json_array_foreach(json_object_get(reply, "datasets"), i, d) {
		char size[32];
		format_size((uint64_t)cli_jint(d, "size"), size, sizeof(size));
		cli_table_add(&t, "%s", cli_jstr(d, "name"));
		cli_table_add(&t, "%" PRId64, cli_jint(d, "latest"));
		cli_table_add(&t, "%" PRId64, cli_jint(d, "versions"));
		cli_table_add(&t, "%s", size);
		cli_table_add(&t, "%s", cli_jstr(d, "team"));
	}
	cli_table_print(&t, stdout);
	cli_table_release(&t);
	json_decref(reply);
	return EXIT_OK;
}

/* NAME[@N] into the API path /v1/datasets/NAME[/N]; NULL when malformed. */
static char *dataset_ref_path(const char *ref)
{
	const char *at = strchr(ref, '@');
	char *name = at ? xstrndup(ref, (size_t)(at - ref)) : xstrdup(ref), *path = NULL;
	uint64_t v = 0;

	if (dataset_name_valid(name) && (!at || (!parse_u64_str(at + 1, &v) && v)))
		path = at ? xasprintf("/v1/datasets/%s/%" PRIu64, name, v) : xasprintf("/v1/datasets/%s", name);
	free(name);
	return path;
}

static int data_show_rm(struct cli_ctx *ctx, int argc, char **argv, bool rm)
{
	struct errbuf eb = ERRBUF_INIT;
	json_t *reply = NULL, *v;
	char *path;
	size_t i;
	int npos, rc;

	rc = cli_parse(ctx, rm ? "data rm NAME[@VERSION]" : "data show NAME[@VERSION]", NULL, 0, argc,
		       argv, &npos);
	if (rc >= 0)
		return rc;
	if (npos != 1)
		return cli_usage_error(ctx, "expected NAME[@VERSION]");
	if (!(path = dataset_ref_path(argv[1])))
		return cli_usage_error(ctx, "'%s' is not NAME[@VERSION]", argv[1]);
	rc = client_json(&ctx->client, rm ? "DELETE" : "GET", path, NULL, &reply, NULL, &eb);
	free(path);
	if (rc)
		return cli_fail(ctx, &eb);
	if (ctx->json) {
		cli_print_json(reply);
	} else if (rm) {
		printf("deleted %s\n", argv[1]);
	} else if (json_object_get(reply, "manifest")) {
		char size[32];
		format_size((uint64_t)cli_jint(reply, "size"), size, sizeof(size));
		printf("%s@%" PRId64 " %s %s, %" PRId64 " files\n", cli_jstr(reply, "name"),
		       cli_jint(reply, "version"), cli_jstr(reply, "digest"), size, cli_jint(reply, "files"));
		json_array_foreach(json_object_get(json_object_get(reply, "manifest"), "files"), i, v)
			printf("  %s %" PRId64 "\n", cli_jstr(v, "path"), cli_jint(v, "size"));
	} else {
		static const char *const headers[] = { "VERSION", "DIGEST", "SIZE", "FILES", "AGE" };
		struct cli_table t;
		printf("%s (team %s)\n", cli_jstr(reply, "name"), cli_jstr(reply, "team"));
		cli_table_init(&t, ARRAY_SIZE(headers), headers);
		json_array_foreach(json_object_get(reply, "versions"), i, v) {
			char size[32], age[32];
			format_size((uint64_t)cli_jint(v, "size"), size, sizeof(size));
			cli_age(cli_jint(v, "created_at"), age, sizeof(age));
			cli_table_add(&t, "%" PRId64, cli_jint(v, "version"));
			cli_table_add(&t, "%s", cli_jstr(v, "digest"));
			cli_table_add(&t, "%s", size);
			cli_table_add(&t, "%" PRId64, cli_jint(v, "files"));
			cli_table_add(&t, "%s", age);
		}
		cli_table_print(&t, stdout);
		cli_table_release(&t);
	}
	json_decref(reply);
	return EXIT_OK;
}

int cmd_data(struct cli_ctx *ctx, int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : NULL;

	if (sub && !strcmp(sub, "push"))
		return data_push(ctx, argc - 1, argv + 1);
	if (sub && !strcmp(sub, "ls"))
		return data_ls(ctx, argc - 1, argv + 1);
	if (sub && !strcmp(sub, "show"))
		return data_show_rm(ctx, argc - 1, argv + 1, false);
	if (sub && !strcmp(sub, "rm"))
		return data_show_rm(ctx, argc - 1, argv + 1, true);
	if (sub && (!strcmp(sub, "-h") || !strcmp(sub, "--help"))) {
		printf("usage: yard data push DIR|FILE NAME [--team TEAM] | ls | show NAME[@N] | rm NAME[@N]\n");
		return EXIT_OK;
	}
	return cli_usage_error(ctx, "expected push, ls, show or rm");
}
