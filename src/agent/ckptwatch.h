/*
 * The checkpoint dir as a task's second word that it checkpointed (the
 * first is an `@yard {"checkpoint": N}` output line, metricship.h). The
 * agent's shipper thread polls each running task's YARD_CHECKPOINT_DIR
 * (WORK/checkpoints/JOB, named by TASKDIR/shim.json's "checkpoint_dir") and
 * takes the newest modification time of a file in it as the time the task
 * last checkpointed, when that file:
 *
 *   - is a regular file (links are not followed), at most CKPT_WATCH_DEPTH
 *     dirs down; a walk looks at no more than CKPT_WATCH_ENTRIES entries, so
 *     a huge dir costs little (and is looked at only in part);
 *   - changed after the task started and after the agent last restored a
 *     checkpoint into the dir: its mtime and ctime are later than the
 *     mtimes of TASKDIR/task.pid (the shim writes it once the task runs) and
 *     of WORK/checkpoints/JOB.digest (written after each restore), so what
 *     a resumed attempt finds in the dir never counts as new;
 *   - is complete: unchanged for CKPT_WATCH_SETTLE_US, and not named like
 *     a file still being written ("*.tmp", "*.part"; a checkpoint written to
 *     such a name and renamed counts once renamed).
 *
 * Polling rather than inotify: a poll, at most once a second per task on
 * the shipper thread (never the event loop), is a bounded stat walk that
 * needs no state in the kernel. inotify would need a watch per subdir, added
 * as the task makes them (racing its writes) and counted against
 * fs.inotify.max_user_watches, shared by every task of the node; its queue
 * can overflow; and it says nothing of what changed while the agent was
 * down, which a walk after a restart still finds.
 *
 * The time found is kept in TASKDIR/ckptdir.json, so it survives an agent
 * restart as the @yard one does in metrics.json.
 */
#ifndef YARD_AGENT_CKPTWATCH_H
#define YARD_AGENT_CKPTWATCH_H

#include <stdint.h>

/* How far a walk goes: the dir itself is depth 0. */
#define CKPT_WATCH_DEPTH 8
/* How many dir entries one walk looks at, at most. */
#define CKPT_WATCH_ENTRIES 4096
/* A file counts once it has not changed for this long (wall us). */
#define CKPT_WATCH_SETTLE_US 1000000
/* A task's dir is walked at most this often (wall us). */
#define CKPT_WATCH_EVERY_US 1000000

struct ckpt_walk {
	unsigned depth;   /* the deepest level looked into */
	unsigned entries; /* the most entries looked at */
	unsigned seen;    /* OUT: the entries looked at */
};

/* ckpt_watch_scan walks dir within walk's bounds and returns the newest
 * mtime (wall us) of a file that counts (above) for a task that started,
 * or had its checkpoint restored, at floor_us; 0 when none. now_us is the
 * wall clock. A dir that is missing or unreadable holds no checkpoint. */
int64_t ckpt_watch_scan(const char *dir, int64_t floor_us, int64_t now_us, struct ckpt_walk *walk);

struct ckpt_watch;

/* ckpt_watch_new watches the checkpoint dir of the task in task_dir
 * (WORK/tasks/ID), starting from the time kept in task_dir/ckptdir.json.
 * Caller frees with ckpt_watch_free. */
struct ckpt_watch *ckpt_watch_new(const char *task_dir);
void ckpt_watch_free(struct ckpt_watch *w);

/* ckpt_watch_poll walks the dir when CKPT_WATCH_EVERY_US have passed since
 * the last walk (now_us: the wall clock) and returns when the task last
 * checkpointed into it (wall us; never earlier than a time returned
 * before); 0 when it has not, or before the task runs (no task.pid). A
 * NULL w returns 0. */
int64_t ckpt_watch_poll(struct ckpt_watch *w, int64_t now_us);

#endif
