/*
 * What an exec session runs (agent/sessions.h): a command inside a running
 * task, with a pseudo-terminal or with pipes, behind a table of ops per
 * runtime, chosen by the task's:
 *   - process: a child of the agent started as the shim starts the task
 *     (agent/taskproc.h: its environment, working dir, cgroups and user),
 *     in a session of its own; with a tty, on a pty the agent holds the
 *     master side of (TIOCSCTTY, TIOCSWINSZ on resize);
 *   - docker: the Engine API's exec (POST /containers/{id}/exec, then
 *     POST /exec/{id}/start hijacked: the connection carries stdin one way
 *     and the output the other, raw with a tty, else in the engine's
 *     stream framing), its resize and its inspect for the exit code.
 *     Docker's and Podman's engines both answer it;
 *   - attach (sessattach.c): not a command but the terminal an interactive
 *     task's shim shares (agent/termshare.h): a connection to
 *     TASKDIR/attach.sock that carries what the terminal shows one way and
 *     what is typed, resizes and signals the other; the client leaving
 *     detaches (the task runs on), the task's end comes with its status.
 * Every fd here is non-blocking and close-on-exec; the session's thread
 * polls them.
 */
#ifndef YARD_AGENT_SESSEXEC_H
#define YARD_AGENT_SESSEXEC_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "agent/docker.h"
#include "base/error.h"
#include "base/strbuf.h"

/* What to run: the session's entry of the work reply, and its task. */
struct exec_req {
	const json_t *argv;     /* array of strings */
	bool tty, stdin_open;
	unsigned cols, rows;
	const char *task_dir;   /* TASKDIR: task.json, shim.json */
	const char *docker_socket; /* the engine's socket (docker tasks) */
	const char *container;  /* docker tasks: the container's name */
};

/* How it ended, for the status message. */
struct exec_status {
	bool has_code;
	int code;
	int signal;             /* 0: none */
	char message[600];      /* "" or why it did not run / what is not known */
};

struct exec_proc;

struct exec_proc_ops {
	const char *name;
	/* start runs req: 0, or an error whose message the client gets (with
	 * *code the exit status to report: 127 when the command is not found,
	 * 126 when it cannot be run) */
	int (*start)(struct exec_proc *p, const struct exec_req *req, int *code, struct errbuf *eb);
	/* exited: exit_fd became readable: 1 once the process has ended (and
	 * is reaped), 0 when not yet */
	int (*exited)(struct exec_proc *p);
	/* pump reads output fd idx once: appends yard.exec.v1 frames (stdout,
	 * stderr) to out; 1 when bytes came, 0 when none are there now, -1 at
	 * its end */
	int (*pump)(struct exec_proc *p, int idx, struct strbuf *out);
	/* write_stdin writes what it can of len bytes (*done OUT): 0, or -1
	 * when stdin cannot take any more ever */
	int (*write_stdin)(struct exec_proc *p, const char *buf, size_t len, size_t *done);
	void (*close_stdin)(struct exec_proc *p);
	void (*resize)(struct exec_proc *p, unsigned cols, unsigned rows);
	void (*signal)(struct exec_proc *p, int sig);
	/* reap: the exit status once the output has ended and, where there is
	 * one, exit_fd said the process ended */
	void (*reap)(struct exec_proc *p, struct exec_status *st);
	/* hangup ends what still runs (the session's client went away):
	 * SIGHUP, and SIGKILL at the second call */
	void (*hangup)(struct exec_proc *p, bool kill_it);
	void (*release)(struct exec_proc *p);
};

extern const struct exec_proc_ops exec_process_ops;
extern const struct exec_proc_ops exec_docker_ops;
extern const struct exec_proc_ops exec_attach_ops;

struct exec_proc {
	const struct exec_proc_ops *ops;
	bool tty;
	int in_fd;              /* where stdin goes, -1: nowhere */
	int out_fd[2];          /* what the output comes from, -1: none */
	int exit_fd;            /* readable once it ended (a pidfd), -1: the output's end says */
	bool exited;            /* exit_fd fired (the process is reaped) */
	int wait_status;        /* the process runtime's, once exited */
	pid_t pid;              /* its process (group), 0: not known */
	/* docker */
	struct docker d;
	bool has_docker;
	char exec_id[80];
	struct docker_demux dm;
	struct strbuf pending;  /* output bytes that came with the engine's answer */
	bool stdin_shut;
	/* attach: the task's exit status as its shim sent it (owned), or NULL */
	json_t *exit_doc;
};

void exec_proc_init(struct exec_proc *p, const struct exec_proc_ops *ops);

/* exec_signal_parse: the signal number of "INT", "QUIT", "TERM", "HUP" or
 * "KILL" (what channel 5 may send), 0 for any other name. */
int exec_signal_parse(const char *name);

#endif
