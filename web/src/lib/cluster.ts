// Cluster totals and a job's timeline.
import type { Job, Node } from './types';

export interface PoolTotals {
  pool: string;
  nodes: number;
  gpus: number;
  used: number;
  free: number;
}

/** poolTotals: GPUs per pool (nodes that are not lost), used = held by a job,
 * free = on a ready node that is not drained. */
export function poolTotals(nodes: Node[]): PoolTotals[] {
  const m = new Map<string, PoolTotals>();
  for (const n of nodes) {
    const pool = n.pool || 'default';
    const t = m.get(pool) ?? { pool, nodes: 0, gpus: 0, used: 0, free: 0 };
    t.nodes++;
    if (n.state !== 'lost') {
      for (const g of n.gpus ?? []) {
        t.gpus++;
        if (g.job !== null && g.job !== undefined) t.used++;
        else if (n.state === 'ready' && !n.drained) t.free++;
      }
    }
    m.set(pool, t);
  }
  return [...m.values()].sort((a, b) => a.pool.localeCompare(b.pool));
}

export interface TimelineStep {
  label: string;
  at: number | null;
  /** why the state changed ("preempted: ...", "task_failed: ..."), when known */
  detail?: string;
}

/**
 * timeline: the job's history when the master sent it (each state change,
 * with the attempt and the reason: restarts and preemptions show as the job
 * going back to queued; a phase, such as its image's build, as "starting:
 * building"), else the four timestamps of the job document.
 */
export function timeline(j: Job): TimelineStep[] {
  if (j.events && j.events.length) {
    return j.events.map((e) => ({
      label: e.phase
        ? `${e.state}: ${e.phase}`
        : e.state === 'queued' && e.attempt > 0
          ? `queued again (attempt ${e.attempt + 1})`
          : e.state,
      at: e.at,
      detail: e.reason ? `${e.reason.code}: ${e.reason.message}` : undefined,
    }));
  }
  const end = j.state === 'succeeded' ? 'succeeded' : j.state === 'failed' ? 'failed' : j.state === 'cancelled' ? 'cancelled' : 'finished';
  return [
    { label: 'submitted', at: j.submitted_at ?? null },
    { label: 'started', at: j.started_at ?? null },
    { label: 'running', at: j.running_at ?? null },
    { label: end, at: j.finished_at ?? null },
  ];
}
