/* The data section of a job spec (spec.h, docs/datasets.md): its parsing,
 * canonical form and release, apart from spec.c. */
#include "base/compat.h"
#include "common/spec_data.h"

#include <inttypes.h>

#include "base/parse.h"
#include "base/xalloc.h"
#include "common/dataset.h"
#include "common/spec_fields.h"

/* A field that is absent or null takes its default. */
static const json_t *field(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	return json_is_null(v) ? NULL : v;
}


static const char *const data_kind_names[] = { "yard", "s3", "https", "file", "job" };
static_assert(ARRAY_SIZE(data_kind_names) == DATA_KIND__COUNT, "data kind names");

const char *spec_data_kind_name(enum spec_data_kind k) { return data_kind_names[k]; }

static const char *const data_fields[] = { "source", "mount", "sha256", NULL };

/* A mount: 1..8 components [A-Za-z0-9._-]+, none "." or "..". */
static bool mount_valid(const char *s)
{
	unsigned ncomp = 0;
	const char *c = s;

	if (!*s || strlen(s) > 1024)
		return false;
	for (;;) {
		size_t len = strspn(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-");
		if (!len || (len == 1 && c[0] == '.') || (len == 2 && !strncmp(c, "..", 2)) || ++ncomp > 8)
			return false;
		c += len;
		if (!*c)
			return true;
		if (*c != '/')
			return false;
		c++;
	}
}

/* The last non-empty '/'-component of s[0..len), a new string ("" if none). */
static char *last_component(const char *s, size_t len)
{
	while (len && s[len - 1] == '/')
		len--;
	size_t start = len;
	while (start && s[start - 1] != '/')
		start--;
	return xstrndup(s + start, len - start);
}

/* Whether a '/'-separated path has a ".." component. */
static bool has_dotdot(const char *p)
{
	for (const char *c = p; (c = strstr(c, "..")); c += 2)
		if ((c == p || c[-1] == '/') && (c[2] == '\0' || c[2] == '/'))
			return true;
	return false;
}

static bool hex64(const char *s)
{
	if (!s || strlen(s) != 64)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* Parses one source into d (kind, name, version) and *def, the default mount
 * (caller frees). Returns NULL or what is wrong. */
static const char *parse_source(const char *src, struct spec_data *d, char **def)
{
	for (const char *p = src; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return "expected a URL without spaces or control characters";
	if (!strncmp(src, "yard://", 7)) {
		const char *name = src + 7, *at = strchr(name, '@');
		char *n = at ? xstrndup(name, (size_t)(at - name)) : xstrdup(name);
		d->kind = DATA_YARD;
		if (!dataset_name_valid(n)) {
			free(n);
			return "expected yard://NAME[@VERSION], NAME [a-z0-9][a-z0-9_.-]{0,62}";
		}
		if (at) {
			uint64_t v;
			if (at[1] == '0' || parse_u64_str(at + 1, &v) < 0 || !v || v > UINT_MAX) {
				free(n);
				return "expected yard://NAME[@VERSION], VERSION an integer >= 1";
			}
			d->version = (unsigned)v;
		}
		d->name = n;
		*def = xstrdup(n);
		return NULL;
	}
	if (!strncmp(src, "yard-job://", 11)) {
		const char *rest = src + 11, *slash = strchr(rest, '/');
		char *id = slash ? xstrndup(rest, (size_t)(slash - rest)) : NULL;
		int bad = !id || id[0] == '0' || parse_u64_str(id, &d->job) || !d->job;
		free(id);
		d->kind = DATA_JOB;
		if (bad || (strcmp(slash, "/outputs") && strcmp(slash, "/checkpoint")))
			return "expected yard-job://ID/outputs or yard-job://ID/checkpoint, ID a job id";
		d->checkpoint = !strcmp(slash, "/checkpoint");
		*def = xasprintf("job-%" PRIu64 "%s", d->job, d->checkpoint ? "-checkpoint" : "");
		return NULL;
	}
	if (!strncmp(src, "s3://", 5)) {
		const char *b = src + 5, *slash = strchr(b, '/');
		size_t blen = slash ? (size_t)(slash - b) : strlen(b);
		d->kind = DATA_S3;
		if (blen < 2 || blen > 63 || strspn(b, "abcdefghijklmnopqrstuvwxyz0123456789.-") < blen ||
		    b[0] == '.' || b[0] == '-')
			return "expected s3://BUCKET[/PREFIX], BUCKET [a-z0-9][a-z0-9.-]{1,62}";
		if (slash && has_dotdot(slash))
			return "the prefix may not have a '..' component";
		*def = last_component(src + 5, strlen(src + 5));
		return NULL;
	}
	if (!strncmp(src, "https://", 8) || !strncmp(src, "http://", 7)) {
		const char *host = src + (src[4] == 's' ? 8 : 7);
		size_t hlen = strcspn(host, "/?#");
		d->kind = DATA_HTTPS;
		if (!hlen)
			return "expected https://HOST/PATH";
		if (src[4] != 's') {
			/* plain http only to this machine (tests) */
			static const char *const loop[] = { "127.0.0.1", "localhost", "[::1]" };
			bool ok = false;
			for (size_t i = 0; i < ARRAY_SIZE(loop); i++) {
				size_t l = strlen(loop[i]);
				ok |= !strncmp(host, loop[i], l) && (hlen == l || host[l] == ':');
			}
			if (!ok)
				return "http:// is only for a loopback host; use https://";
		}
		*def = last_component(host + hlen, strcspn(host + hlen, "?#"));
		return NULL;
	}
	if (!strncmp(src, "file:///", 8)) {
		d->kind = DATA_FILE;
		if (has_dotdot(src + 7))
			return "the path may not have a '..' component";
		*def = last_component(src + 7, strlen(src + 7));
		return NULL;
	}
	return "expected yard://NAME[@N], yard-job://ID/outputs, s3://BUCKET/PREFIX, https://HOST/PATH or "
	       "file:///PATH";
}

int spec_get_data(const json_t *v, struct job_spec *spec, struct errbuf *eb)
{
	const json_t *e;
	size_t i;
	int ret;

	if (!v)
		return 0;
	if (!json_is_array(v))
		return spec_bad_got(eb, "data", "a list of {source, mount}", v);
	if (json_array_size(v) > SPEC_MAX_DATA)
		return spec_bad(eb, "data", "at most %d entries", SPEC_MAX_DATA);
	spec->data = xcalloc(json_array_size(v) + 1, sizeof(*spec->data));
	json_array_foreach(v, i, e) {
		struct spec_data *d = &spec->data[spec->ndata++];
		const json_t *src = field(e, "source"), *mnt = field(e, "mount"), *sha = field(e, "sha256");
		char path[64], *def = NULL;

		const char *why;

		snprintf(path, sizeof(path), "data[%zu]", i);
		if (!json_is_object(e))
			return spec_bad_got(eb, path, "a mapping such as {source: yard://digits@1, mount: digits}", e);
		if ((ret = spec_check_known(e, data_fields, path, eb)) < 0)
			return ret;
		snprintf(path, sizeof(path), "data[%zu].source", i);
		if (!src)
			return spec_bad(eb, path, "required");
		if (!json_is_string(src) || json_string_length(src) > SPEC_MAX_STRING)
			return spec_bad_got(eb, path, "a URL", src);
		if ((ret = spec_check_string(src, path, eb)) < 0)
			return ret;
		d->source = xstrdup(json_string_value(src));
		if ((why = parse_source(d->source, d, &def)))
			return spec_bad(eb, path, "%s, got \"%.80s\"", why, d->source);
		d->mount = def; /* the default, replaced by mount when given */
		snprintf(path, sizeof(path), "data[%zu].sha256", i);
		if (d->kind == DATA_HTTPS) {
			if (!sha)
				return spec_bad(eb, path, "required for an https source (64 lowercase hex digits)");
			if (!hex64(json_string_value(sha)))
				return spec_bad_got(eb, path, "64 lowercase hex digits", sha);
			d->sha256 = xstrdup(json_string_value(sha));
		} else if (sha) {
			return spec_bad(eb, path, "only an https source takes a checksum");
		}
		snprintf(path, sizeof(path), "data[%zu].mount", i);
		if (mnt) {
			free(d->mount);
			d->mount = NULL;
			if (!json_is_string(mnt) || !mount_valid(json_string_value(mnt)))
				return spec_bad_got(eb, path,
					       "a relative path of 1..8 components [A-Za-z0-9._-]+, no '.' or '..'",
					       mnt);
			d->mount = xstrdup(json_string_value(mnt));
		} else {
			if (!mount_valid(def))
				return spec_bad(eb, path, "required: the default '%.80s' (from the source) is not a "
					   "valid mount", def);
		}
		for (size_t k = 0; k + 1 < spec->ndata; k++) {
			const char *a = spec->data[k].mount, *b = d->mount;
			size_t la = strlen(a), lb = strlen(b);
			if (!strcmp(a, b))
				return spec_bad(eb, path, "'%s' is the mount of data[%zu] too", b, k);
			if ((la < lb && !strncmp(a, b, la) && b[la] == '/') ||
			    (lb < la && !strncmp(a, b, lb) && a[lb] == '/'))
				return spec_bad(eb, path, "'%s' and data[%zu]'s mount '%s' are inside one another",
					   b, k, a);
		}
	}
	return 0;
}

json_t *spec_data_to_json(const struct job_spec *spec)
{
	json_t *data;

	if (!spec->ndata)
		return json_null();
	data = json_array();
	for (size_t i = 0; i < spec->ndata; i++) {
		const struct spec_data *d = &spec->data[i];
		json_array_append_new(data, json_pack("{s:s, s:s, s:o}", "source", d->source, "mount", d->mount,
						      "sha256", d->sha256 ? json_string(d->sha256) : json_null()));
	}
	return data;
}

void spec_data_release(struct job_spec *spec)
{
	for (size_t i = 0; i < spec->ndata; i++) {
		free(spec->data[i].source);
		free(spec->data[i].mount);
		free(spec->data[i].sha256);
		free(spec->data[i].name);
	}
	free(spec->data);
	spec->data = NULL;
	spec->ndata = 0;
}
