/* What a task starts from (fetch.h). */
#include "base/compat.h"
#include "agent/fetch.h"

#include <inttypes.h>
#include <string.h>

#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/chunks.h"
#include "common/codepack.h"

char *ckpt_path(const char *work_dir, int64_t job, const char *suffix)
{
	return xasprintf("%s/checkpoints/%" PRId64 "%s", work_dir, job, suffix);
}

void ckpt_set_digest(const char *work_dir, int64_t job, const char *digest)
{
	char *mark = ckpt_path(work_dir, job, ".digest");
	write_file_atomic(mark, digest, strlen(digest), 0644);
	free(mark);
}

/* WORK/code/HEX.tar.gz of digest, fetched unless this node has it. */
static int fetch_archive(const struct fetch_config *cfg, struct httpc *h, const char *digest, char **path_out,
			 struct errbuf *eb)
{
	const char *hex = !strncmp(digest, "sha256:", 7) ? digest + 7 : digest;
	int ret = 0;

	if (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64)
		return error(eb, YERR(BAD_REQUEST), "bad archive digest '%s'", digest);
	char *dir = xasprintf("%s/code", cfg->work_dir);
	char *path = xasprintf("%s/%s.tar.gz", dir, hex);
	char *full = xasprintf("sha256:%s", hex);
	mkdir_p(dir, 0755);
	if (!path_exists(path))
		ret = httpc_get_archive(h, full, path, eb);
	free(full);
	free(dir);
	if (ret)
		free(path);
	else
		*path_out = path;
	return ret;
}

/* Makes the node's checkpoint dir of job hold the checkpoint digest. */
static int fetch_checkpoint(const struct fetch_config *cfg, struct httpc *h, int64_t job, const char *digest,
			    struct errbuf *eb)
{
	char *mark = ckpt_path(cfg->work_dir, job, ".digest"), *dir = ckpt_path(cfg->work_dir, job, "");
	json_t *manifest = NULL;
	struct strbuf have = STRBUF_INIT;
	int ret = 0;

	if (strbuf_read_file(&have, mark, 200) == 0 && !strcmp(have.buf, digest))
		goto out; /* this node made it, or fetched it already */
	if ((ret = chunks_manifest_get(h, digest, &manifest, eb)))
		goto out;
	rm_rf(dir);
	if ((ret = chunks_fetch(h, manifest, dir, eb)))
		goto out;
	ckpt_set_digest(cfg->work_dir, job, digest);
out:
	json_decref(manifest);
	strbuf_release(&have);
	free(mark);
	free(dir);
	return ret;
}

int fetch_task_inputs(const struct fetch_config *cfg, const char *code, const char *code_dir, int64_t job,
		      const char *ckpt, char **archive_out, struct errbuf *eb)
{
	struct httpc h;
	int ret = 0;

	*archive_out = NULL;
	if (!code && !ckpt)
		return 0;
	/* a checkpoint may be gigabytes; code is kilobytes, and an agent that
	 * only ever fetched code need not load libcurl (httpc_init_bulk) */
	if (ckpt)
		httpc_init_bulk(&h, cfg->master_url, &cfg->tls, cfg->token);
	else
		httpc_init(&h, cfg->master_url, &cfg->tls, cfg->token);
	h.timeout_ms = 300000;
	pthread_mutex_lock(cfg->lock);
	if (code)
		ret = fetch_archive(cfg, &h, code, archive_out, eb);
	if (!ret && ckpt)
		ret = fetch_checkpoint(cfg, &h, job, ckpt, eb);
	pthread_mutex_unlock(cfg->lock);
	httpc_release(&h);
	/* every runtime starts the task in a fresh copy of the job's code */
	if (!ret && *archive_out)
		ret = codepack_extract(*archive_out, code_dir, eb);
	if (ret) {
		free(*archive_out);
		*archive_out = NULL;
	}
	return ret;
}
