// The submit form's state and its conversion to and from a job spec (docs/architecture.md "Job spec").
import YAML from 'yaml';
import type { Spec } from './types';

export const FRAMEWORKS = ['command', 'pytorch', 'tensorflow', 'mxnet', 'jax', 'mpi', 'caffe'] as const;

export interface RoleRow {
  name: string;
  replicas: string;
  gpus: string;
  cpus: string;
  memory: string;
  /** Members of the role the form has no inputs for (pids, command, ...): kept as they are. */
  extra?: Record<string, unknown>;
}

export interface ParamRow {
  key: string;
  value: string;
}

export interface DataRow {
  source: string;
  mount: string;
}

export interface FormState {
  name: string;
  framework: string;
  command: string; // one argv entry per line
  image: string;
  roles: RoleRow[];
  params: ParamRow[];
  data: DataRow[];
  /** Fields of the spec the form has no inputs for (env, restart, timeout, ...): kept as they are. */
  extra: Spec;
}

export function emptyRole(name = 'worker'): RoleRow {
  return { name, replicas: '1', gpus: '0', cpus: '1', memory: '1GiB' };
}

export function emptyForm(): FormState {
  return {
    name: '',
    framework: 'command',
    command: '',
    image: '',
    roles: [emptyRole()],
    params: [{ key: '', value: '' }], // one empty row to start with (an empty name is left out)
    data: [],
    extra: {},
  };
}

/** parseScalar: a form value as the spec's scalar: numbers and booleans typed, the rest a string. */
export function parseScalar(s: string): string | number | boolean | null {
  const t = s.trim();
  if (t === 'true') return true;
  if (t === 'false') return false;
  if (t === 'null') return null;
  if (/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t)) {
    const n = Number(t);
    if (Number.isFinite(n)) return n;
  }
  return s;
}

function scalarText(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

function numberOrText(s: string): number | string {
  const v = parseScalar(s);
  return typeof v === 'number' ? v : s.trim();
}

const KNOWN = new Set(['name', 'framework', 'command', 'image', 'tasks', 'params', 'data']);

/** formToSpec: the spec the form describes (empty inputs left out). */
export function formToSpec(f: FormState): Spec {
  const spec: Spec = {};
  if (f.name.trim()) spec.name = f.name.trim();
  if (f.framework && f.framework !== 'command') spec.framework = f.framework;
  const argv = f.command.split('\n').map((l) => l.replace(/\r$/, ''));
  while (argv.length && argv[argv.length - 1].trim() === '') argv.pop();
  while (argv.length && argv[0].trim() === '') argv.shift();
  if (argv.length) spec.command = argv;
  if (f.image.trim()) spec.image = f.image.trim();
  if (f.params.some((p) => p.key.trim())) {
    const params: Record<string, unknown> = {};
    for (const p of f.params) if (p.key.trim()) params[p.key.trim()] = parseScalar(p.value);
    spec.params = params;
  }
  const tasks: Record<string, unknown> = {};
  for (const r of f.roles) {
    if (!r.name.trim()) continue;
    const t: Record<string, unknown> = { ...(r.extra ?? {}) };
    if (r.replicas.trim()) t.replicas = numberOrText(r.replicas);
    if (r.gpus.trim()) t.gpus = numberOrText(r.gpus);
    if (r.cpus.trim()) t.cpus = numberOrText(r.cpus);
    if (r.memory.trim()) t.memory = numberOrText(r.memory);
    tasks[r.name.trim()] = t;
  }
  if (Object.keys(tasks).length) spec.tasks = tasks;
  const data = f.data
    .filter((d) => d.source.trim())
    .map((d) => (d.mount.trim() ? { source: d.source.trim(), mount: d.mount.trim() } : { source: d.source.trim() }));
  if (data.length) spec.data = data;
  for (const [k, v] of Object.entries(f.extra)) if (!KNOWN.has(k)) spec[k] = v;
  return spec;
}

const ROLE_KNOWN = new Set(['replicas', 'gpus', 'cpus', 'memory']);

function roleExtra(t: Record<string, unknown> | null | undefined): { extra?: Record<string, unknown> } {
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(t ?? {})) if (!ROLE_KNOWN.has(k)) extra[k] = v;
  return Object.keys(extra).length ? { extra } : {};
}

/** specToForm: the form for a spec (a job's, for Re-submit, or one pasted as YAML). */
export function specToForm(spec: Spec): FormState {
  const f = emptyForm();
  f.name = typeof spec.name === 'string' ? spec.name : '';
  f.framework = typeof spec.framework === 'string' ? spec.framework : 'command';
  if (Array.isArray(spec.command)) f.command = spec.command.map(scalarText).join('\n');
  else if (typeof spec.command === 'string') f.command = spec.command;
  f.image = typeof spec.image === 'string' ? spec.image : '';
  if (spec.params && typeof spec.params === 'object') {
    f.params = Object.entries(spec.params as Record<string, unknown>).map(([key, v]) => ({ key, value: scalarText(v) }));
  }
  if (spec.tasks && typeof spec.tasks === 'object') {
    f.roles = Object.entries(spec.tasks as Record<string, Record<string, unknown>>).map(([name, t]) => ({
      name,
      replicas: scalarText(t?.replicas),
      gpus: scalarText(t?.gpus),
      cpus: scalarText(t?.cpus),
      memory: scalarText(t?.memory),
      ...roleExtra(t),
    }));
  }
  if (Array.isArray(spec.data)) {
    f.data = (spec.data as Record<string, unknown>[]).map((d) => ({ source: scalarText(d?.source), mount: scalarText(d?.mount) }));
  }
  const extra: Spec = {};
  for (const [k, v] of Object.entries(spec)) if (!KNOWN.has(k)) extra[k] = v;
  f.extra = extra;
  return f;
}

/** specToYaml: a spec as YAML text. */
export function specToYaml(spec: Spec): string {
  return YAML.stringify(spec, { lineWidth: 0 });
}

export class YamlError extends Error {}

/** yamlToSpec: YAML (or JSON) text to a spec object; throws YamlError with the parser's message. */
export function yamlToSpec(text: string): Spec {
  let v: unknown;
  try {
    v = YAML.parse(text);
  } catch (e) {
    throw new YamlError((e as Error).message);
  }
  if (v === null || v === undefined) throw new YamlError('the spec is empty');
  if (typeof v !== 'object' || Array.isArray(v)) throw new YamlError('the spec must be a mapping (name: ..., command: ...)');
  return v as Spec;
}

/** submitBody: the POST /v1/jobs body. */
export function submitBody(spec: Spec, code?: string | null): { spec: Spec; code?: string } {
  return code ? { spec, code } : { spec };
}
