/*
 * Fencing, and the agent's heartbeat that lets a shim fence without it.
 *
 * The rule (docs/faults.md): the master declares a node lost, and starts its
 * jobs elsewhere, when its lease on the node ends. So at two thirds of the
 * lease since the node last heard from the master, the tasks of jobs with
 * `on_disconnect: stop` are stopped, with a sixth of the lease as the grace
 * between SIGTERM and SIGKILL: they are gone before the master can start
 * them again elsewhere. A master that is down (nothing listens: a refused
 * connection) starts nothing elsewhere, and every node gets a fresh lease
 * from its restart, so while the agent finds no master listening the
 * countdown does not run. With several masters on one store (httpc.h), no
 * master listens when none of those tried did, and only the leader's
 * answers count: a standby's not_leader is no answer, so an agent that
 * reaches standbys but not the leader fences on time. fence_basis() and
 * fence_due() are that rule; the agent (fence() in agent.c) and the shims
 * apply it, each from its own view.
 *
 * The agent fences while it lives. For a dead (or stopped, or hung) agent
 * the shims fence: the agent publishes its view of the lease in one file per
 * agent, WORK/heartbeat.json, rewritten (write, rename) about every second
 * by a thread of its own:
 *
 *   {"basis_ms": B, "lease_ms": L, "at_ms": T, "pid": P}
 *
 * B is where the countdown runs from (fence_basis: the last answer from the
 * master, or the last moment no master listened), L the master's lease on
 * the node, T when it was written, all on CLOCK_BOOTTIME (boot_ms), which
 * every process of the machine shares, which wall-clock jumps do not move,
 * and which keeps counting through a suspend as the master's clock does.
 * The file is named by shim.json's "heartbeat". Each shim reads it at every
 * turn of its wait loop (5 times a second) and applies the same rule to the
 * latest B it has seen: a live agent in touch with the master moves B on, a
 * live agent that finds no master listening too, and a restarted agent as
 * soon as it has registered again, which stops the countdown; a dead agent
 * leaves B where it was, and the shim stops its task when the rule says.
 * A thread of its own rather than the main loop's tick: that loop may block
 * for minutes on a code or checkpoint download while the agent is still in
 * touch with the master, which must not fence anything. Under `yard up`
 * (the master in the agent's process, gone whenever the agent is) shim.json
 * names no heartbeat, and the shims never fence.
 */
#ifndef YARD_AGENT_HEARTBEAT_H
#define YARD_AGENT_HEARTBEAT_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/taskdir.h"
#include "base/error.h"

/* The heartbeat file in the agent's work dir. */
#define HEARTBEAT_FILE "heartbeat.json"

/* fence_after_ms: how long after its basis the countdown ends (two thirds
 * of the lease). */
uint64_t fence_after_ms(uint64_t lease_ms);
/* fence_grace_ms: the grace of a fencing stop, SIGTERM to SIGKILL (a sixth
 * of the lease). */
uint64_t fence_grace_ms(uint64_t lease_ms);
/* fence_basis: where the countdown runs from: now while no master listens
 * (refused), else the last answer from the master (last_ok_ms). All times
 * are boot_ms(). */
uint64_t fence_basis(uint64_t last_ok_ms, bool refused, uint64_t now_ms);
/* fence_due: the countdown from basis_ms is over at now_ms. Never for an
 * unknown lease (0) or basis (0). */
bool fence_due(uint64_t lease_ms, uint64_t basis_ms, uint64_t now_ms);
/* fence_spares: the task (its task.json, the assignment) is of a job with
 * on_disconnect: keep, which no fencing stops. */
bool fence_spares(const json_t *task);

/* What the heartbeat file says (times: boot_ms). */
struct heartbeat {
	uint64_t basis_ms;  /* fence_basis() of the agent; 0: it does not know yet */
	uint64_t lease_ms;  /* the master's lease on the node; 0: not known yet */
	uint64_t at_ms;     /* when the agent wrote it */
	int64_t pid;        /* the agent's pid (for people reading the file) */
};

/* heartbeat_write writes hb to PATH atomically (not durable: its times mean
 * nothing after a reboot); YERR(IO) on failure. */
int heartbeat_write(const char *path, const struct heartbeat *hb, struct errbuf *eb);
/* heartbeat_read: 0 and *hb; YERR(NOT_FOUND) when missing, YERR(IO) when
 * unreadable or malformed (*hb is zeroed then). */
