#ifndef YARD_MASTER_NODEREPORT_H
#define YARD_MASTER_NODEREPORT_H
/*
 * What an agent says of its node (docs/protocol.md): the checks of a
 * registration's body, and the parts of a registration or status report
 * that are the node's own (its GPUs, their utilisation, its cache). The
 * node's lifecycle and its tasks are jobs.c's.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "master/core.h"

/* nodereport_check_registration: 0 when body (POST /v1/agents) is one the
 * master takes, with *runtimes and the port range read from it (the range
 * is left as it is when the body has none); else 400 naming the field. */
int nodereport_check_registration(const json_t *body, unsigned *runtimes, json_int_t *port_lo,
				  json_int_t *port_hi, struct errbuf *eb);

/* nodereport_u64: o's member k as a count: a positive integer (or a real
 * below 2^64); 0 for anything else. */
uint64_t nodereport_u64(const json_t *o, const char *k);

/* nodereport_printable: v is a string of 1 to max bytes, none a control
 * character (what the master shows as an agent said it). */
bool nodereport_printable(const json_t *v, size_t max);

/* nodereport_set_gpus replaces n's GPUs by a checked registration's "gpus". */
void nodereport_set_gpus(struct node *n, const json_t *gpus);

/* nodereport_set_cache replaces n's cache keys by a reported "cache" array
 * of "yard-HEX"-like strings; absent or malformed leaves them as they are
 * (older agents). */
void nodereport_set_cache(struct node *n, const json_t *cache);

/* nodereport_set_util takes a status report's "gpus": [{"index", "util"}],
 * the utilisation of the node's GPUs (0-100, null when NVML cannot tell);
 * anything malformed is ignored entry by entry. Whether the report had any. */
bool nodereport_set_util(struct node *n, const json_t *gpus);

#endif
