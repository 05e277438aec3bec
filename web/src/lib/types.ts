// Shapes of the master's API objects (docs/protocol.md).

export interface Reason {
  code: string;
  message: string;
}

export interface Task {
  id: number;
  role: string;
  index: number;
  attempt: number;
  state: string;
  node: string | null;
  gpus: number[] | null;
  port?: number | null;
  exit_code: number | null;
  signal: number | null;
  reason: Reason | null;
  started_at?: number | null;
  finished_at?: number | null;
  log_size?: { stdout: number; stderr: number };
}

export interface Job {
  id: number;
  name: string;
  user: string;
  team: string | null;
  state: string;
  reason: Reason | null;
  exit_code: number | null;
  attempt: number;
  priority?: string;
  submitted_at: number | null;
  started_at: number | null;
  running_at: number | null;
  finished_at: number | null;
  code?: string | null;
  checkpoint?: string | null;
  queue_position?: number | null;
  ahead?: number[];
  preemptions?: number;
  /** A trial's experiment and number there (docs/experiments.md). */
  experiment?: number;
  trial?: number;
  spec?: Spec;
  tasks?: Task[];
  /** The job's history (GET /v1/jobs/{id} only), oldest first. */
  events?: JobEvent[];
  /** Its GPUs' utilisation (GET /v1/jobs/{id} only; docs/api.md, "GPU utilisation"); null before a sample. */
  gpu_util?: GpuUtil | null;
}

export interface GpuUtil {
  last: number;
  mean: number;
  idle_since: number | null;
  flagged: boolean;
  /** [unix seconds, percent] */
  points: [number, number][];
}

export interface JobEvent {
  at: number;
  state: string;
  /** a phase within the state: "building" (its image built from its code while it starts) */
  phase?: string;
  attempt: number;
  reason?: Reason;
}

export interface Gpu {
  index: number;
  model: string;
  memory: number;
  uuid?: string;
  job: number | null;
  island?: number;
  util?: number | null;
}

export interface Node {
  name: string;
  /** liveness: "ready" or "lost" (a master before the node table also said "draining") */
  state: string;
  /** an admin's drain, kept apart from liveness: no new tasks until resumed */
  drained?: boolean;
  drain?: { reason: string | null; by: string | null; at: number } | null;
  addr?: string;
  cpus: number;
  memory: number;
  gpus: Gpu[];
  free?: { gpus: number; cpus_milli: number; memory: number };
  last_seen?: number;
  pool?: string;
  labels?: Record<string, string>;
  runtimes?: string[];
  engine?: string | null;
}

export interface QueueEntry {
  id: number;
  name: string;
  user: string;
  position: number;
  ahead_count: number;
  ahead: number[];
  reason: Reason | null;
}

export interface Series {
  task: string;
  task_id?: number;
  attempt: number;
  name: string;
  points: [number, number, number?][];
}

export interface Dataset {
  name: string;
  latest: number;
  versions: number;
  size: number;
  team: string | null;
}

export type Spec = Record<string, unknown>;
