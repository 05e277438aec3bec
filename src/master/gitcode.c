#include "base/compat.h"
#include "master/gitcode.h"

#include <fcntl.h>
#include <git2.h>
#include <pthread.h>
#include <stdatomic.h>

#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/codepack.h"
#include "common/spec.h"
#include "common/spec_code.h"
#include "master/api.h"
#include "master/audit.h"
#include "master/codeindex.h"
#include "master/core.h"
#include "master/gitcred.h"
#include "master/http.h"
#include "master/jobdocs.h"
#include "master/jobs.h"
#include "master/visibility.h"

/* The most code the master takes: as an upload (POST /v1/code) */
#define MAX_CODE_BYTES API_CODE_MAX
/* Trees nested deeper than this are refused (a loop of trees cannot be
 * made, but a very deep one can). */
#define MAX_DEPTH 128
/* How often one remote (ls-remote, fetch) is given the credential before
 * it is taken as refused. */
#define AUTH_TRIES 2

struct gitcode {
	char *dir;              /* owned DATA/git */
	struct gitcreds creds;
	atomic_int stopping;    /* fetches in flight give up */
	bool git_started;       /* git_libgit2_init succeeded */
	pthread_mutex_t mirrors; /* one worker in the mirrors at a time */
	/* the one submission jobs_submit admits with code in git: the work
	 * gitcode_submit passes it while it calls it, else NULL */
	const struct gitwork *admitting;
};

/* One submission's git work: made on the loop, run on a worker, its
 * answer made on the loop again. */
struct gitwork {
	uv_work_t w;
	struct master *m;
	struct req *r;          /* NULL once the client has gone */
	json_t *body;           /* owned copy of the request's body */
	/* inputs, owned copies (the worker reads them) */
	char *dir, *url, *ref, *path, *sha_in;
	struct gitcred cred;    /* a copy of the URL's credential; prefix NULL: none */
	bool nocache;           /* pack again: the cached archive's blob is gone */
	atomic_int *stopping;
	pthread_mutex_t *mirrors;
	/* what the worker found */
	int rc;                 /* 0 or a YERR code, eb saying why */
	struct errbuf eb;
	char sha[SPEC_CODE_SHA_LEN + 1];
	char hex[SHA256_HEX_LEN + 1]; /* the archive's digest */
	char *archive;          /* owned temp file of the archive on DATA's filesystem, or NULL */
	bool cached;            /* the archive came from DATA/git/packed */
	bool fetched;           /* the mirror was fetched */
	/* credentials: asked for, and how often given */
	bool auth_asked;
	unsigned auth_given;
	char *secret;           /* owned token, wiped when freed; scrubbed from messages */
};

/* ---- the worker: libgit2 ---- */

/* Fails w with code and a message that holds no secret (gitcred_scrub). */
__attribute__((format(printf, 4, 5)))
static int fail(struct gitwork *w, int code, const char *field, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	gitcred_scrub(&sb, w->secret);
	w->rc = field ? error_field(&w->eb, code, field, "%s", sb.buf) : error(&w->eb, code, "%s", sb.buf);
	strbuf_release(&sb);
	return w->rc;
}

static const char *git_msg(void)
{
	const git_error *e = git_error_last();

	return e && e->message ? e->message : "unknown error";
}

/* A failed connect or fetch: credentials missing or refused, else what
 * libgit2 said. */
static int fail_remote(struct gitwork *w, const char *doing)
{
	if (w->auth_asked && !w->cred.prefix)
		return fail(w, YERR(BAD_GATEWAY), "code.git", "code.git: '%s' asks for credentials and "
			    "the master has none for it (its git-credential option)", w->url);
	if (w->auth_given > AUTH_TRIES)
		return fail(w, YERR(BAD_GATEWAY), "code.git", "code.git: '%s' refused the master's "
			    "credential for '%s' (its git-credential option)", w->url, w->cred.prefix);
	if (atomic_load(w->stopping))
		return fail(w, YERR(UNAVAILABLE), NULL, "the master is stopping");
	return fail(w, YERR(BAD_GATEWAY), "code.git", "code.git: cannot %s '%s': %s", doing, w->url,
		    git_msg());
}

