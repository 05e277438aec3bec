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

/** taskNames: "role/index" of a job's tasks of its latest attempt, in order. */
export function taskNames(tasks: { role: string; index: number; attempt: number }[]): string[] {
  const latest = Math.max(-1, ...tasks.map((t) => t.attempt));
  const seen: string[] = [];
  for (const t of tasks) {
    if (t.attempt !== latest) continue;
    const n = `${t.role}/${t.index}`;
    if (!seen.includes(n)) seen.push(n);
  }
  return seen;
}