int heartbeat_read(const char *path, struct heartbeat *hb, struct errbuf *eb);
/* heartbeat_path: WORK_DIR/heartbeat.json; caller frees. */
char *heartbeat_path(const char *work_dir);

/* ---- the agent's writer: a thread that rewrites the file about every
 * second (a quarter of fence_after_ms for short leases) ---- */

/* view fills *out with the agent's current view; called from the writer
 * thread, so it must lock what it reads. */
typedef void heartbeat_view_fn(void *arg, struct heartbeat *out);

struct heartbeat_writer {
	char *path;               /* owned */
	heartbeat_view_fn *view;
	void *arg;                /* borrowed: view's argument, outlives the writer */
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;     /* one write at a time: held by the thread but while it waits */
	pthread_cond_t cond;      /* signalled to quit */
	bool quit;
};

/* heartbeat_writer_start starts the thread that keeps the file fresh: a
 * write at once, then one every period. A view without a basis writes
 * nothing: an agent that has neither heard from a master nor found that
 * none listens vouches for nothing. A write that fails, or a thread that cannot start, is logged on
 * stderr: the agent serves on, and its shims fence as if it were gone. */
void heartbeat_writer_start(struct heartbeat_writer *w, const char *work_dir,
			    heartbeat_view_fn *view, void *arg);
/* heartbeat_writer_beat writes the file now, from the caller's thread: the
 * agent does once it has registered, so that the file is fresh before it
 * starts or re-adopts any shim. */
void heartbeat_writer_beat(struct heartbeat_writer *w);
/* heartbeat_writer_stop joins the thread and frees w's contents; the file
 * stays (the shims count from what it says). Safe on a writer never
 * started (zeroed). */
void heartbeat_writer_stop(struct heartbeat_writer *w);

/* ---- a shim's countdown: what it has seen of its agent ---- */

struct fence_watch {
	char *path;          /* owned: the heartbeat file; NULL: never fence */
	bool spared;         /* on_disconnect: keep */
	uint64_t basis_ms;   /* the latest basis seen (bases only move forward) */
	uint64_t lease_ms;   /* the latest lease seen; 0: none yet, never due */
	uint64_t at_ms;      /* when the agent wrote the latest heartbeat seen */
	bool fenced;         /* fence_watch_check has said so (once) */
	bool stopped;        /* fence_watch_step began the stop (none was under way) */
	char why[300];       /* once fenced: "stopped: its agent was gone for ..." */
};

/* fence_watch_init: for the task of TASKDIR's shim.json ("heartbeat") and
 * task.json (on_disconnect); either may be NULL (never fence). */
void fence_watch_init(struct fence_watch *w, const json_t *shim_conf, const json_t *task);
void fence_watch_release(struct fence_watch *w);
/* fence_watch_see takes one heartbeat in (no I/O: the pure half that unit
 * tests drive). */
void fence_watch_see(struct fence_watch *w, const struct heartbeat *hb);
/* fence_watch_check: true exactly once, at the first now_ms at which the
 * fence is due; then w->why says why and for how long the agent was gone. */
bool fence_watch_check(struct fence_watch *w, uint64_t now_ms);
/* fence_watch_poll reads the heartbeat file (a missing or unreadable one
 * changes nothing), then fence_watch_check(w, boot_ms()). */
bool fence_watch_poll(struct fence_watch *w);
/* fence_watch_step: one turn of a shim's wait loop, after it has taken its
 * signals. *stopping and *deadline_ms (mono_ms of the SIGKILL) are the
 * loop's stop. Once the fence is due it logs w->why on stderr (shim.log) and
 * returns true when the caller must send SIGTERM now: no stop was under way
 * (*stopping becomes true, *deadline_ms the fence's grace from now). A stop
 * already under way keeps its course, its grace cut to the fence's. */
bool fence_watch_step(struct fence_watch *w, bool *stopping, uint64_t *deadline_ms);
/* fence_watch_mark_exit: the exit record of a task the fence stopped
 * (w->stopped) says so: the reason becomes "WHY: HOW IT ENDED", without an
 * exit status (a task that exits 0 on SIGTERM did not succeed: the master
 * reports the task lost, with this reason). Otherwise e is left alone. */
void fence_watch_mark_exit(const struct fence_watch *w, struct task_exit *e);

#endif
