/*
 * The container shim: `yard shim --dir TASKDIR` for a task whose shim.json
 * names the docker runtime (runtime_docker.c writes it). The same contract
 * as the process shim (shim.h): it reports "running PID" or
 * "start_failed: ..." on its stdout, appends the task's output to
 * TASKDIR/stdout and TASKDIR/stderr, and writes TASKDIR/exit.json last. It
 * runs the task as a container through the Engine API (docker.h):
 *
 *   create (pulling the image when the engine lacks it) -> attach -> start
 *   -> stream the output until the container ends -> inspect (exit code,
 *   OOM kill) -> remove.
 *
 * The container is named after the task (shim.json "container"). A shim that
 * finds a container of that name still running adopts it: an agent that
 * restarts after its shim died starts a new shim, which follows the
 * container's output from where the files end (the engine replays it). One
 * that has already ended is reported and removed the same way.
 *
 * shim.json adds to the process shim's keys: "runtime": "docker",
 * "docker_socket": PATH, "image": REF, "container": NAME,
 * "labels": {KEY: VALUE}.
 *
 * Built into the yard binary only (it needs libcurl); yard-shim refuses such
 * a task dir.
 */
#ifndef YARD_AGENT_SHIM_DOCKER_H
#define YARD_AGENT_SHIM_DOCKER_H

/* shim_docker_main: the whole container shim; returns the process exit
 * status (0 once exit.json is written). */
int shim_docker_main(const char *task_dir);

/* shim_docker_say appends "yard: " and the line to TASK_DIR/stdout, as the
 * shim says what it does, for one who is not the shim (the agent, once the
 * task runs): counted with what the container did not write, so that a
 * shim adopting the container later skips no byte of the container's. A
 * task dir gone, or a file that cannot take it, is only logged. */
void shim_docker_say(const char *task_dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* cmd_shim_any: `yard shim` in the yard binary, which runs either shim
 * according to TASKDIR/shim.json (execs always go to the process shim). */
int cmd_shim_any(int argc, char **argv);

#endif
