/*
 * Control of queued jobs after their submission (docs/api.md "Control",
 * docs/pipelines.md): holding and releasing, a new priority, and the
 * dependencies of a spec's `after`.
 *
 * A held job, or one whose dependencies are not met yet, stays queued and
 * is marked blocked: the master never gives it to the scheduler
 * (sched_decide stays pure and never hears of it), and its waiting reason
 * says why ("held": "held by alice"; "dependency": "waits for job 12 to
 * succeed"). A job whose dependency ended otherwise than its `after` asks
 * fails without running, by JOB_EV_DEPENDENCY_FAILED ("dependency job 12
 * failed"). The hold is persisted with the job; the rest is recomputed on
 * every pass.
 */
#ifndef YARD_MASTER_CONTROL_H
#define YARD_MASTER_CONTROL_H

#include "base/error.h"
#include "master/core.h"

struct caller;
struct job_spec;

/* control_check_after: 0 when every id of spec's after names a job that c
 * may see whole (visibility_job); else YERR(INVALID_SPEC), field
 * "after[I]", naming the id (jobs c may not see count as unknown). */
int control_check_after(struct master *m, const struct caller *c, const struct job_spec *spec,
			struct errbuf *eb);
/* control_sweep, before each scheduling pass, marks every queued job
 * blocked or not with its waiting reason, and fails those whose
 * dependencies failed (and those of theirs, in the same sweep). Before a
 * pass of new arrivals alone (!full, jobs_schedule) it sweeps them alone:
 * whatever can change an earlier job's verdict (a job's or a task's state,
 * a hold) asks for a full pass, and a new job's dependents are newer. */
void control_sweep(struct master *m, bool full);
/* control_hold holds queued job j for user by (YERR(CONFLICT) naming its
 * state when it is not queued, or naming the holder when already held);
 * control_release undoes it (YERR(CONFLICT) when it is not held). */
int control_hold(struct master *m, struct job *j, const char *by, struct errbuf *eb);
/* control_held_reason: the message of held job j's reason, "held by
 * USER", into msg (the reason is the hold's, stored with the job: shown
 * as it is from the moment the master loads it, before any pass). */
void control_held_reason(const struct job *j, char *msg, size_t len);
int control_release(struct master *m, struct job *j, struct errbuf *eb);
/* control_pause preempts running (or starting) job j (jobs_preempt, for
 * the reason why) and holds it for by, its GPUs freed; control_release
 * resumes it, from its checkpoint. -1 when j is not running or starting. */
int control_pause(struct master *m, struct job *j, const char *by, const char *why);
/* control_set_priority gives j priority name ("low", "normal", "high");
 * YERR(BAD_REQUEST), field "priority", naming the value otherwise, and
 * YERR(CONFLICT) when j is final. The next pass sees it. */
int control_set_priority(struct master *m, struct job *j, const char *name, struct errbuf *eb);

#endif
