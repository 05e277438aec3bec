/*
 * A client of the Docker Engine API (v1.41) over the engine's unix socket,
 * on libcurl. Podman's Docker-compatible service (`podman system service`)
 * answers the same calls, so one code path serves both. The docker CLI is
 * never run.
 *
 * One struct docker per thread: it keeps its connection between calls. Calls
 * block; the agent makes them only at start-up, the container shim
 * (shim_docker.c) for everything else.
 */
#ifndef YARD_AGENT_DOCKER_H
#define YARD_AGENT_DOCKER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

struct docker {
	void *curl;     /* CURL *, owned */
	char *socket;   /* owned: the engine's unix socket */
	/* NULL, or: a streamed call (a build, pull, push or load) stops as
	 * a failed one, YERR(UNAVAILABLE) "stopped: ...", once stopping() is
	 * true (libcurl asks about once a second, and as data moves); the
	 * engine drops a build whose client went away */
	bool (*stopping)(void);
};

void docker_init(struct docker *d, const char *socket);
void docker_release(struct docker *d);

/* docker_call sends METHOD /v1.41PATH (PATH already escaped) with an
 * optional JSON body. OUT: *status (the HTTP status) and, when out is not
 * NULL and the reply is JSON, *out (new reference or NULL). A failed
 * transport is YERR(UNAVAILABLE); an answer >= 400 is returned as 0 with its
 * status, and the engine's "message" in eb (callers decide what it means). */
int docker_call(struct docker *d, const char *method, const char *path, const json_t *body,
		long *status, json_t **out, struct errbuf *eb);

/* docker_engine describes what answers on the socket ("Docker Engine
 * 20.10.24", "Podman Engine 4.3.1"): 0 and *out (caller frees), or the
 * transport's error. */
int docker_engine(struct docker *d, char **out, struct errbuf *eb);

/* docker_pull asks the engine to pull IMAGE ("name[:tag]" or "name@digest")
 * with AUTH, the registry's credential as X-Registry-Auth takes it (NULL:
 * none): 0 once it has it; YERR(NOT_FOUND) when the registry has no such image,
 * YERR(UNAVAILABLE) when the pull failed otherwise (no registry reachable,
 * denied, ...), with the engine's reason in eb. */
int docker_pull(struct docker *d, const char *image, const char *auth, struct errbuf *eb);

/* The container's output as the attach stream delivers it: STREAM is 1 for
 * stdout, 2 for stderr. Returns 0, or non-zero to stop reading. */
typedef int (*docker_sink_fn)(void *arg, int stream, const char *buf, size_t len);

/* docker_attach streams the container's stdout and stderr to sink until the
 * container exits (the engine closes the stream). on_ready(arg, ok) is
 * called once, when the engine has answered (ok: it took the attach) or the
 * call failed, so that a caller can start the container only after the
 * attach is in place. 0 when the stream ended, else why not. */
int docker_attach(struct docker *d, const char *id, docker_sink_fn sink,
		  void (*on_ready)(void *arg, bool ok), void *arg, struct errbuf *eb);

/* docker_logs replays everything the container wrote (the engine's log) and
 * follows it until the container ends; for one already ended it returns
 * after the replay. on_ready as for docker_attach. */
int docker_logs(struct docker *d, const char *id, docker_sink_fn sink,
		void (*on_ready)(void *arg, bool ok), void *arg, struct errbuf *eb);

/* docker_build builds the image TAG (POST /build) from CONTEXT, a tar
 * archive (gzip'd or not) of LEN bytes, with its DOCKERFILE (a path in it)
 * and ARGS (an object of strings: the build's ARGs). The build's output
 * goes to sink as stream 1, as it comes. 0 when built; YERR(BAD_REQUEST)
 * with the engine's error in eb when the build failed or was refused;
 * YERR(UNAVAILABLE) when the engine cannot be reached. */
int docker_build(struct docker *d, const char *tag, const char *dockerfile, const json_t *args,
		 const void *context, size_t len, docker_sink_fn sink, void *arg, struct errbuf *eb);

/* docker_push pushes IMAGE (REGISTRY/PATH:TAG) to its registry with AUTH
 * (as docker_pull's; NULL: none): 0, or the
 * engine's error (YERR(BAD_REQUEST)) or YERR(UNAVAILABLE) when the engine
 * cannot be reached. */
int docker_push(struct docker *d, const char *image, const char *auth, struct errbuf *eb);

/* docker_save writes IMAGE, as the engine saves it (GET
 * /images/{name}/get: a tar of its layers, config and tag, what `docker
 * save` writes), to FD as it comes: 0; YERR(BAD_REQUEST) with the engine's
 * words when it refused (no such image); YERR(IO) when FD cannot take it;
 * YERR(UNAVAILABLE) when the engine cannot be reached. */
int docker_save(struct docker *d, const char *image, int fd, struct errbuf *eb);

/* docker_load gives the engine the images of TAR_PATH, a tar such as
 * docker_save writes (POST /images/load, the file read as it is sent): 0
 * once loaded; YERR(BAD_REQUEST) with the engine's error when it refused
 * the tar; YERR(IO) when the file cannot be read; YERR(UNAVAILABLE) when the
 * engine cannot be reached. */
int docker_load(struct docker *d, const char *tar_path, struct errbuf *eb);

/* The multiplexed stream of a non-TTY container: 8-byte frame headers
 * (stream, 0, 0, 0, big-endian length) each followed by that many bytes.
 * Exposed for the unit tests and the fuzz target. */
struct docker_demux {
	unsigned char hdr[8];
	size_t hdr_len;       /* bytes of hdr held */
	size_t left;          /* payload bytes left in the current frame */
	int stream;           /* of the current frame */
};

/* docker_demux_feed passes every payload byte of BUF to sink with its
 * stream; frames may be split anywhere between calls. Returns 0, or the
 * sink's non-zero. */
int docker_demux_feed(struct docker_demux *dm, const char *buf, size_t len, docker_sink_fn sink,
		      void *arg);

#endif
