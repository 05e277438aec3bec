// Filtering and sorting of the job list.
import type { Job } from './types';

export interface JobFilter {
  state: string; // '' = any
  user: string;
  team: string;
  name: string; // substring, case-insensitive
}

export const EMPTY_FILTER: JobFilter = { state: '', user: '', team: '', name: '' };

export function filterJobs(jobs: Job[], f: JobFilter): Job[] {
  const name = f.name.trim().toLowerCase();
  const user = f.user.trim();
  const team = f.team.trim();
  return jobs.filter(
    (j) =>
      (!f.state || j.state === f.state) &&
      (!user || j.user === user) &&
      (!team || (j.team ?? '') === team) &&
      (!name || (j.name ?? '').toLowerCase().includes(name)),
  );
}

export type SortKey = 'id' | 'name' | 'user' | 'team' | 'state' | 'submitted_at' | 'duration';
export interface Sort {
  key: SortKey;
  dir: 'asc' | 'desc';
}

function duration(j: Job, nowUs: number): number {
  if (!j.started_at) return -1;
  return (j.finished_at ?? nowUs) - j.started_at;
}

function value(j: Job, key: SortKey, nowUs: number): string | number {
  switch (key) {
    case 'id':
      return j.id;
    case 'submitted_at':
      return j.submitted_at ?? 0;
    case 'duration':
      return duration(j, nowUs);
    case 'team':
      return j.team ?? '';
    default:
      return (j[key] as string) ?? '';
  }
}

/** sortJobs: a sorted copy; ties keep id order (newest first). */
export function sortJobs(jobs: Job[], s: Sort, nowUs = Date.now() * 1000): Job[] {
  const sign = s.dir === 'asc' ? 1 : -1;
  return [...jobs].sort((a, b) => {
    const va = value(a, s.key, nowUs);
    const vb = value(b, s.key, nowUs);
    let c = 0;
    if (typeof va === 'number' && typeof vb === 'number') c = va - vb;
    else c = String(va).localeCompare(String(vb));
    return c !== 0 ? c * sign : b.id - a.id;
  });
}

/** toggleSort: clicking a column header. */
export function toggleSort(s: Sort, key: SortKey): Sort {
  if (s.key === key) return { key, dir: s.dir === 'asc' ? 'desc' : 'asc' };
  return { key, dir: key === 'id' || key === 'submitted_at' ? 'desc' : 'asc' };
}

/** distinct: the sorted distinct non-empty values of a field, for filter menus. */
export function distinct(jobs: Job[], pick: (j: Job) => string | null | undefined): string[] {
  const s = new Set<string>();
  for (const j of jobs) {
    const v = pick(j);
    if (v) s.add(v);
  }
  return [...s].sort();
}
