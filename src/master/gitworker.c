#include "base/compat.h"
#include "master/gitworker.h"

#include <fcntl.h>
#include <git2.h>
#include <jansson.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>

#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/codepack.h"
#include "common/spec_code.h"
#include "master/api.h"
#include "master/gitcred.h"

/* The most code the master takes: as an upload (POST /v1/code) */
#define MAX_CODE_BYTES API_CODE_MAX
/* Trees nested deeper than this are refused (a loop of trees cannot be
 * made, but a very deep one can). */
#define MAX_DEPTH 128
/* How often one remote (ls-remote, fetch) is given the credential before
 * it is taken as refused. */
#define AUTH_TRIES 2

/* One submission's git work, as the request on stdin names it. */
struct gitjob {
	/* inputs (borrowed from the request) */
	const char *dir, *tmp, *url, *ref, *path, *sha_in;
	struct gitcred cred;    /* prefix NULL: none */
	bool nocache;           /* pack again: the cached archive's blob is gone */
	/* what the work found */
	int rc;                 /* 0 or a YERR code, eb saying why */
	struct errbuf eb;
	char sha[SPEC_CODE_SHA_LEN + 1];
	char hex[SHA256_HEX_LEN + 1]; /* the archive's digest */
	bool cached;            /* the archive came from DATA/git/packed */
	bool fetched;           /* the mirror was fetched */
	/* credentials: asked for, and how often given */
	bool auth_asked;
	unsigned auth_given;
	char *secret;           /* owned token, wiped when freed; scrubbed from messages */
};

/* ---- the work: libgit2 ---- */

/* Fails w with code and a message that holds no secret (gitcred_scrub). */
__attribute__((format(printf, 4, 5)))
static int fail(struct gitjob *w, int code, const char *field, const char *fmt, ...)
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
static int fail_remote(struct gitjob *w, const char *doing)
{
	if (w->auth_asked && !w->cred.prefix)
		return fail(w, YERR(BAD_GATEWAY), "code.git", "code.git: '%s' asks for credentials and "
			    "the master has none for it (its git-credential option)", w->url);
	if (w->auth_given > AUTH_TRIES)
		return fail(w, YERR(BAD_GATEWAY), "code.git", "code.git: '%s' refused the master's "
			    "credential for '%s' (its git-credential option)", w->url, w->cred.prefix);
	return fail(w, YERR(BAD_GATEWAY), "code.git", "code.git: cannot %s '%s': %s", doing, w->url,
		    git_msg());
}

/* libgit2 asks for credentials: the URL's from the master's config, at
 * most AUTH_TRIES times a remote (asked more often, the server refused
 * them). */
