// Metric series: grouping by name and merging series on one step axis (uPlot's aligned data).
import type { Series } from './types';

export interface Line {
  label: string;
  points: [number, number][];
}

/** metricNames: the distinct series names, sorted. */
export function metricNames(series: Series[]): string[] {
  return [...new Set(series.map((s) => s.name))].sort();
}

/** linesFor: one line per task (and attempt) of a job for one metric name. */
export function linesFor(job: number, series: Series[], name: string, multiJob: boolean): Line[] {
  return series
    .filter((s) => s.name === name)
    .map((s) => ({
      label: `${multiJob ? `#${job} ` : ''}${s.task}${s.attempt ? ` (attempt ${s.attempt})` : ''}`,
      points: s.points.map((p) => [p[0], p[1]] as [number, number]),
    }));
}

/**
 * mergeSeries: lines to uPlot's aligned data: [steps (sorted union), values of line 1, ...],
 * null where a line has no point at a step; a step repeated in one line keeps its last value.
 */
export function mergeSeries(lines: Line[]): [number[], ...(number | null)[][]] {
  const steps = new Set<number>();
  for (const l of lines) for (const [x] of l.points) steps.add(x);
  const xs = [...steps].sort((a, b) => a - b);
  const at = new Map<number, number>();
  xs.forEach((x, i) => at.set(x, i));
  const ys = lines.map((l) => {
    const y: (number | null)[] = new Array(xs.length).fill(null);
    for (const [x, v] of l.points) y[at.get(x)!] = Number.isFinite(v) ? v : null;
    return y;
  });
  return [xs, ...ys];
}

/** parseJobIds: "17, 18 #19" -> [17, 18, 19] (distinct, positive). */
export function parseJobIds(text: string): number[] {
  const out: number[] = [];
  for (const m of text.matchAll(/\d+/g)) {
    const n = Number(m[0]);
    if (n > 0 && !out.includes(n)) out.push(n);
  }
  return out;
}