/* libgit2 asks for credentials: the URL's from the master's config, at
 * most AUTH_TRIES times a remote (asked more often, the server refused
 * them). */
static int on_credentials(git_credential **out, const char *url, const char *user_from_url,
			  unsigned int allowed, void *payload)
{
	struct gitwork *w = payload;
	struct errbuf eb = ERRBUF_INIT;
	char *user = NULL;

	(void)url;
	if (!w->cred.prefix) {
		w->auth_asked = true;
		return GIT_EUSER;
	}
	/* libgit2 asks when the server answers 401: asked again for the same
	 * remote, the server refused the credential (once more is allowed,
	 * for a request on a new connection) */
	if (w->auth_given++ >= AUTH_TRIES)
		return GIT_EUSER;
	if (w->cred.kind == GITCRED_TOKEN_FILE && (allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT)) {
		int rc;
		free(w->secret);
		w->secret = NULL;
		if (gitcred_read_token(w->cred.path, &user, &w->secret, &eb)) {
			fail(w, YERR(BAD_GATEWAY), "code.git", "code.git: %s", eb.msg);
			return GIT_EUSER;
		}
		rc = git_credential_userpass_plaintext_new(out, user, w->secret);
		free(user);
		return rc;
	}
	if (w->cred.kind == GITCRED_SSH_KEY && (allowed & GIT_CREDENTIAL_SSH_KEY))
		return git_credential_ssh_key_new(out, user_from_url ? user_from_url : "git", NULL,
						  w->cred.path, NULL);
	if (w->cred.kind == GITCRED_SSH_KEY && (allowed & GIT_CREDENTIAL_USERNAME)) {
		w->auth_given--; /* the user name first, then the key */
		return git_credential_username_new(out, user_from_url ? user_from_url : "git");
	}
	fail(w, YERR(BAD_GATEWAY), "code.git", "code.git: '%s' asks for another kind of credential "
	     "than the master's %s for '%s'", w->url,
	     w->cred.kind == GITCRED_TOKEN_FILE ? "token-file" : "ssh-key", w->cred.prefix);
	return GIT_EUSER;
}

static int on_transfer(const git_indexer_progress *stats, void *payload)
{
	struct gitwork *w = payload;

	(void)stats;
	return atomic_load(w->stopping) ? -1 : 0;
}

static void remote_callbacks(struct gitwork *w, git_remote_callbacks *cb)
{
	git_remote_init_callbacks(cb, GIT_REMOTE_CALLBACKS_VERSION);
	cb->credentials = on_credentials;
	cb->transfer_progress = on_transfer;
	cb->payload = w;
	w->auth_given = 0;
}

/* An anonymous remote of url in repo (NULL: none). The URL is taken as
 * it is: no url.*.insteadOf of any config rewrites it (and libgit2 1.5
 * leaks the regex match data of that lookup). */
static int new_remote(git_remote **out, git_repository *repo, const char *url)
{
	git_remote_create_options ro;

	git_remote_create_options_init(&ro, GIT_REMOTE_CREATE_OPTIONS_VERSION);
	ro.repository = repo;
	ro.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
	return git_remote_create_with_opts(out, url, &ro);
}

/* The commit the remote's ref names (ls-remote): a tag's peeled commit,
 * and for a short name refs/tags/NAME before refs/heads/NAME as git takes
 * them. */
