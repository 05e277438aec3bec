/*
 * Interactive jobs in the master (docs/architecture.md, "Interactive
 * jobs"): the spec's `interactive` section makes a job one task on a
 * terminal that users attach to (yard shell, yard attach) over sessions
 * (sessions.h). The master keeps, per interactive job and in memory only,
 * how many sessions of the job are open (of any kind: an attach, an exec
 * from the web terminal, a proxied notebook's WebSocket) and when the last
 * one closed. A running interactive job with none for its idle timeout
 * (the spec's interactive.idle_timeout, else --interactive-idle-timeout,
 * default 1h; 0 turns the master's default off) is cancelled with the
 * reason idle_timeout ("no session attached for 1h0m"), which stops its
 * task and frees its GPUs.
 *
 * The idle clock of a job starts at the latest of: the job became running,
 * its last session closed, this master started (sessions do not survive a
 * master, so a new one counts from its own start).
 */
#ifndef YARD_MASTER_INTERACTIVE_H
#define YARD_MASTER_INTERACTIVE_H

#include <stdint.h>

#include "base/error.h"

struct master;
struct job;

/* --interactive-idle-timeout's default. */
#define INTERACTIVE_IDLE_DEFAULT_MS (3600 * 1000)

/* interactive_parse_idle: --interactive-idle-timeout's value (a duration;
 * "0": off) into *ms; what names the flag or the file's line and key. */
int interactive_parse_idle(const char *what, const char *v, uint64_t *ms, struct errbuf *eb);

/* interactive_session_opened and interactive_session_closed count a
 * session of job id (sessions.c calls them for every session it makes and
 * frees); any job may be named, only an interactive one keeps count. */
void interactive_session_opened(struct master *m, uint64_t job_id);
void interactive_session_closed(struct master *m, uint64_t job_id);

/* interactive_idle_ms: the idle timeout of interactive job j (its spec's,
 * else the master's), 0: none. */
uint64_t interactive_idle_ms(const struct master *m, const struct job *j);

/* interactive_idle_since: when (wall us) running interactive job j's idle
 * clock started, 0 while a session is open or it is not running. */
uint64_t interactive_idle_since(const struct master *m, const struct job *j);

/* interactive_tick cancels the running interactive jobs idle for their
 * timeout (the master's housekeeping tick). */
void interactive_tick(struct master *m);

/* interactive_format_ms writes a duration as the reason says it: "1h0m",
 * "2m30s", "3s", "1.5s". */
const char *interactive_format_ms(uint64_t ms, char *buf, size_t len);

#endif
