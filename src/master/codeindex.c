#include "base/compat.h"
#include "master/codeindex.h"

#include "base/xalloc.h"

struct code_entry {
	char *digest;           /* owned; NULL: an empty slot */
	uint64_t *ids;          /* owned, in the order they were added */
	size_t n, a;
};

struct codeindex {
	struct code_entry *slots; /* open addressing, linear probing */
	size_t cap;             /* a power of two */
	size_t used;
};

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct code_entry *slot_of(const struct codeindex *ix, const char *digest)
{
	size_t i = (size_t)hash(digest) & (ix->cap - 1);

	while (ix->slots[i].digest && strcmp(ix->slots[i].digest, digest))
		i = (i + 1) & (ix->cap - 1);
	return &ix->slots[i];
}

/* Doubles the table (and makes the first one). */
static void grow(struct codeindex *ix)
{
	struct code_entry *old = ix->slots;
	size_t oldcap = ix->cap;

	ix->cap = oldcap ? oldcap * 2 : 64;
	ix->slots = xcalloc(ix->cap, sizeof(*ix->slots));
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].digest)
			*slot_of(ix, old[i].digest) = old[i];
	free(old);
}

void codeindex_add(struct codeindex **ixp, const char *digest, uint64_t job_id)
{
	struct codeindex *ix;
	struct code_entry *e;

	if (!digest)
		return;
	if (!*ixp)
		*ixp = xcalloc(1, sizeof(**ixp));
	ix = *ixp;
	if (2 * (ix->used + 1) > ix->cap)
		grow(ix);
	e = slot_of(ix, digest);
	if (!e->digest) {
		e->digest = xstrdup(digest);
		ix->used++;
	}
	if (e->n && e->ids[e->n - 1] == job_id)
		return;
	ALLOC_GROW(e->ids, e->n + 1, e->a);
	e->ids[e->n++] = job_id;
}

const uint64_t *codeindex_find(const struct codeindex *ix, const char *digest, size_t *n)
{
	const struct code_entry *e = ix ? slot_of(ix, digest) : NULL;

	*n = e && e->digest ? e->n : 0;
	return *n ? e->ids : NULL;
}

void codeindex_free(struct codeindex **ixp)
{
	struct codeindex *ix = *ixp;

	if (!ix)
		return;
	for (size_t i = 0; i < ix->cap; i++) {
		free(ix->slots[i].digest);
		free(ix->slots[i].ids);
	}
	free(ix->slots);
	free(ix);
	*ixp = NULL;
}

void code_blob_name(char out[CODE_NAME_MAX], const char *hex)
{
	snprintf(out, CODE_NAME_MAX, "code/%.64s.tar.gz", hex);
}