static int resolve_ref(struct gitwork *w)
{
	git_remote *remote = NULL;
	git_remote_callbacks cb;
	const git_remote_head **heads;
	const git_oid *found = NULL;
	size_t n;
	int rank = 99;

	if (new_remote(&remote, NULL, w->url) < 0)
		return fail(w, YERR(INVALID_SPEC), "code.git", "code.git: '%s': %s", w->url, git_msg());
	remote_callbacks(w, &cb);
	if (git_remote_connect(remote, GIT_DIRECTION_FETCH, &cb, NULL, NULL) < 0 ||
	    git_remote_ls(&heads, &n, remote) < 0) {
		if (!w->rc)
			fail_remote(w, "list the refs of");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *name = heads[i]->name;
		size_t rl = strlen(w->ref);
		int r = 99;
		if (!strcmp(name, w->ref))
			r = 2;
		else if (!strncmp(name, w->ref, rl) && !strcmp(name + rl, "^{}"))
			r = 1;
		else if (!strncmp(name, "refs/tags/", 10) && !strncmp(name + 10, w->ref, rl) &&
			 !strcmp(name + 10 + rl, "^{}"))
			r = 3;
		else if (!strncmp(name, "refs/tags/", 10) && !strcmp(name + 10, w->ref))
			r = 4;
		else if (!strncmp(name, "refs/heads/", 11) && !strcmp(name + 11, w->ref))
			r = 5;
		if (r < rank) {
			rank = r;
			found = &heads[i]->oid;
		}
	}
	if (!found)
		fail(w, YERR(INVALID_SPEC), "code.ref", "code.ref: '%s' is not a branch, tag or commit "
		     "of '%s'", w->ref, w->url);
	else
		git_oid_tostr(w->sha, sizeof(w->sha), found);
out:
	git_remote_free(remote);
	return w->rc;
}

/* The cache file of (URL, SHA, path): DATA/git/packed/HEX. */
static char *packed_path(const struct gitwork *w)
{
	struct strbuf key = STRBUF_INIT;
	char hex[SHA256_HEX_LEN + 1];

	strbuf_addf(&key, "%s\n%s\n%s", w->url, w->sha, w->path ? w->path : "");
	sha256_hex(key.buf, key.len, hex);
	strbuf_release(&key);
	return xasprintf("%s/packed/%s", w->dir, hex);
}

static bool read_cached(struct gitwork *w)
{
	struct strbuf sb = STRBUF_INIT;
	char *path = packed_path(w);
	bool ok = false;

	if (strbuf_read_file(&sb, path, 128) == 0 && sb.len == SHA256_HEX_LEN &&
	    strspn(sb.buf, "0123456789abcdef") == SHA256_HEX_LEN) {
		memcpy(w->hex, sb.buf, sizeof(w->hex));
		ok = true;
	}
	strbuf_release(&sb);
	free(path);
	return ok;
}

/* Writes the blobs of tree into dir (made), as git would check them out:
 * files with their executable bit, symlinks, directories; submodules and
 * entries named .git are left out. *total counts the bytes. */
static int write_tree(struct gitwork *w, git_repository *repo, const git_tree *tree,
		      const char *dir, unsigned depth, uint64_t *total)
{
	size_t n = git_tree_entrycount(tree);
	int ret = 0;

	if (depth > MAX_DEPTH)
		return fail(w, YERR(TOO_LARGE), "code.git", "code.git: the tree at %s is nested deeper "
			    "than %d directories", w->sha, MAX_DEPTH);
	if (mkdir(dir, 0755) && errno != EEXIST)
		return fail(w, YERR(IO), NULL, "cannot create '%s': %s", dir, strerror(errno));
	for (size_t i = 0; i < n && !ret; i++) {
		const git_tree_entry *e = git_tree_entry_byindex(tree, i);
		const char *name = git_tree_entry_name(e);
		git_filemode_t mode = git_tree_entry_filemode(e);
		char *path;

		if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || strchr(name, '/') ||
		    !strcmp(name, ".git") || mode == GIT_FILEMODE_COMMIT)
			continue;
		path = xasprintf("%s/%s", dir, name);
		if (mode == GIT_FILEMODE_TREE) {
			git_tree *sub = NULL;
			if (git_tree_lookup(&sub, repo, git_tree_entry_id(e)) < 0)
				ret = fail(w, YERR(IO), NULL, "cannot read the tree '%s' at %s: %s", name,
					   w->sha, git_msg());
			else
				ret = write_tree(w, repo, sub, path, depth + 1, total);
			git_tree_free(sub);
		} else {
			git_blob *blob = NULL;
			if (git_blob_lookup(&blob, repo, git_tree_entry_id(e)) < 0) {
				ret = fail(w, YERR(IO), NULL, "cannot read '%s' at %s: %s", name, w->sha,
					   git_msg());
			} else if ((*total += (uint64_t)git_blob_rawsize(blob)) > MAX_CODE_BYTES) {
				ret = fail(w, YERR(TOO_LARGE), "code.git", "code.git: the tree at %s is over "
					   "256 MiB", w->sha);
			} else if (mode == GIT_FILEMODE_LINK) {
				char *target = xstrndup(git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob));
				if (symlink(target, path))
					ret = fail(w, YERR(IO), NULL, "cannot create '%s': %s", path,
						   strerror(errno));
				free(target);
			} else {
				int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
					      mode == GIT_FILEMODE_BLOB_EXECUTABLE ? 0755 : 0644);
				if (fd < 0 || write_all(fd, git_blob_rawcontent(blob),
							(size_t)git_blob_rawsize(blob)))
					ret = fail(w, YERR(IO), NULL, "cannot write '%s': %s", path,
						   strerror(errno));
				if (fd >= 0)
					close(fd);
			}
			git_blob_free(blob);
		}
		free(path);
	}
	return ret;
}

