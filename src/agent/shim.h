/*
 * The shim: one small process per task, the task's parent (the
 * containerd-shim / conmon pattern). `yard shim --dir TASKDIR` reads
 * TASKDIR/task.json (the assignment: argv, env, gpus, cpus_milli, memory,
 * pids) and TASKDIR/shim.json (node-local settings written by the process
 * runtime, see struct below), sets up the task's cgroup, starts the task in
 * its own session with stdout/stderr opened O_APPEND on TASKDIR/stdout and
 * TASKDIR/stderr, writes TASKDIR/task.pid, waits for it and writes
 * TASKDIR/exit.json atomically, last.
 *
 * shim.json: {"cwd": DIR, "checkpoint_dir": DIR, "data_dir": DIR,
 *   "cgroup_root": DIR|null (null: /sys/fs/cgroup), "cgroup_rel": "yard/A/task-ID"|null
 *   (null: no cgroups), "gpu_devices": [PATH...] (device nodes of the task's GPUs),
 *   "dev_dir": DIR (where nvidiactl and nvidia-uvm* are looked for),
 *   "stop_grace_ms": N (default 10000), "yard_exe": PATH (the yard binary that
 *   an argv[0] of "yard" names), "master_url": URL (the task's YARD_MASTER),
 *   "master_ca": FILE, "master_pin": PIN (how it verifies an https master:
 *   YARD_CA, YARD_PIN; absent: none),
 *   "run_as": {"uid": N, "gid": N} (agent --run-as, runas.h: the task's
 *   processes drop to that user, no supplementary groups, before exec; the
 *   shim stays root. Absent: they run as the shim's user),
 *   "heartbeat": FILE (the agent's WORK/heartbeat.json, heartbeat.h; absent:
 *   the shim never fences)}
 *
 * The agent unpacks the job's code into cwd before it starts the shim. The
 * shim is built as its own small executable, yard-shim (src/agent/shim_exe.c):
 * it links only libc, jansson and yard's base, so it starts in about a
 * millisecond where the full yard binary (libcurl and its TLS stack,
 * libmicrohttpd, SQLite, ...) takes about 18 ms to load. `yard shim` runs
 * the same code when yard-shim is missing.
 *
 * The shim reports the start on its stdout (the agent's pipe), one line:
 * "running PID\n" or "start_failed: MESSAGE\n", then closes it.
 *
 * On SIGTERM or SIGINT it sends SIGTERM to the task's process group, and
 * after stop_grace_ms (or the "grace_ms" of TASKDIR/stop.json, which the
 * agent writes before it stops a preempted task) SIGKILL to every process in the task's cgroup (or its
 * process group without cgroups) until none is left. When the task exits,
 * whatever it left behind in its cgroup or process group is killed, the
 * cgroups are removed, then exit.json is written.
 *
 * The shim fences the task when its agent is gone (heartbeat.h): once the
 * agent's heartbeat file says that the master may soon declare the node
 * lost (two thirds of the lease without an answer, the agent's own rule),
 * it stops a task of a job with on_disconnect: stop as a stop would, with
 * a sixth of the lease as the grace, and its exit.json says so ("stopped:
 * its agent was gone for N s (fenced by its shim; ...): HOW IT ENDED", no
 * exit status). The container shim (shim_docker.h) does the same.
 */
#ifndef YARD_AGENT_SHIM_H
#define YARD_AGENT_SHIM_H

#include <jansson.h>
#include <stdint.h>

#include "base/error.h"

/* shim_main: the whole shim; returns the process exit status (0 once
 * exit.json is written, also for a start failure; 1 when it cannot be). */
int shim_main(const char *task_dir);
/* shim_exec_main: `yard shim --dir TASKDIR --exec ID` runs the argv of
 * TASKDIR/execs/ID/exec.json ({"argv": [...]}) inside the running task: its
 * environment, working dir, cgroup and log files (appended), in a process
 * group of its own; SIGTERM kills that group. Writes
 * TASKDIR/execs/ID/exit.json like a task's. */
int shim_exec_main(const char *task_dir, const char *exec_id);

/* shim_stop_grace: how long a stop waits before SIGKILL: TASKDIR/stop.json's
 * "grace_ms" when the agent wrote one (a preemption, a fencing), else grace. */
uint64_t shim_stop_grace(const char *dir, uint64_t grace);

/* shim_make_output_dir makes shim.json conf's "output_dir" (the task's
 * YARD_OUTPUT_DIR, agent/outputs.h; absent: nothing), its task's user's
 * under "run_as". Both shims call it. */
int shim_make_output_dir(const json_t *conf, struct errbuf *eb);

/* shim_notify writes the start report (a line) on *fd, the agent's pipe,
 * then points *fd at /dev/null and sets it to -1: the agent sees EOF, and a
 * second report is dropped. */
void shim_notify(int *fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* shim_notify_before writes a line that comes before the report (the image
 * being built: "building TAG"), leaving fd open. */
void shim_notify_before(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
