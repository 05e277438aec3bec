// Accounting (GET /v1/usage, docs/api.md "Usage"): the window's step and
// the GPU-hours of each group over time as chart lines.
import type { Line } from './metrics';

export type UsageBy = 'user' | 'team' | 'pool';

export interface UsageRow {
  key: string;
  jobs: number;
  tasks: number;
  gpu_seconds: number;
  cpu_seconds: number;
  memory_peak: number | null;
}

export interface UsageDoc {
  by: UsageBy;
  since: number;
  until: number;
  step: number | null;
  rows: UsageRow[];
  buckets?: { start: number; gpu_seconds: Record<string, number> }[];
}

/** The windows the page offers, each with the step of its chart (about 30 points). */
export const WINDOWS: { since: string; step: string; label: string }[] = [
  { since: '1d', step: '1h', label: 'last day' },
  { since: '7d', step: '6h', label: 'last 7 days' },
  { since: '30d', step: '1d', label: 'last 30 days' },
  { since: '90d', step: '3d', label: 'last 90 days' },
];

/** keyLabel: a group's name as shown ("" is a job without a team). */
export function keyLabel(key: string): string {
  return key === '' ? '(none)' : key;
}

/**
 * usageLines: one line per group (in the rows' order: most GPU-hours first), x the step's
 * start in Unix seconds, y its GPU-hours; a step where a group used nothing is 0.
 */
export function usageLines(doc: UsageDoc): Line[] {
  const buckets = doc.buckets ?? [];
  return doc.rows.map((r) => ({
    label: keyLabel(r.key),
    points: buckets.map((b) => [b.start / 1e6, (b.gpu_seconds[r.key] ?? 0) / 3600] as [number, number]),
  }));
}

/** hours: seconds as hours with 3 decimals (the CLI's GPU_HOURS). */
export function hours(seconds: number): string {
  return (seconds / 3600).toFixed(3);
}

/** pointsLine: [unix s, value] points (a job's or the cluster's utilisation) as one chart line. */
export function pointsLine(label: string, points: [number, number][] | undefined): Line {
  return { label, points: (points ?? []).map(([t, v]) => [t, v] as [number, number]) };
}