/* Opens (or makes) the mirror of w's URL and fetches every branch and tag
 * into it unless it holds w's commit already; *commit is that commit. */
static int mirror_commit(struct gitwork *w, git_repository **repo, git_commit **commit)
{
	char hex[SHA256_HEX_LEN + 1];
	char *path;
	git_oid oid;
	int ret = 0;

	sha256_hex(w->url, strlen(w->url), hex);
	path = xasprintf("%s/mirrors/%.32s.git", w->dir, hex);
	if (git_repository_open_bare(repo, path) < 0 && git_repository_init(repo, path, 1) < 0) {
		ret = fail(w, YERR(IO), NULL, "cannot make the mirror '%s': %s", path, git_msg());
		goto out;
	}
	git_oid_fromstr(&oid, w->sha);
	if (git_commit_lookup(commit, *repo, &oid) < 0) {
		static char *specs[] = { "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*" };
		git_strarray refspecs = { specs, ARRAY_SIZE(specs) };
		git_fetch_options fo;
		git_remote *remote = NULL;

		git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
		remote_callbacks(w, &fo.callbacks);
		fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
		if (new_remote(&remote, *repo, w->url) < 0 ||
		    git_remote_fetch(remote, &refspecs, &fo, "yard: fetch") < 0) {
			if (!w->rc)
				fail_remote(w, "fetch");
			ret = w->rc;
		}
		git_remote_free(remote);
		w->fetched = true;
		if (!ret && git_commit_lookup(commit, *repo, &oid) < 0)
			ret = fail(w, YERR(INVALID_SPEC), w->sha_in ? "code.sha" : "code.ref",
				   "%s: commit %s is not on a branch or tag of '%s'",
				   w->sha_in ? "code.sha" : "code.ref", w->sha, w->url);
	}
out:
	free(path);
	return ret;
}

