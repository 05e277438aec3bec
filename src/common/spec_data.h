/*
 * The data section of a job spec (docs/datasets.md, "The spec"): up to
 * SPEC_MAX_DATA {source, mount, sha256} entries, each source one of
 * yard://NAME[@N], yard-job://ID/outputs|checkpoint, s3://BUCKET[/PREFIX],
 * https://HOST/PATH (with sha256) and file:///PATH, each mount defaulted
 * from its source and none inside another. Private to spec.c.
 */
#ifndef YARD_COMMON_SPEC_DATA_H
#define YARD_COMMON_SPEC_DATA_H

#include <jansson.h>

#include "base/error.h"
#include "common/spec.h"

/* spec_get_data parses v (NULL: none) into spec->data; errors name the
 * field, data[I].source. */
int spec_get_data(const json_t *v, struct job_spec *spec, struct errbuf *eb);
/* spec_data_to_json: the canonical data section (null when none; new reference). */
json_t *spec_data_to_json(const struct job_spec *spec);
/* spec_data_release frees spec's data entries. */
void spec_data_release(struct job_spec *spec);

#endif
