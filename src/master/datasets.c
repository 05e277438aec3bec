/* Datasets on the master: chunk store, manifests, versions, quotas. */
#include "base/compat.h"
#include "master/datasets.h"

#include <sys/stat.h>

#include "base/clock.h"
#include "base/crypto.h"
#include "base/fsutil.h"
#include "base/parse.h"
#include "base/strbuf.h"
#include "base/xalloc.h"
#include "common/dataset.h"
#include "master/backup.h"
#include "master/jobsource.h"
#include "master/templates.h"
#include "master/visibility.h"

int datasets_open(struct master *m, struct errbuf *eb)
{
	static const char *const sub[] = { "blobs", "manifests" };

	for (size_t i = 0; i < ARRAY_SIZE(sub); i++) {
		char *dir = xasprintf("%s/%s", m->data_dir, sub[i]);
		int rc = mkdir_p(dir, 0700);
		if (rc)
			error(eb, YERR(IO), "cannot create '%s': %s", dir, strerror(errno));
		free(dir);
		if (rc)
			return YERR(IO);
	}
	return 0;
}

int datasets_parse_quota(const char *what, const char *arg, struct data_quota *out, struct errbuf *eb)
{
	const char *eq = strchr(arg, '=');
	char *team = eq ? xstrndup(arg, (size_t)(eq - arg)) : NULL;
	uint64_t bytes;

	if (!team || !spec_name_valid(team) || parse_size_str(eq + 1, &bytes) < 0) {
		free(team);
		return error(eb, YERR(BAD_REQUEST), "%s '%s': expected TEAM=SIZE such as vision=10GiB",
			     what, arg);
	}
	*out = (struct data_quota){ team, bytes };
	return 0;
}

void datasets_chunk_name(char out[DATASETS_NAME_MAX], const char *digest)
{
	snprintf(out, DATASETS_NAME_MAX, "blobs/%.64s", digest + 7);
}

static void manifest_name(char out[DATASETS_NAME_MAX], const char *digest)
{
	snprintf(out, DATASETS_NAME_MAX, "manifests/%.64s.json", digest + 7);
}

/* The size of a held chunk, or -1 (also when the store cannot say: a
 * chunk thought missing is uploaded again, which is harmless). */
static int64_t blob_size(const struct master *m, const char *digest)
{
	struct errbuf eb = ERRBUF_INIT;
	char name[DATASETS_NAME_MAX];
	uint64_t size;
	int rc;

	datasets_chunk_name(name, digest);
	rc = m->sops->blob_size(m->store, name, &size, &eb);
	if (rc && rc != YERR(NOT_FOUND))
		fprintf(stderr, "yard master: chunk '%s': %s\n", digest, eb.msg);
	return rc ? -1 : (int64_t)size;
}

int datasets_blob_put(struct master *m, const char *digest, const void *data, size_t len,
		      bool *created, struct errbuf *eb)
{
	char hex[SHA256_HEX_LEN + 1], name[DATASETS_NAME_MAX];
	int ret;

	*created = false;
	if (!dataset_digest_valid(digest))
		return error(eb, YERR(BAD_REQUEST), "'%s' is not a sha256 digest", digest);
	if (len > DATASET_CHUNK_MAX)
		return error(eb, YERR(TOO_LARGE), "a chunk is at most %" PRIu64 " bytes", DATASET_CHUNK_MAX);
	sha256_hex(data, len, hex);
	if (strcmp(hex, digest + 7))
		return error(eb, YERR(DIGEST_MISMATCH), "the body's digest is sha256:%s, not '%s'", hex,
			     digest);
	if (blob_size(m, digest) == (int64_t)len)
		return 0;
	if ((ret = core_batch_open(m))) {
		*eb = m->batch_eb;
		return ret;
	}
	datasets_chunk_name(name, digest);
	ret = m->sops->blob_put(m->store, name, data, len, eb);
	if (!ret)
		*created = true;
	return ret;
}

json_t *datasets_missing(struct master *m, const json_t *body, struct errbuf *eb)
{
	const json_t *arr = json_object_get(body, "digests"), *d;
	json_t *missing;
	size_t i;

	if (!json_is_array(arr)) {
		error_field(eb, YERR(BAD_REQUEST), "digests", "digests: expected an array of sha256 digests");
		return NULL;
	}
	json_array_foreach(arr, i, d) {
		if (!dataset_digest_valid(json_string_value(d))) {
			char f[32];
			snprintf(f, sizeof(f), "digests[%zu]", i);
			error_field(eb, YERR(BAD_REQUEST), f,
				    "%s: expected \"sha256:\" and 64 lowercase hex digits", f);
			return NULL;
		}
	}
	missing = json_array();
	json_array_foreach(arr, i, d)
		if (blob_size(m, json_string_value(d)) < 0)
			json_array_append(missing, (json_t *)d);
	return json_pack("{s:o}", "missing", missing);
}

