/*
 * What httpc.c shares with its transports (httpc_curl.c, httpc_ev.c) and
 * nobody else: not part of the client's API.
 */
#ifndef YARD_HTTPC_IMPL_H
#define YARD_HTTPC_IMPL_H

#include "common/httpc.h"

/* httpc_standby_answer: whether res is a standby's answer (503
 * not_leader); if so, *leader gets the leader it names (caller frees), or
 * NULL when it names none, or one of another scheme than base's (never
 * sent from https to plain http). */
bool httpc_standby_answer(const struct httpc_response *res, const char *base, char **leader);

/* httpc_leader_index: the index in c->urls of a leader URL, added when it
 * is not there; SIZE_MAX when the list is full. */
size_t httpc_leader_index(struct httpc *c, const char *leader);

#endif
