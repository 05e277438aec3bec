// Log view helpers.

export interface Piece {
  text: string;
  match: boolean;
}

/** highlight: text split into pieces around case-insensitive matches of query. */
export function highlight(text: string, query: string): Piece[] {
  if (!query) return [{ text, match: false }];
  const out: Piece[] = [];
  const lt = text.toLowerCase();
  const lq = query.toLowerCase();
  let i = 0;
  for (;;) {
    const j = lt.indexOf(lq, i);
    if (j < 0) break;
    if (j > i) out.push({ text: text.slice(i, j), match: false });
    out.push({ text: text.slice(j, j + query.length), match: true });
    i = j + query.length;
  }
  if (i < text.length) out.push({ text: text.slice(i), match: false });
  return out;
}

/** countMatches: how many times query occurs (case-insensitive). */
export function countMatches(text: string, query: string): number {
  return highlight(text, query).filter((p) => p.match).length;
}

type AttemptTask = { role: string; index: number; attempt: number; state?: string; reason?: { code: string; message: string } | null };

/** latestAttempt: the highest attempt among tasks (-1 when there are none). */
export function latestAttempt(tasks: AttemptTask[]): number {
  return Math.max(-1, ...tasks.map((t) => t.attempt));
}

/** taskNames: "role/index" of a job's tasks of one attempt (default: its latest), in order. */
export function taskNames(tasks: AttemptTask[], attempt?: number | null): string[] {
  const want = attempt ?? latestAttempt(tasks);
  const seen: string[] = [];
  for (const t of tasks) {
    if (t.attempt !== want) continue;
    const n = `${t.role}/${t.index}`;
    if (!seen.includes(n)) seen.push(n);
  }
  return seen;
}

export interface AttemptChoice {
  attempt: number; // numbered from 0, as the job's "attempt"
  label: string; // what the picker shows
  latest: boolean;
}

/**
 * attemptChoices: the attempts of a job's tasks, the latest first, each
 * labelled with why it ended: the reason of its task that failed or was lost
 * (else of any task with one), as the CLI's restart marker says.
 */
export function attemptChoices(tasks: AttemptTask[]): AttemptChoice[] {
  const latest = latestAttempt(tasks);
  const out: AttemptChoice[] = [];
  for (let a = latest; a >= 0; a--) {
    const of = tasks.filter((t) => t.attempt === a);
    if (!of.length) continue;
    const failed = of.find((t) => t.reason && (t.state === 'failed' || t.state === 'lost')) ?? of.find((t) => t.reason);
    let label = `attempt ${a}`;
    if (a === latest) label += ' (latest)';
    else if (failed?.reason) label += ` (ended: ${failed.reason.code}: ${failed.reason.message})`;
    out.push({ attempt: a, label, latest: a === latest });
  }
  return out;
}

/** logsPath: the API path of a task's log bytes of one attempt (null: the latest). */
export function logsPath(job: number, task: string, stream: string, offset: number, limit: number, attempt: number | null): string {
  const a = attempt == null ? '' : `&attempt=${attempt}`;
  return `/v1/jobs/${job}/logs?task=${encodeURIComponent(task)}${a}&stream=${stream}&offset=${offset}&limit=${limit}`;
}