struct dataset *datasets_find(const struct master *m, const char *name)
{
	for (size_t i = 0; i < m->ndatasets; i++)
		if (!strcmp(m->datasets[i]->name, name))
			return m->datasets[i];
	return NULL;
}

struct dataset_version *datasets_version(struct dataset *ds, unsigned n)
{
	if (!ds->nv)
		return NULL;
	if (!n)
		return &ds->v[ds->nv - 1];
	for (size_t i = 0; i < ds->nv; i++)
		if (ds->v[i].version == n)
			return &ds->v[i];
	return NULL;
}

json_t *datasets_manifest(const struct master *m, const char *digest)
{
	struct strbuf sb = STRBUF_INIT;
	struct errbuf eb = ERRBUF_INIT;
	char name[DATASETS_NAME_MAX];
	json_t *doc = NULL;

	if (!dataset_digest_valid(digest))
		return NULL;
	manifest_name(name, digest);
	for (;;) {
		struct store_blob_range br;
		int rc = m->sops->blob_read(m->store, name, sb.len, UINT64_MAX, &br, &eb);
		if (rc) {
			if (rc != YERR(NOT_FOUND))
				fprintf(stderr, "yard master: manifest '%s': %s\n", digest, eb.msg);
			goto out;
		}
		if (br.fd >= 0) {
			char buf[65536];
			ssize_t n;
			while ((n = pread(br.fd, buf, sizeof(buf), (off_t)sb.len)) > 0)
				strbuf_add(&sb, buf, (size_t)n);
			close(br.fd);
			break;
		}
		strbuf_add(&sb, br.buf, br.len);
		free(br.buf);
		if (!br.len)
			break;
	}
	doc = json_loadb(sb.buf, sb.len, 0, NULL);
out:
	strbuf_release(&sb);
	return doc;
}

/* Adds the chunks of a manifest to the set (an object used as a set). */
static void add_chunks(json_t *set, const json_t *manifest)
{
	const json_t *f, *c;
	size_t i, k;

	json_array_foreach(json_object_get(manifest, "files"), i, f)
		json_array_foreach(json_object_get(f, "chunks"), k, c)
			json_object_set_new(set, json_string_value(c), json_true());
}

/* The unique chunk bytes of team's datasets plus those of extra (may be NULL). */
static uint64_t team_bytes(const struct master *m, const char *team, const json_t *extra)
{
	json_t *set = json_object(), *manifests = json_object();
	const char *key;
	json_t *v;
	uint64_t total = 0;

	for (size_t i = 0; i < m->ndatasets; i++) {
		const struct dataset *ds = m->datasets[i];
		if (!ds->team || strcmp(ds->team, team))
			continue;
		for (size_t k = 0; k < ds->nv; k++) {
			json_t *man;
			if (json_object_get(manifests, ds->v[k].digest))
				continue;
			json_object_set_new(manifests, ds->v[k].digest, json_true());
			if ((man = datasets_manifest(m, ds->v[k].digest)))
				add_chunks(set, man);
			json_decref(man);
		}
	}
	if (extra)
		add_chunks(set, extra);
	json_object_foreach(set, key, v) {
		int64_t s = blob_size(m, key);
		if (s > 0)
			total += (uint64_t)s;
	}
	json_decref(set);
	json_decref(manifests);
	return total;
}

static const struct data_quota *quota_of(const struct master *m, const char *team)
{
	for (size_t i = 0; team && i < m->ndata_quotas; i++)
		if (!strcmp(m->data_quotas[i].team, team))
			return &m->data_quotas[i];
	return NULL;
}

/* Validates man, and checks that every chunk is held and that each file's
 * chunks hold exactly its bytes: YERR(MISSING_CHUNKS) with *reply
 * {"missing": [...]} when some are not. */
static int manifest_check(struct master *m, const json_t *man, uint64_t *size, unsigned *files, json_t **reply,
			  struct errbuf *eb)
{
	json_t *missing, *f;
	size_t i;
	int ret;

