/*
 * The spec's `after` field: the jobs a job waits for (docs/pipelines.md).
 *
 *   after: [12, 13]           start once jobs 12 and 13 succeeded; if one of
 *                             them fails or is cancelled, the job fails
 *                             without running (after_ok)
 *   after: {any: [12, 13]}    start once 12 and 13 are final, whatever
 *                             their outcome
 *
 * Ids are integers >= 1, at most SPEC_AFTER_MAX of them, no repeats; null,
 * [] and {any: []} count as absent. Whether the ids name jobs the submitter
 * may see is the master's to check (control.h).
 */
#ifndef YARD_COMMON_SPEC_AFTER_H
#define YARD_COMMON_SPEC_AFTER_H

#include <jansson.h>

#include "base/error.h"

#define SPEC_AFTER_MAX 64

struct job_spec;

/* spec_after_parse validates v (NULL or null: none) into spec->after,
 * spec->nafter and spec->after_any (spec_release frees them); errors name
 * the field ("after[1]: expected a job id (an integer >= 1), got "x""). */
int spec_after_parse(const json_t *v, struct job_spec *spec, struct errbuf *eb);
/* spec_after_to_json sets doc's "after" to the canonical form, [IDS] or
 * {"any": [IDS]}; a spec without `after` leaves it absent, so that the
 * canonical form of specs from before the field reads the same. */
void spec_after_to_json(const struct job_spec *spec, json_t *doc);

#endif