/* Packs the tree of w's commit (its path) into w->archive, w->hex. */
static int pack(struct gitwork *w)
{
	git_repository *repo = NULL;
	git_commit *commit = NULL;
	git_tree *tree = NULL, *sub = NULL;
	git_tree_entry *entry = NULL;
	struct strbuf tgz = STRBUF_INIT;
	char *tmp = xasprintf("%s/tmp/tree-XXXXXX", w->dir), *root = NULL;
	uint64_t total = 0;
	bool made = false;
	int ret, fd = -1;

	pthread_mutex_lock(w->mirrors);
	if ((ret = mirror_commit(w, &repo, &commit)))
		goto out;
	if (git_commit_tree(&tree, commit) < 0) {
		ret = fail(w, YERR(IO), NULL, "cannot read the tree of %s: %s", w->sha, git_msg());
		goto out;
	}
	if (w->path) {
		if (git_tree_entry_bypath(&entry, tree, w->path) < 0 ||
		    git_tree_entry_type(entry) != GIT_OBJECT_TREE ||
		    git_tree_lookup(&sub, repo, git_tree_entry_id(entry)) < 0) {
			ret = fail(w, YERR(INVALID_SPEC), "code.path", "code.path: '%s' is not a directory "
				   "of '%s' at %s", w->path, w->url, w->sha);
			goto out;
		}
	}
	if (!mkdtemp(tmp)) {
		ret = fail(w, YERR(IO), NULL, "cannot create '%s': %s", tmp, strerror(errno));
		goto out;
	}
	made = true;
	root = xasprintf("%s/code", tmp);
	if ((ret = write_tree(w, repo, sub ? sub : tree, root, 0, &total)))
		goto out;
	if (codepack_create(root, &tgz, MAX_CODE_BYTES, &w->eb)) {
		ret = w->rc = w->eb.code;
		goto out;
	}
	sha256_hex(tgz.buf, tgz.len, w->hex);
	w->archive = xasprintf("%s/tmp/pack-XXXXXX", w->dir);
	if ((fd = mkstemp(w->archive)) < 0 || write_all(fd, tgz.buf, tgz.len) || fsync(fd)) {
		ret = fail(w, YERR(IO), NULL, "cannot write '%s': %s", w->archive, strerror(errno));
		goto out;
	}
	{
		/* the cache: this commit and path have this archive */
		char *cache = packed_path(w);
		if (write_file_atomic(cache, w->hex, SHA256_HEX_LEN, 0600))
			fprintf(stderr, "yard master: git: cannot write '%s': %s\n", cache, strerror(errno));
		free(cache);
	}
out:
	if (fd >= 0)
		close(fd);
	if (ret && w->archive) {
		unlink(w->archive);
		free(w->archive);
		w->archive = NULL;
	}
	if (made)
		rm_rf(tmp);
	git_tree_entry_free(entry);
	git_tree_free(sub);
	git_tree_free(tree);
	git_commit_free(commit);
	git_repository_free(repo);
	pthread_mutex_unlock(w->mirrors);
	strbuf_release(&tgz);
	free(root);
	free(tmp);
	return ret;
}

static void work(uv_work_t *req)
{
	struct gitwork *w = req->data;

	w->rc = 0;
	w->cached = w->fetched = false;
	if (w->sha_in)
		snprintf(w->sha, sizeof(w->sha), "%s", w->sha_in);
	else if (spec_code_is_sha(w->ref))
		snprintf(w->sha, sizeof(w->sha), "%s", w->ref);
	else if (resolve_ref(w))
		return;
	if (!w->nocache && read_cached(w)) {
		w->cached = true;
		return;
	}
	pack(w);
}

/* ---- the loop: the request ---- */

static void work_free(struct gitwork *w)
{
	if (w->archive)
		unlink(w->archive);
	free(w->archive);
	json_decref(w->body);
	free(w->dir);
	free(w->url);
	free(w->ref);
	free(w->path);
	free(w->sha_in);
	gitcred_release(&w->cred);
	if (w->secret)
		explicit_bzero(w->secret, strlen(w->secret));
	free(w->secret);
	free(w);
}

static bool held_ready(struct req *r)
{
	(void)r;
	return false; /* work_done answers it */
}

static void held_gone(struct req *r)
{
	struct gitwork *w = r->handler_data;

	if (w)
		w->r = NULL;
}

/* The job an answer reports, held until the commit that makes it durable. */
struct made {
	uint64_t id;
	uint64_t submitted_at;  /* with id: this job, not one made again under its id */
};

/* WAIT_HANDLER, once answered: the request is asked at the first wake, which
 * comes after the commit of the loop turn that answered it (master.c's
 * on_prepare commits, then wakes). A failed commit reloads the model from
 * the store: the job is not there, and the answer says so instead. */
static bool made_ready(struct req *r)
{
	struct made *mk = r->handler_data;
	struct job *j = core_job(r->m, mk->id);

	if (!j || j->submitted_at != mk->submitted_at) {
		struct errbuf eb = ERRBUF_INIT;
		error(&eb, YERR(UNAVAILABLE), "the job could not be stored (the store failed): submit "
		      "it again");
		req_error(r, &eb);
	}
	return true;
}

static void made_gone(struct req *r)
{
	free(r->handler_data);
	r->handler_data = NULL;
}

/* Answers w's request (eb: an error, else the job j) with its audit entry;
 * the request stays held until the next wake, after the commit of the
 * change it reports (made_ready). */