	if ((ret = manifest_validate(man, size, files, eb)))
		return ret;
	missing = json_array();
	json_array_foreach(json_object_get(man, "files"), i, f) {
		const json_t *chunk;
		uint64_t sum = 0;
		size_t k;
		bool all = true;
		json_array_foreach(json_object_get(f, "chunks"), k, chunk) {
			int64_t s = blob_size(m, json_string_value(chunk));
			if (s < 0) {
				all = false;
				json_array_append(missing, (json_t *)chunk);
			} else {
				sum += (uint64_t)s;
			}
		}
		if (all && sum != (uint64_t)json_integer_value(json_object_get(f, "size"))) {
			char field[64];
			snprintf(field, sizeof(field), "manifest.files[%zu].size", i);
			json_decref(missing);
			return error_field(eb, YERR(BAD_REQUEST), field,
					   "%s: the file's chunks hold %" PRIu64 " bytes, not %" PRIu64,
					   field, sum, (uint64_t)json_integer_value(json_object_get(f, "size")));
		}
	}
	if (json_array_size(missing)) {
		size_t n = json_array_size(missing);
		*reply = json_pack("{s:o}", "missing", missing);
		return error_field(eb, YERR(MISSING_CHUNKS), "manifest",
				   "%zu chunks of the manifest are not held (PUT /v1/blobs/{digest} first)", n);
	}
	json_decref(missing);
	return 0;
}

/* Stores man as the manifest of digest, in the open batch. */
static int manifest_store(struct master *m, const json_t *man, const char *digest, struct errbuf *eb)
{
	char *text, name[DATASETS_NAME_MAX];
	int ret;

	if ((ret = core_batch_open(m))) {
		*eb = m->batch_eb;
		return ret;
	}
	text = json_dumps(man, JSON_COMPACT | JSON_SORT_KEYS);
	manifest_name(name, digest);
	ret = m->sops->blob_put(m->store, name, text, strlen(text), eb);
	free(text);
	return ret;
}

int datasets_manifest_put(struct master *m, const json_t *man, char digest[72], uint64_t *size, unsigned *files,
			  json_t **reply, struct errbuf *eb)
{
	int ret;

	*reply = NULL;
	if ((ret = manifest_check(m, man, size, files, reply, eb)))
		return ret;
	manifest_digest(man, digest);
	return manifest_store(m, man, digest, eb);
}

static json_t *version_reply(const struct dataset *ds, const struct dataset_version *v, bool created)
{
	return json_pack("{s:s, s:i, s:s, s:I, s:i, s:b, s:o}", "name", ds->name, "version",
			 (int)v->version, "digest", v->digest, "size", (json_int_t)v->size, "files",
			 (int)v->files, "created", created, "team",
			 ds->team ? json_string(ds->team) : json_null());
}

int datasets_create(struct master *m, const struct caller *c, const json_t *body, json_t **reply,
		    int *status, struct errbuf *eb)
{
	const char *name = json_string_value(json_object_get(body, "name"));
	const json_t *jteam = json_object_get(body, "team"), *man = json_object_get(body, "manifest");
	const char *team = c->team;
	struct dataset *ds;
	struct dataset_version *latest, *nv;
	const struct data_quota *q;
	char digest[72];
	uint64_t size = 0;
	unsigned files = 0;
	int ret;

	*reply = NULL;
	*status = 0;
	if (!dataset_name_valid(name))
		return error_field(eb, YERR(BAD_REQUEST), "name",
				   "name: expected [a-z0-9][a-z0-9_.-]{0,62}, got \"%.80s\"",
				   name ? name : "");
	if (jteam && !json_is_null(jteam)) {
		team = json_string_value(jteam);
		if (!spec_name_valid(team))
			return error_field(eb, YERR(BAD_REQUEST), "team",
					   "team: expected [a-z0-9][a-z0-9_.-]{0,62}");
		if (!visibility_team(c, team))
			return error_field(eb, YERR(FORBIDDEN), "team", "team: '%s' may not make datasets "
					   "of team '%s' (its token names %s%s%s)", c->user, team,
					   c->team ? "team '" : "no team", c->team ? c->team : "",
					   c->team ? "'" : "");
	}
	ds = datasets_find(m, name);
	if (ds && !visibility_dataset(m, c, ds))
		return error_field(eb, YERR(FORBIDDEN), "name", "dataset '%s' belongs to %s '%s': '%s' may "
				   "not add versions to it", ds->name, ds->team ? "team" : "user",
				   ds->team ? ds->team : ds->owner, c->user);
	if ((ret = manifest_check(m, man, &size, &files, reply, eb)))
		return ret;
	manifest_digest(man, digest);
	if (ds && ds->team)
		team = ds->team; /* a dataset stays with the team that made it */
	latest = ds ? datasets_version(ds, 0) : NULL;
	if (latest && !strcmp(latest->digest, digest)) {
		*reply = version_reply(ds, latest, false);
		*status = 200;
		return 0;
	}
	if ((q = quota_of(m, team))) {
		uint64_t need = team_bytes(m, team, man);
		if (need > q->bytes) {
			char qs[32], ns[32];
			format_size(q->bytes, qs, sizeof(qs));
			format_size(need, ns, sizeof(ns));
			return error(eb, YERR(QUOTA_EXCEEDED),
				     "team '%s' would hold %s (%" PRIu64 " bytes) of datasets, over its quota "
				     "of %s (%" PRIu64 " bytes)", team, ns, need, qs, q->bytes);
		}
	}
	if ((ret = manifest_store(m, man, digest, eb)))
		return ret;
	if (!ds) {
		ds = xcalloc(1, sizeof(*ds));
		ds->name = xstrdup(name);
		ds->team = team ? xstrdup(team) : NULL;
		ds->owner = xstrdup(c->user);
		ALLOC_GROW(m->datasets, m->ndatasets + 1, m->adatasets);
		m->datasets[m->ndatasets++] = ds;
	}
	ALLOC_GROW(ds->v, ds->nv + 1, ds->av);
	nv = &ds->v[ds->nv++];
	nv->version = ++ds->last_version;
	snprintf(nv->digest, sizeof(nv->digest), "%s", digest);
	nv->size = size;
	nv->files = files;
	nv->created_at = wall_us();
	core_save_dataset(m, ds);
	templates_on_version(m, ds->name, nv->version);
	*reply = version_reply(ds, nv, true);
	*status = 201;
	return 0;
}

