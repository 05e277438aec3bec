/*
 * HTTP answers of the store's blobs (store.h: logs, code archives,
 * checkpoints, dataset chunks), whichever backend holds them: sent from the
 * file when the store keeps one (sendfile), else from memory, read from the
 * store in pieces as the answer goes out when it is longer than one read.
 */
#ifndef YARD_MASTER_BLOBREPLY_H
#define YARD_MASTER_BLOBREPLY_H

#include <stdint.h>

#include "base/error.h"

struct master;
struct req;
struct MHD_Response;

/* blob_response: an answer of at most n bytes of blob name from off. OUT
 * *len: the bytes it holds. NULL (eb says why) when the store cannot read
 * it. */
struct MHD_Response *blob_response(struct master *m, const char *name, uint64_t off, uint64_t n,
				   uint64_t *len, struct errbuf *eb);

/* reply_whole_blob answers r with the whole blob name as ctype, or 404
 * "no WHAT 'KEY'" when the store has none. */
void reply_whole_blob(struct req *r, const char *name, const char *ctype, const char *what,
		      const char *key);

#endif
