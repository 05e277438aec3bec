/*
 * What spec.c shares with specset.c (`--set PATH=VALUE`), private to the
 * two: the known field names of each part of a spec, the YAML 1.2 typing of
 * a plain scalar, and the errors a field gets, so that a path or value given
 * with --set is checked and refused exactly as the same field in the file.
 */
#ifndef YARD_COMMON_SPEC_FIELDS_H
#define YARD_COMMON_SPEC_FIELDS_H

#include <jansson.h>
#include <stdbool.h>

#include "base/error.h"

/* The longest string a field takes, in bytes. */
#define SPEC_MAX_STRING 4096

/* spec_check_known refuses the first key of obj (in document order) that
 * is not in known (NULL-terminated), suggesting the closest known name
 * within an edit distance of 2; the path is prefix.KEY. */
int spec_check_known(const json_t *obj, const char *const *known, const char *prefix,
		     struct errbuf *eb);

/* The known fields (NULL-terminated) of a spec's top level, of a role under
 * tasks, of placement, of restart, of preemption and of interactive. */
extern const char *const spec_top_fields[];
extern const char *const spec_role_fields[];
extern const char *const spec_placement_fields[];
extern const char *const spec_restart_fields[];
extern const char *const spec_preemption_fields[];
extern const char *const spec_interactive_fields[];

bool spec_is_one_of(const char *s, const char *const *words);
/* spec_resolve_plain: the JSON value of a YAML plain scalar (the 1.2 core
 * schema); NULL with *why saying what is wrong with the text. */
json_t *spec_resolve_plain(const char *s, const char **why);
/* Every validation error: "PATH: MESSAGE", field PATH, YERR(INVALID_SPEC). */
int spec_bad(struct errbuf *eb, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* spec_show writes a short JSON rendering of v into buf (at least
 * SPEC_SHOW_MAX + 8 bytes), for "got VALUE". */
#define SPEC_SHOW_MAX 80
void spec_show(const json_t *v, char *buf, size_t size);
/* spec_bad_got: "PATH: expected WHAT, got VALUE". */
int spec_bad_got(struct errbuf *eb, const char *path, const char *what, const json_t *v);
/* spec_ident_valid: a parameter or variable name, letters, digits and '_',
 * at most 64, not starting with a digit. */
bool spec_ident_valid(const char *s);
/* spec_vars_parse: a mapping of variable names (spec_ident_valid, not
 * YARD_) to strings, numbers or bools (env, image.build.args) into *out, an
 * object of their texts; NULL v: an empty one. Errors name PATH.KEY. */
int spec_vars_parse(const json_t *v, const char *path, json_t **out, struct errbuf *eb);
/* spec_check_string: a string value's length and characters (valid UTF-8,
 * no NUL), as an error about path. */
int spec_check_string(const json_t *v, const char *path, struct errbuf *eb);
/* spec_closest: the name in names within an edit distance of 2 of key, the
 * nearest first in the list on a tie; NULL when none is. */
const char *spec_closest(const char *key, const char *const *names);
/* spec_unknown_field: "PATH: unknown field (did you mean 'NAME'?)". */
int spec_unknown_field(struct errbuf *eb, const char *path, const char *key,
		       const char *const *known);

#endif