static uint64_t ds_bytes(const struct dataset *ds)
{
	uint64_t s = 0;
	for (size_t i = 0; i < ds->nv; i++)
		s += ds->v[i].size;
	return s;
}

json_t *datasets_list_json(const struct master *m)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < m->ndatasets; i++) {
		const struct dataset *ds = m->datasets[i];
		const struct dataset_version *l = ds->nv ? &ds->v[ds->nv - 1] : NULL;
		json_array_append_new(arr, json_pack("{s:s, s:o, s:i, s:I, s:o}", "name", ds->name,
						     "latest", l ? json_integer(l->version) : json_null(),
						     "versions", (int)ds->nv, "size",
						     (json_int_t)(l ? l->size : 0), "team",
						     ds->team ? json_string(ds->team) : json_null()));
	}
	(void)ds_bytes;
	return json_pack("{s:o}", "datasets", arr);
}

static json_t *version_json(const struct dataset_version *v)
{
	return json_pack("{s:i, s:s, s:I, s:i, s:I}", "version", (int)v->version, "digest", v->digest,
			 "size", (json_int_t)v->size, "files", (int)v->files, "created_at",
			 (json_int_t)v->created_at);
}

json_t *datasets_json(const struct dataset *ds)
{
	json_t *vs = json_array();

	for (size_t i = 0; i < ds->nv; i++)
		json_array_append_new(vs, version_json(&ds->v[i]));
	return json_pack("{s:s, s:o, s:o}", "name", ds->name, "team",
			 ds->team ? json_string(ds->team) : json_null(), "versions", vs);
}

json_t *datasets_version_json(struct master *m, const struct dataset *ds,
			      const struct dataset_version *v, struct errbuf *eb)
{
	json_t *man = datasets_manifest(m, v->digest), *d;

	if (!man) {
		error(eb, YERR(IO), "the manifest of %s@%u (%s) is missing", ds->name, v->version, v->digest);
		return NULL;
	}
	d = version_json(v);
	json_object_set_new(d, "name", json_string(ds->name));
	json_object_set_new(d, "manifest", man);
	return d;
}

/* Whether a job that is not final uses ds (version n, 0: any). */
static bool job_uses(const struct job *j, const char *name, unsigned n)
{
	const json_t *e;
	size_t i;

	json_array_foreach(j->data, i, e) {
		const char *src = json_string_value(json_object_get(e, "source"));
		size_t len = strlen(name);
		uint64_t v;
		if (!src || strcmp(json_string_value(json_object_get(e, "kind")), "yard") ||
		    strncmp(src, "yard://", 7) || strncmp(src + 7, name, len) || src[7 + len] != '@')
			continue;
		if (!n || (!parse_u64_str(src + 8 + len, &v) && v == n))
			return true;
	}
	return false;
}