static int on_credentials(git_credential **out, const char *url, const char *user_from_url,
			  unsigned int allowed, void *payload)
{
	struct gitjob *w = payload;
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
		if (gitcred_read_token("git-credential", w->cred.path, "x-access-token", &user, &w->secret, &eb)) {
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

static void remote_callbacks(struct gitjob *w, git_remote_callbacks *cb)
{
	git_remote_init_callbacks(cb, GIT_REMOTE_CALLBACKS_VERSION);
	cb->credentials = on_credentials;
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
static int resolve_ref(struct gitjob *w)
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
static char *packed_path(const struct gitjob *w)
{
	struct strbuf key = STRBUF_INIT;
	char hex[SHA256_HEX_LEN + 1];

	strbuf_addf(&key, "%s\n%s\n%s", w->url, w->sha, w->path ? w->path : "");
	sha256_hex(key.buf, key.len, hex);
	strbuf_release(&key);
	return xasprintf("%s/packed/%s", w->dir, hex);
}

static bool read_cached(struct gitjob *w)
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
static int write_tree(struct gitjob *w, git_repository *repo, const git_tree *tree,
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
static int mirror_commit(struct gitjob *w, git_repository **repo, git_commit **commit)
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

/* Takes the lock of w's mirror, DATA/git/mirrors/HEX.lock (a flock: the
 * kernel lets it go with a worker that is killed): one worker at a time
 * fetches into or reads one mirror. The lock's fd, or -1 (w failed). */
static int lock_mirror(struct gitjob *w)
{
	char hex[SHA256_HEX_LEN + 1];
	char *path;
	int fd;

	sha256_hex(w->url, strlen(w->url), hex);
	path = xasprintf("%s/mirrors/%.32s.lock", w->dir, hex);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		fail(w, YERR(IO), NULL, "cannot open '%s': %s", path, strerror(errno));
	else
		while (flock(fd, LOCK_EX) < 0) {
			if (errno == EINTR)
				continue;
			fail(w, YERR(IO), NULL, "cannot lock '%s': %s", path, strerror(errno));
			close(fd);
			fd = -1;
			break;
		}
	free(path);
	return fd;
}

/* Packs the tree of w's commit (its path) into TMP/code.tar.gz, w->hex. */
static int pack(struct gitjob *w)
{
	git_repository *repo = NULL;
	git_commit *commit = NULL;
	git_tree *tree = NULL, *sub = NULL;
	git_tree_entry *entry = NULL;
	struct strbuf tgz = STRBUF_INIT;
	char *tmp = xasprintf("%s/tree", w->tmp), *root = NULL;
	char *archive = xasprintf("%s/code.tar.gz", w->tmp);
	uint64_t total = 0;
	bool made = false;
	int ret, fd = -1, lock;

	if ((lock = lock_mirror(w)) < 0) {
		ret = w->rc;
		goto out;
	}
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
	if (mkdir(tmp, 0700)) {
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
	fd = open(archive, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write_all(fd, tgz.buf, tgz.len) || fsync(fd)) {
		ret = fail(w, YERR(IO), NULL, "cannot write '%s': %s", archive, strerror(errno));
		goto out;
	}
	{
		/* the cache: this commit and path have this archive */
		char *cache = packed_path(w);
		if (write_file_atomic(cache, w->hex, SHA256_HEX_LEN, 0600))
			fprintf(stderr, "yard git-worker: cannot write '%s': %s\n", cache, strerror(errno));
		free(cache);
	}
out:
	if (fd >= 0)
		close(fd);
	if (ret)
		unlink(archive);
	if (made)
		rm_rf(tmp);
	git_tree_entry_free(entry);
	git_tree_free(sub);
	git_tree_free(tree);
	git_commit_free(commit);
	git_repository_free(repo);
	if (lock >= 0)
		close(lock); /* the flock goes with it */
	strbuf_release(&tgz);
	free(root);
	free(tmp);
	free(archive);
	return ret;
}

static void work(struct gitjob *w)
{
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

/* ---- the process ---- */

/* A string member of the request: NULL when absent or null, else it must
 * be a string. */
static int get_str(const json_t *o, const char *key, bool required, const char **out,
		   struct errbuf *eb)
{
	const json_t *v = json_object_get(o, key);

	*out = NULL;
	if ((!v || json_is_null(v)) && !required)
		return 0;
	if (!json_is_string(v))
		return error_field(eb, YERR(BAD_REQUEST), key, "%s: expected a string", key);
	*out = json_string_value(v);
	return 0;
}

static int read_request(const json_t *req, struct gitjob *w, struct errbuf *eb)
{
	const json_t *cred = json_object_get(req, "cred");
	const char *kind = NULL;

	if (!json_is_object(req))
		return error(eb, YERR(BAD_REQUEST), "the request is not a JSON object");
	if (get_str(req, "dir", true, &w->dir, eb) || get_str(req, "tmp", true, &w->tmp, eb) ||
	    get_str(req, "url", true, &w->url, eb) || get_str(req, "ref", true, &w->ref, eb) ||
	    get_str(req, "path", false, &w->path, eb) || get_str(req, "sha", false, &w->sha_in, eb))
		return eb->code;
	w->nocache = json_is_true(json_object_get(req, "nocache"));
	if (!cred || json_is_null(cred))
		return 0;
	if (get_str(cred, "prefix", true, (const char **)&w->cred.prefix, eb) ||
	    get_str(cred, "kind", true, &kind, eb) ||
	    get_str(cred, "path", true, (const char **)&w->cred.path, eb))
		return eb->code;
	if (!strcmp(kind, "token-file"))
		w->cred.kind = GITCRED_TOKEN_FILE;
	else if (!strcmp(kind, "ssh-key"))
		w->cred.kind = GITCRED_SSH_KEY;
	else
		return error_field(eb, YERR(BAD_REQUEST), "cred.kind", "cred.kind '%s': expected "
				   "token-file or ssh-key", kind);
	return 0;
}

int cmd_git_worker(int argc, char **argv)
{
	struct gitjob w = { .eb = ERRBUF_INIT };
	struct strbuf in = STRBUF_INIT;
	json_t *req = NULL, *out;
	json_error_t jerr;
	char *text;
	int ret = 1;

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "yard " GITWORKER_CMD ": takes no arguments (the master starts it)\n");
		return 2;
	}
	/* a master killed outright takes its git-worker with it (the signal
	 * comes when the thread that started it ends: a libuv pool thread,
	 * which lives as long as the master) */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (strbuf_read_fd(&in, 0) < 0) {
		fprintf(stderr, "yard " GITWORKER_CMD ": cannot read the request: %s\n", strerror(errno));
		goto out;
	}
	if (in.len > 64 * 1024) {
		fprintf(stderr, "yard " GITWORKER_CMD ": the request is over 64 KiB\n");
		goto out;
	}
	if (!(req = json_loadb(in.buf, in.len, 0, &jerr))) {
		fprintf(stderr, "yard " GITWORKER_CMD ": the request is not JSON: %s\n", jerr.text);
		goto out;
	}
	if (read_request(req, &w, &w.eb)) {
		fprintf(stderr, "yard " GITWORKER_CMD ": %s\n", w.eb.msg);
		goto out;
	}
	if (git_libgit2_init() < 0) {
		fail(&w, YERR(INTERNAL), NULL, "cannot start libgit2: %s", git_msg());
	} else {
		work(&w);
		git_libgit2_shutdown();
	}
	out = json_pack("{s:i, s:s, s:s, s:s, s:s, s:b, s:b}", "rc", w.rc, "field", w.eb.field,
			"message", w.eb.msg, "sha", w.sha, "hex", w.hex, "cached", w.cached,
			"fetched", w.fetched);
	text = json_dumps(out, JSON_COMPACT);
	json_decref(out);
	if (text && write_all(1, text, strlen(text)) == 0)
		ret = 0;
	free(text);
out:
	if (w.secret)
		explicit_bzero(w.secret, strlen(w.secret));
	free(w.secret);
	json_decref(req);
	strbuf_release(&in);
	return ret;
}