static void answer(struct gitwork *w, const struct errbuf *eb, const struct job *j, bool again)
{
	struct req *r = w->r;

	r->handler_data = NULL;
	r->ready = NULL; /* ready at the next wake */
	r->gone = NULL;
	w->r = NULL;
	if (eb)
		req_error(r, eb);
	else
		req_json(r, again ? 200 : 201, jobs_job_json(r->m, j, true));
	audit_record(r);
	if (!eb) {
		struct made *mk = xcalloc(1, sizeof(*mk));
		mk->id = j->id;
		mk->submitted_at = j->submitted_at;
		r->handler_data = mk;
		r->ready = made_ready;
		r->gone = made_gone;
	}
}

static void work_done(uv_work_t *req, int status)
{
	struct gitwork *w = req->data;
	struct master *m = w->m;
	struct errbuf eb = ERRBUF_INIT;
	char name[CODE_NAME_MAX], digest[8 + SHA256_HEX_LEN];
	struct caller c;
	struct job *j = NULL;
	bool again = false;
	uint64_t size;
	int rc;

	if (w->r && (w->r->resp || atomic_load(&m->gitcode->stopping))) {
		/* answered already (the master stops, or lost its lead): let go */
		w->r->handler_data = NULL;
		w->r->ready = NULL;
		w->r->gone = NULL;
		w->r = NULL;
	}
	if (!w->r) {
		work_free(w);
		return;
	}
	if (status) {
		error(&eb, YERR(UNAVAILABLE), "the git work was cancelled");
		answer(w, &eb, NULL, false);
		goto out;
	}
	if (w->rc) {
		fprintf(stderr, "yard master: git: %s\n", w->eb.msg);
		answer(w, &w->eb, NULL, false);
		goto out;
	}
	code_blob_name(name, w->hex);
	if (w->cached && m->sops->blob_size(m->store, name, &size, &eb)) {
		/* the archive of the cache is gone from the store: pack again */
		w->nocache = true;
		if (!uv_queue_work(&m->loop, &w->w, work, work_done))
			return;
		error(&eb, YERR(INTERNAL), "cannot queue the git work");
		answer(w, &eb, NULL, false);
		goto out;
	}
	if (!w->cached) {
		if ((rc = core_batch_open(m))) {
			answer(w, &m->batch_eb, NULL, false);
			goto out;
		}
		rc = m->sops->blob_put_file(m->store, name, w->archive, &eb);
		free(w->archive); /* taken, even on error */
		w->archive = NULL;
		if (rc) {
			answer(w, &eb, NULL, false);
			goto out;
		}
	}
	fprintf(stderr, "yard master: git: %s %s at %s%s%s: code sha256:%s (%s)\n", w->url, w->ref,
		w->sha, w->path ? " path " : "", w->path ? w->path : "", w->hex,
		w->cached ? "cached" : w->fetched ? "fetched, packed" : "packed");
	/* the submission as the client would have made it with the code
	 * uploaded: the commit in the spec, the archive as its code */
	snprintf(digest, sizeof(digest), "sha256:%s", w->hex);
	json_object_set_new(json_object_get(json_object_get(w->body, "spec"), "code"), "sha",
			    json_string(w->sha));
	json_object_set_new(w->body, "code", json_string(digest));
	req_caller(w->r, &c);
	m->gitcode->admitting = w;
	rc = jobs_submit(m, &c, w->body, &j, &again, &eb);
	m->gitcode->admitting = NULL;
	answer(w, rc ? &eb : NULL, j, again);
out:
	work_free(w);
}

bool gitcode_wanted(const json_t *body)
{
	const json_t *code = json_object_get(json_object_get(body, "spec"), "code");

	return code && !json_is_null(code);
}