static void set_add(json_t *set, const char *digest)
{
	if (digest && dataset_digest_valid(digest))
		json_object_set_new(set, digest, json_true());
}

/* The manifests something still holds: dataset versions, tasks' outputs,
 * jobs' checkpoints and stored images, and what jobs that are not final read (an object used
 * as a set). */
static json_t *held_manifests(struct master *m)
{
	json_t *set = json_object(), *e;
	size_t i;

	for (size_t k = 0; k < m->ndatasets; k++)
		for (size_t v = 0; v < m->datasets[k]->nv; v++)
			set_add(set, m->datasets[k]->v[v].digest);
	for (size_t k = 0; k < m->njobs; k++) {
		const struct job *j = m->jobs[k];
		if (!j)
			continue;
		set_add(set, j->checkpoint);
		/* the image its task saved for the other nodes (images.h) */
		set_add(set, json_string_value(json_object_get(j->image_built, "stored")));
		for (size_t t = 0; t < j->ntasks; t++)
			set_add(set, j->tasks[t]->outputs);
		if (!job_state_is_final(j->state))
			json_array_foreach(j->data, i, e)
				set_add(set, json_string_value(json_object_get(e, "digest")));
	}
	return set;
}

/* Removes the dropped manifests (their digests, an array) that nothing
 * holds any more, with the chunks of theirs that no held manifest has. */
static void collect_garbage(struct master *m, const json_t *dropped)
{
	json_t *kept_manifests = held_manifests(m), *keep = json_object(), *d, *val;
	struct errbuf eb = ERRBUF_INIT;
	char name[DATASETS_NAME_MAX];
	const char *key;
	size_t i;

	json_object_foreach(kept_manifests, key, val) {
		json_t *man = datasets_manifest(m, key);
		if (man)
			add_chunks(keep, man);
		json_decref(man);
	}
	json_array_foreach(dropped, i, d) {
		const char *dg = json_string_value(d);
		json_t *man, *set;
		if (!dg || json_object_get(kept_manifests, dg))
			continue;
		man = datasets_manifest(m, dg);
		set = json_object();
		if (man)
			add_chunks(set, man);
		json_object_foreach(set, key, val) {
			if (!json_object_get(keep, key) && dataset_digest_valid(key)) {
				datasets_chunk_name(name, key);
				if (m->sops->blob_delete(m->store, name, &eb))
					fprintf(stderr, "yard master: %s\n", eb.msg);
				errbuf_reset(&eb);
			}
		}
		manifest_name(name, dg);
		if (m->sops->blob_delete(m->store, name, &eb))
			fprintf(stderr, "yard master: %s\n", eb.msg);
		errbuf_reset(&eb);
		json_decref(set);
		json_decref(man);
	}
	json_decref(keep);
	json_decref(kept_manifests);
}

void datasets_drop_manifest(struct master *m, const char *digest)
{
	if (!m->gc_digests)
		m->gc_digests = json_array();
	json_array_append_new(m->gc_digests, json_string(digest));
}

int datasets_delete(struct master *m, struct dataset *ds, unsigned n, json_t **jobs_out,
		    struct errbuf *eb)
{
	json_t *users = json_array(), *dropped = json_array();

	*jobs_out = NULL;
	for (size_t i = 0; i < m->njobs; i++) {
		const struct job *j = m->jobs[i];
		if (j && !job_state_is_final(j->state) && job_uses(j, ds->name, n))
			json_array_append_new(users, json_integer((json_int_t)j->id));
	}
	if (json_array_size(users)) {
		struct strbuf sb = STRBUF_INIT;
		size_t i;
		json_t *id;
		json_array_foreach(users, i, id)
			strbuf_addf(&sb, "%s%" JSON_INTEGER_FORMAT, i ? ", " : "", json_integer_value(id));
		error(eb, YERR(IN_USE), "%s%s%.0u is in use by job%s %s", ds->name, n ? "@" : "", n,
		      json_array_size(users) > 1 ? "s" : "", sb.buf);
		strbuf_release(&sb);
		*jobs_out = users;
		json_decref(dropped);
		return YERR(IN_USE);
	}
	json_decref(users);
	if (n) {
		size_t i;
		for (i = 0; i < ds->nv && ds->v[i].version != n; i++)
			;
		json_array_append_new(dropped, json_string(ds->v[i].digest));
		memmove(&ds->v[i], &ds->v[i + 1], (ds->nv - i - 1) * sizeof(*ds->v));
		ds->nv--;
	} else {
		for (size_t i = 0; i < ds->nv; i++)
			json_array_append_new(dropped, json_string(ds->v[i].digest));
		ds->nv = 0;
	}
	if (ds->nv) {
		core_save_dataset(m, ds);
	} else {
		/* no version left: the dataset goes (its name may be pushed again from 1) */
		core_delete_dataset(m, ds->name);
		for (size_t i = 0; i < m->ndatasets; i++)
			if (m->datasets[i] == ds)
				m->datasets[i] = m->datasets[--m->ndatasets];
		core_dataset_free(ds);
	}
	/* the files go only once the deletion is durable: a failed commit
	 * reloads these versions, which need their chunks */
	if (!m->gc_digests)
		m->gc_digests = json_array();
	json_array_extend(m->gc_digests, dropped);
	json_decref(dropped);
	return 0;
}

