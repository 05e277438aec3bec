// Formatting of sizes, times and states for display.

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** formatBytes: 1536 -> "1.5 KiB"; null/undefined -> "–". */
export function formatBytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  if (u === 0) return `${v} B`;
  const s = v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  return `${s.replace(/\.?0+$/, '')} ${UNITS[u]}`;
}

/** formatTime: microseconds since the epoch -> "2026-11-29 21:41:33" (local time). */
export function formatTime(us: number | null | undefined): string {
  if (us === null || us === undefined || !us) return '–';
  const d = new Date(us / 1000);
  const p = (x: number) => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** formatDuration: a span in microseconds -> "1h 2m 3s", "4.2s", "0s". */
export function formatDuration(us: number | null | undefined): string {
  if (us === null || us === undefined || !Number.isFinite(us) || us < 0) return '–';
  const s = us / 1e6;
  if (s < 10) return `${Number(s.toFixed(1))}s`;
  let rest = Math.floor(s);
  const h = Math.floor(rest / 3600);
  rest -= h * 3600;
  const m = Math.floor(rest / 60);
  rest -= m * 60;
  if (h) return `${h}h ${m}m ${rest}s`;
  if (m) return `${m}m ${rest}s`;
  return `${rest}s`;
}

/** formatUtil: a GPU's utilisation (0..100 or 0..1) -> "42%"; absent -> "–". */
export function formatUtil(u: number | null | undefined): string {
  if (u === null || u === undefined || !Number.isFinite(u)) return '–';
  const pct = u <= 1 && u > 0 && !Number.isInteger(u) ? u * 100 : u;
  return `${Math.round(pct)}%`;
}

const JOB_STATE_CLASS: Record<string, string> = {
  queued: 'st-queued',
  starting: 'st-starting',
  running: 'st-running',
  succeeded: 'st-succeeded',
  failed: 'st-failed',
  cancelled: 'st-cancelled',
  stopped_early: 'st-stopped',
  completed: 'st-succeeded',
  ready: 'st-succeeded',
  draining: 'st-starting',
  drained: 'st-starting',
  lost: 'st-failed',
  exited: 'st-cancelled',
  assigned: 'st-starting',
  staging: 'st-starting',
};

/** stateClass: the CSS class that colours a job, task or node state. */
export function stateClass(state: string | null | undefined): string {
  return JOB_STATE_CLASS[state ?? ''] ?? 'st-other';
}

/** isFinal: whether a job state is final. */
export function isFinal(state: string): boolean {
  return state === 'succeeded' || state === 'failed' || state === 'cancelled' || state === 'stopped_early';
}