void gitcode_submit(struct req *r, const json_t *body)
{
	struct master *m = r->m;
	struct gitcode *gc = m->gitcode;
	struct job_spec spec;
	struct errbuf eb = ERRBUF_INIT;
	struct gitwork *w;
	const struct gitcred *cred;
	const json_t *jcode = json_object_get(body, "code");

	if (!gc) {
		error_field(&eb, YERR(BAD_REQUEST), "code.git", "code.git: this master takes no code "
			    "from git");
		req_error(r, &eb);
		return;
	}
	/* the spec's own errors first, without a fetch */
	if (spec_from_json(json_object_get(body, "spec"), &spec, &eb)) {
		req_error(r, &eb);
		spec_release(&spec);
		return;
	}
	if (jcode && !json_is_null(jcode)) {
		error_field(&eb, YERR(BAD_REQUEST), "code", "code: a job whose spec has code.git takes "
			    "its code from git, not an upload");
		req_error(r, &eb);
		spec_release(&spec);
		return;
	}
	w = xcalloc(1, sizeof(*w));
	w->w.data = w;
	w->m = m;
	w->r = r;
	w->body = json_deep_copy(body);
	w->dir = xstrdup(gc->dir);
	w->url = xstrdup(spec.code->git);
	w->ref = xstrdup(spec.code->ref);
	w->path = spec.code->path ? xstrdup(spec.code->path) : NULL;
	w->sha_in = spec.code->sha ? xstrdup(spec.code->sha) : NULL;
	if ((cred = gitcreds_find(&gc->creds, w->url))) {
		w->cred.prefix = xstrdup(cred->prefix);
		w->cred.kind = cred->kind;
		w->cred.path = xstrdup(cred->path);
	}
	w->stopping = &gc->stopping;
	w->mirrors = &gc->mirrors;
	w->eb = (struct errbuf)ERRBUF_INIT;
	spec_release(&spec);
	if (uv_queue_work(&m->loop, &w->w, work, work_done)) {
		error(&eb, YERR(INTERNAL), "cannot queue the git work");
		req_error(r, &eb);
		work_free(w);
		return;
	}
	r->handler_data = w;
	r->ready = held_ready;
	r->gone = held_gone;
	/* held by the handler's caller (http.c), as a long poll is */
	r->wait = WAIT_HANDLER;
}

int gitcode_check(struct master *m, const struct job_spec *spec, const char *code,
		  struct errbuf *eb)
{
	const struct gitwork *w = m->gitcode ? m->gitcode->admitting : NULL;

	if (!spec->code)
		return 0;
	if (w && spec->code->sha && !strcmp(spec->code->sha, w->sha) && !strcmp(spec->code->git, w->url) &&
	    !strcmp(spec->code->path ? spec->code->path : "", w->path ? w->path : "") && code &&
	    !strcmp(code + 7, w->hex))
		return 0;
	return error_field(eb, YERR(INVALID_SPEC), "code", "code: a job whose code is in git is "
			   "submitted with POST /v1/jobs (yard submit --git), which fetches it");
}

/* ---- life ---- */

int gitcode_open(struct master *m, const struct conf_list *creds, struct errbuf *eb)
{
	static const char *const sub[] = { "", "/mirrors", "/packed", "/tmp" };
	struct gitcode *gc = xcalloc(1, sizeof(*gc));
	int ret = 0;

	gc->dir = xasprintf("%s/git", m->data_dir);
	pthread_mutex_init(&gc->mirrors, NULL);
	m->gitcode = gc;
	for (size_t i = 0; i < creds->n && !ret; i++)
		ret = gitcreds_add(&gc->creds, "git-credential", creds->items[i], eb);
	for (size_t i = 0; i < ARRAY_SIZE(sub) && !ret; i++) {
		char *dir = xasprintf("%s%s", gc->dir, sub[i]);
		/* what a master that stopped midway left in tmp goes */
		if (!strcmp(sub[i], "/tmp"))
			rm_rf(dir);
		if (mkdir_p(dir, 0700))
			ret = error(eb, YERR(IO), "cannot create '%s': %s", dir, strerror(errno));
		free(dir);
	}
	if (!ret && git_libgit2_init() < 0)
		ret = error(eb, YERR(INTERNAL), "cannot start libgit2: %s", git_msg());
	gc->git_started = !ret;
	return ret;
}

void gitcode_stop(struct master *m)
{
	if (m->gitcode)
		atomic_store(&m->gitcode->stopping, 1);
}

void gitcode_free(struct master *m)
{
	struct gitcode *gc = m->gitcode;

	if (!gc)
		return;
	gitcreds_release(&gc->creds);
	pthread_mutex_destroy(&gc->mirrors);
	free(gc->dir);
	if (gc->git_started)
		git_libgit2_shutdown();
	free(gc);
	m->gitcode = NULL;
}