void datasets_collect_garbage(struct master *m, bool committed)
{
	if (m->gc_digests && committed) {
		if (!m->gc_pending)
			m->gc_pending = json_array();
		json_array_extend(m->gc_pending, m->gc_digests);
	}
	json_decref(m->gc_digests);
	m->gc_digests = NULL;
	datasets_collect_pending(m);
}

void datasets_collect_pending(struct master *m)
{
	int lock = -1;

	if (!m->gc_pending)
		return;
	if (m->sops->blobs_are_files && !backup_gc_begin(m->data_dir, &lock)) {
		if (!m->gc_wait_said)
			fprintf(stderr, "yard master: a backup runs (%s/backup.lock is held): unused blobs"
					" are removed once it ends\n", m->data_dir);
		m->gc_wait_said = true;
		return;
	}
	collect_garbage(m, m->gc_pending);
	backup_gc_end(lock);
	json_decref(m->gc_pending);
	m->gc_pending = NULL;
	m->gc_wait_said = false;
}

void datasets_gc_release(struct master *m)
{
	json_decref(m->gc_digests);
	m->gc_digests = NULL;
	json_decref(m->gc_pending);
	m->gc_pending = NULL;
	m->gc_wait_said = false;
}

int datasets_resolve(struct master *m, const struct caller *c, struct job_spec *spec, json_t **out,
		     struct errbuf *eb)
{
	json_t *arr;

	*out = NULL;
	if (!spec->ndata)
		return 0;
	arr = json_array();
	for (size_t i = 0; i < spec->ndata; i++) {
		struct spec_data *d = &spec->data[i];
		json_t *e = json_pack("{s:s, s:s, s:s}", "kind", spec_data_kind_name(d->kind), "source",
				      d->source, "mount", d->mount);
		if (d->kind == DATA_YARD) {
			struct dataset *ds = datasets_find(m, d->name);
			struct dataset_version *v = ds ? datasets_version(ds, d->version) : NULL;
			char field[48];
			snprintf(field, sizeof(field), "data[%zu].source", i);
			if (ds && !visibility_dataset(m, c, ds)) {
				json_decref(e);
				json_decref(arr);
				return error_field(eb, YERR(FORBIDDEN), field, "%s: dataset '%s' belongs to %s "
						   "'%s': '%s' may not use it", field, d->name,
						   ds->team ? "team" : "user", ds->team ? ds->team : ds->owner,
						   c->user);
			}
			if (!v) {
				json_decref(e);
				json_decref(arr);
				if (!ds)
					return error_field(eb, YERR(INVALID_SPEC), field, "%s: no dataset '%s'",
							   field, d->name);
				return error_field(eb, YERR(INVALID_SPEC), field,
						   "%s: dataset '%s' has no version %u", field, d->name,
						   d->version);
			}
			if (!d->version) {
				d->version = v->version;
				free(d->source);
				d->source = xasprintf("yard://%s@%u", d->name, v->version);
				json_object_set_new(e, "source", json_string(d->source));
			}
			json_object_set_new(e, "digest", json_string(v->digest));
			json_object_set_new(e, "size", json_integer((json_int_t)v->size));
		} else if (d->kind == DATA_HTTPS) {
			json_object_set_new(e, "sha256", json_string(d->sha256));
		} else if (d->kind == DATA_JOB) {
			int ret = jobsource_resolve(m, c, spec, i, e, eb);
			if (ret) {
				json_decref(e);
				json_decref(arr);
				return ret;
			}
		}
		json_array_append_new(arr, e);
	}
	*out = arr;
	return 0;
}
