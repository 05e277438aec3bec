// Experiments (sweeps) in the web app: the trials table's sort, the labels of compared
// trials, smoothing, the log scale and the view's URL (docs/experiments.md).
import type { Line } from './metrics';

export type Param = string | number | boolean;

export interface Trial {
  trial: number;
  job: number;
  state: string;
  params: Record<string, Param>;
  last: number | null;
  best: number | null;
  step: number | null;
  reason?: string;
}

export interface Experiment {
  id: number;
  name: string;
  user: string;
  team: string | null;
  state: string;
  method: string;
  objective: { metric: string; mode: 'min' | 'max' };
  early_stop: { method: string } | null;
  trials_total: number;
  max_parallel: number;
  params: string[];
  counts: Record<string, number>;
  best: { trial: number; job: number; value: number } | null;
  created_at: number;
  reason?: string;
  trials?: Trial[];
}

/** A column of the trials table: "trial", "job", "state", "last", "best", "step" or "param:NAME". */
export type SortKey = string;
export interface View {
  compare: number[]; // job ids of the compared trials
  smooth: number; // EMA weight, 0 (none) .. 0.99
  log: boolean;
  sort: SortKey | null; // null: the API's order (best objective first)
  desc: boolean;
}

export const DEFAULT_VIEW: View = { compare: [], smooth: 0, log: false, sort: null, desc: false };

function cell(t: Trial, key: SortKey): Param | null {
  if (key.startsWith('param:')) return t.params[key.slice(6)] ?? null;
  const v = (t as unknown as Record<string, unknown>)[key];
  return typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean' ? v : null;
}

/** sortTrials: by one column (numbers as numbers, missing values last either way), stable. */
export function sortTrials(trials: Trial[], key: SortKey | null, desc: boolean): Trial[] {
  if (!key) return trials.slice();
  return trials
    .map((t, i) => ({ t, i }))
    .sort((a, b) => {
      const x = cell(a.t, key);
      const y = cell(b.t, key);
      if (x === null || y === null) return x === y ? a.i - b.i : x === null ? 1 : -1;
      const c = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
      return (desc ? -c : c) || a.i - b.i;
    })
    .map((e) => e.t);
}

/** differingParams: the param names whose values are not all the same among trials, in order. */
export function differingParams(trials: Trial[], names: string[]): string[] {
  return names.filter((n) => new Set(trials.map((t) => JSON.stringify(t.params[n] ?? null))).size > 1);
}

/** trialLabel: "lr=0.02 batch_size=32" over the differing names, "#JOB" when none differ. */
export function trialLabel(t: Trial, differing: string[]): string {
  if (!differing.length) return `#${t.job}`;
  return differing.map((n) => `${n}=${t.params[n]}`).join(' ');
}

/** smoothPoints: TensorBoard's exponential moving average, debiased (weight 0: unchanged). */
export function smoothPoints(points: [number, number][], weight: number): [number, number][] {
  if (!(weight > 0)) return points;
  const w = Math.min(weight, 0.999);
  let acc = 0;
  let n = 0;
  return points.map(([x, y]) => {
    acc = acc * w + (1 - w) * y;
    n++;
    return [x, acc / (1 - Math.pow(w, n))];
  });
}

/** logSafe: a log scale shows only positive values; the others are left out. */
export function logSafe(points: [number, number][]): [number, number][] {
  return points.filter(([, y]) => y > 0);
}

/** viewLines: the lines as drawn, smoothed and (for a log scale) positive only. */
export function viewLines(lines: Line[], view: View): Line[] {
  return lines.map((l) => {
    const p = smoothPoints(l.points, view.smooth);
    return { label: l.label, points: view.log ? logSafe(p) : p };
  });
}

/** parseView: the query part of the hash ("compare=12,14&smooth=0.6&log=1&sort=-best"). */
export function parseView(query: string): View {
  const q = new URLSearchParams(query);
  const compare = (q.get('compare') ?? '')
    .split(',')
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
  const s = Number(q.get('smooth') ?? 0);
  const sort = q.get('sort');
  return {
    compare: [...new Set(compare)],
    smooth: Number.isFinite(s) ? Math.max(0, Math.min(0.99, s)) : 0,
    log: q.get('log') === '1',
    sort: sort ? sort.replace(/^-/, '') : null,
    desc: !!sort && sort.startsWith('-'),
  };
}

/** formatView: parseView's inverse; defaults are left out. */
export function formatView(v: View): string {
  const q: string[] = [];
  if (v.compare.length) q.push(`compare=${v.compare.join(',')}`);
  if (v.smooth > 0) q.push(`smooth=${v.smooth}`);
  if (v.log) q.push('log=1');
  if (v.sort) q.push(`sort=${v.desc ? '-' : ''}${encodeURIComponent(v.sort)}`);
  return q.join('&');
}
