/*
 * The jobs of each code and checkpoint digest ("sha256:HEX"), so that the
 * visibility rule answers "may this caller read this digest?" by looking
 * at the jobs that have it, not at every job (a scan of 100,000 jobs took
 * 4.7 ms of the master's one thread per GET /v1/code: bench/visibility).
 * The same map of strings to job ids finds the job of a submission's
 * idempotency key (core_find_submit_key).
 *
 * Entries are only ever added (jobs are never deleted): a job whose
 * checkpoint has moved on stays listed under the old digest, so a reader
 * checks each listed job again. In memory only: core_load rebuilds it.
 */
#ifndef YARD_MASTER_CODEINDEX_H
#define YARD_MASTER_CODEINDEX_H

#include <stddef.h>
#include <stdint.h>

struct codeindex; /* private to codeindex.c */

/* The store's blob of an archive (code or checkpoint) of sha256 hex:
 * "code/HEX.tar.gz" (store.h's blobs), written into out. */
#define CODE_NAME_MAX 80
void code_blob_name(char out[CODE_NAME_MAX], const char *hex);

/* codeindex_add lists job_id under digest (NULL: nothing); *ix is made on
 * first use. Adding the id last added under digest again does nothing. */
void codeindex_add(struct codeindex **ix, const char *digest, uint64_t job_id);
/* codeindex_find: the ids listed under digest (borrowed, valid until the
 * next add), *n how many; NULL when none. */
const uint64_t *codeindex_find(const struct codeindex *ix, const char *digest, size_t *n);
/* codeindex_free frees *ix and sets it NULL. */
void codeindex_free(struct codeindex **ix);

#endif
