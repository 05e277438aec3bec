/*
 * The HTTP proxy to a port of a task (docs/protocol.md, "Proxy"):
 *
 *   GET|HEAD|POST|PUT|DELETE|PATCH /v1/jobs/{id}/proxy/ROLE/INDEX/PORT/REST
 *
 * reaches 127.0.0.1:PORT in the node of task ROLE/INDEX of the job's
 * current attempt, through the session transport (master/sessions.h): each
 * request is a session of its own, of kind http, or ws for a WebSocket
 * upgrade, whose agent leg the agent splices to that port. The master
 * never dials the node.
 *
 * http: the request goes upstream as HTTP/1.0 with "Connection: close" and
 * its target as it came (path and query unchanged: the upstream serves
 * under the proxy's path, as Jupyter does with its base_url), its body
 * streamed after it as MHD hands it over (a full buffer holds the request
 * until the agent leg takes more). The upstream's response head is read
 * off the agent leg (at most HTTP_HEAD_MAX), answered to the client
 * without its hop-by-hop fields, and its body streamed until the upstream
 * closes, the request held (suspended) while no bytes are there.
 *
 * ws: the upgrade goes upstream as HTTP/1.1 with the client's
 * Sec-WebSocket-* fields; an upstream's 101 is answered to the client as
 * the master's own 101 with the upstream's fields (its accept key,
 * protocol and extensions), and from then on the session relays raw bytes
 * both ways (the two ends speak WebSocket; the master reads none of it).
 * Any other answer is streamed as an http answer.
 *
 * The client's credentials for the master stay with the master: its
 * Authorization field and its cookie yard_token never go upstream, and an
 * upstream's Set-Cookie of yard_token never reaches the client.
 */
#ifndef YARD_MASTER_PROXY_H
#define YARD_MASTER_PROXY_H

#include "master/proxyhead.h"

struct req;

/* How long an upstream has to start its answer (the whole head). */
#define PROXY_HEAD_TIMEOUT_MS (5 * 60 * 1000)

/* The proxy route's handler (all its methods): the route layer has
 * checked the caller against job {id} (scope job). */
void proxy_handle(struct req *r);

#endif
