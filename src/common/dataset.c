#include "base/compat.h"
#include "common/dataset.h"

#include "base/crypto.h"
#include "base/xalloc.h"

bool dataset_name_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n < 1 || n > 63 || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		      (i && strchr("_.-", s[i]))))
			return false;
	return true;
}

bool dataset_digest_valid(const char *s)
{
	if (!s || strncmp(s, "sha256:", 7) || strlen(s) != 7 + 64)
		return false;
	for (const char *p = s + 7; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

bool dataset_path_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	const char *c = s;

	if (n < 1 || n > DATASET_PATH_MAX || strchr(s, '\n'))
		return false;
	for (;;) {
		const char *e = strchr(c, '/');
		size_t len = e ? (size_t)(e - c) : strlen(c);
		if (!len || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!e)
			return true;
		c = e + 1;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static const char *const file_fields[] = { "path", "size", "mode", "chunks" };

int manifest_validate(const json_t *manifest, uint64_t *size_out, unsigned *files_out,
		      struct errbuf *eb)
{
	const json_t *files = json_object_get(manifest, "files"), *f;
	const char **paths = NULL;
	uint64_t total = 0;
	size_t i, n;
	int ret = 0;

	if (!json_is_object(manifest))
		return error_field(eb, YERR(BAD_REQUEST), "manifest", "manifest: expected an object");
	if (!json_is_array(files) || json_object_size(manifest) != 1)
		return error_field(eb, YERR(BAD_REQUEST), "manifest",
				   "manifest: expected an object with only \"files\", an array");
	n = json_array_size(files);
	if (n > DATASET_FILES_MAX)
		return error_field(eb, YERR(BAD_REQUEST), "manifest.files",
				   "manifest.files: more than %d files", DATASET_FILES_MAX);
	paths = xcalloc(n + 1, sizeof(*paths));
	json_array_foreach(files, i, f) {
		const json_t *jp = json_object_get(f, "path"), *js = json_object_get(f, "size");
		const json_t *jm = json_object_get(f, "mode"), *jc = json_object_get(f, "chunks"), *c;
		const char *path = json_string_value(jp);
		char field[96];
		json_int_t sz;
		size_t k;

		snprintf(field, sizeof(field), "manifest.files[%zu]", i);
		if (!json_is_object(f) || json_object_size(f) != ARRAY_SIZE(file_fields)) {
			ret = error_field(eb, YERR(BAD_REQUEST), field,
					  "%s: expected an object of path, size, mode and chunks", field);
			goto out;
		}
		for (k = 0; k < ARRAY_SIZE(file_fields); k++)
			if (!json_object_get(f, file_fields[k]))
				break;
		if (k < ARRAY_SIZE(file_fields)) {
			ret = error_field(eb, YERR(BAD_REQUEST), field, "%s: missing \"%s\"", field,
					  file_fields[k]);
			goto out;
		}
		if (!dataset_path_valid(path) || strlen(path) != json_string_length(jp)) {
			snprintf(field, sizeof(field), "manifest.files[%zu].path", i);
			ret = error_field(eb, YERR(BAD_REQUEST), field,
					  "%s: expected a relative path without empty, '.' or '..' "
					  "components, got \"%.80s\"", field, path ? path : "");
			goto out;
		}
		if (i && strcmp(paths[i - 1], path) >= 0) {
			snprintf(field, sizeof(field), "manifest.files[%zu].path", i);
			ret = error_field(eb, YERR(BAD_REQUEST), field,
					  "%s: \"%.80s\" %s", field, path,
					  strcmp(paths[i - 1], path) ? "is out of order (paths are sorted by byte order)"
								     : "is listed twice");
			goto out;
		}
		paths[i] = path;
		sz = json_integer_value(js);
		if (!json_is_integer(js) || sz < 0) {
			snprintf(field, sizeof(field), "manifest.files[%zu].size", i);
			ret = error_field(eb, YERR(BAD_REQUEST), field, "%s: expected an integer >= 0", field);
			goto out;
		}
		if (!json_is_integer(jm) || json_integer_value(jm) < 0 || json_integer_value(jm) > 0777) {
			snprintf(field, sizeof(field), "manifest.files[%zu].mode", i);
			ret = error_field(eb, YERR(BAD_REQUEST), field,
					  "%s: expected permission bits 0..0777 (0..511)", field);
			goto out;
		}
		snprintf(field, sizeof(field), "manifest.files[%zu].chunks", i);
		if (!json_is_array(jc)) {
			ret = error_field(eb, YERR(BAD_REQUEST), field, "%s: expected an array", field);
			goto out;
		}
		{
			uint64_t s = (uint64_t)sz, nc = json_array_size(jc);
			uint64_t least = (s + DATASET_CHUNK_MAX - 1) / DATASET_CHUNK_MAX;
			if (nc < least || nc > s) {
				ret = error_field(eb, YERR(BAD_REQUEST), field,
						  "%s: %" PRIu64 " chunks cannot hold %" PRIu64 " bytes",
						  field, nc, s);
				goto out;
			}
			if (total + s < total) {
				ret = error_field(eb, YERR(BAD_REQUEST), field, "%s: sizes overflow", field);
				goto out;
			}
			total += s;
		}
		json_array_foreach(jc, k, c) {
			if (!dataset_digest_valid(json_string_value(c))) {
				snprintf(field, sizeof(field), "manifest.files[%zu].chunks[%zu]", i, k);
				ret = error_field(eb, YERR(BAD_REQUEST), field,
						  "%s: expected \"sha256:\" and 64 lowercase hex digits", field);
				goto out;
			}
		}
	}
	/* no file is also a directory of another: look each parent up */
	for (i = 0; i < n; i++) {
		char *p = xstrdup(paths[i]);
		for (char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
			const char *key = p;
			*s = '\0';
			if (bsearch(&key, paths, n, sizeof(*paths), cmp_str)) {
				char field[96];
				snprintf(field, sizeof(field), "manifest.files[%zu].path", i);
				ret = error_field(eb, YERR(BAD_REQUEST), field,
						  "%s: \"%.80s\" is inside \"%.80s\", which is a file",
						  field, paths[i], p);
				free(p);
				goto out;
			}
			*s = '/';
		}
		free(p);
	}
	if (size_out)
		*size_out = total;
	if (files_out)
		*files_out = (unsigned)n;
out:
	free(paths);
	return ret;
}

void manifest_digest(const json_t *manifest, char out[72])
{
	char *text = json_dumps(manifest, JSON_COMPACT | JSON_SORT_KEYS);
	char hex[SHA256_HEX_LEN + 1];

	sha256_hex(text ? text : "", text ? strlen(text) : 0, hex);
	snprintf(out, 72, "sha256:%s", hex);
	free(text);
}

static const char *path_of(const json_t *f)
{
	const char *p = json_string_value(json_object_get(f, "path"));
	return p ? p : "";
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(path_of(*(json_t *const *)a), path_of(*(json_t *const *)b));
}

json_t *manifest_merge(const char *const *dirs, json_t *const *manifests, size_t n)
{
	json_t **all = NULL, *files = json_array();
	size_t nall = 0, aall = 0;

	for (size_t i = 0; i < n; i++) {
		const json_t *f;
		size_t k;
		json_array_foreach(json_object_get(manifests[i], "files"), k, f) {
			const char *path = path_of(f);
			json_t *copy = json_deep_copy(f);
			if (*dirs[i]) {
				char *p = xasprintf("%s/%s", dirs[i], path);
				json_object_set_new(copy, "path", json_string(p));
				free(p);
			}
			ALLOC_GROW(all, nall + 1, aall);
			all[nall++] = copy;
		}
	}
	sort_array(all, nall, sizeof(*all), cmp_path);
	for (size_t i = 0; i < nall; i++)
		json_array_append_new(files, all[i]);
	free(all);
	return json_pack("{s:o}", "files", files);
}
