// Interactive sessions from the browser (docs/protocol.md, "Sessions" and
// "Proxy"): the exec WebSocket's URL and its yard.exec.v1 messages, the
// cookie that lets a browser through the session and proxy routes, and the
// URL of a notebook job's server through the proxy. Pure functions.
import type { Job } from './types';

/** The channels of yard.exec.v1: each binary message's first byte. */
export const CH_STDIN = 0;
export const CH_STDOUT = 1;
export const CH_STDERR = 2;
export const CH_STATUS = 3;
export const CH_RESIZE = 4;

export const EXEC_PROTOCOL = 'yard.exec.v1';

/**
 * The command a terminal runs in a task: the task's bash as a login shell
 * where it has one, else sh.
 */
export const SHELL_ARGV = ['/bin/sh', '-c', 'if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi'];

/** execUrl: the WebSocket URL of an exec session with a terminal (tty, stdin) of cols x rows. */
export function execUrl(
  loc: { protocol: string; host: string },
  job: number,
  task: string,
  argv: string[],
  cols: number,
  rows: number,
): string {
  const q = new URLSearchParams({ task, tty: '1', stdin: '1', cols: String(cols), rows: String(rows) });
  for (const a of argv) q.append('cmd', a);
  const scheme = loc.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${loc.host}/v1/jobs/${job}/exec?${q.toString()}`;
}

/** message: a yard.exec.v1 message of channel ch and payload. */
export function message(ch: number, payload: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(payload.length + 1);
  out[0] = ch;
  out.set(payload, 1);
  return out;
}

const enc = new TextEncoder();

/** stdinMessage: keys typed into the terminal (text as UTF-8, or bytes). */
export function stdinMessage(data: string | Uint8Array): Uint8Array<ArrayBuffer> {
  return message(CH_STDIN, typeof data === 'string' ? enc.encode(data) : data);
}

/** resizeMessage: the terminal's new size. */
export function resizeMessage(cols: number, rows: number): Uint8Array<ArrayBuffer> {
  return message(CH_RESIZE, enc.encode(JSON.stringify({ cols, rows })));
}

export interface Message {
  channel: number;
  payload: Uint8Array;
}

/** parseMessage: a binary message from the server, or null for an empty one. */
export function parseMessage(data: ArrayBuffer | Uint8Array): Message | null {
  const b = data instanceof Uint8Array ? data : new Uint8Array(data);
  if (!b.length) return null;
  return { channel: b[0], payload: b.subarray(1) };
}

export interface ExecStatus {
  exit_code: number | null;
  signal: number | null;
  message: string | null;
}

/** statusText: how the command ended, in words, from its status message. */
export function statusText(st: ExecStatus): string {
  const how =
    st.exit_code != null ? `exited with status ${st.exit_code}` : st.signal != null ? `killed by signal ${st.signal}` : 'ended';
  return st.message ? `${how}: ${st.message}` : how;
}

/** closeText: why a WebSocket closed without a status (code, reason). */
export function closeText(code: number, reason: string): string {
  if (reason) return `the session was cut off: ${reason}`;
  if (code === 1000) return 'the session ended';
  return 'the session ended: the master or the agent went away';
}

/**
 * tokenCookie: the document.cookie assignment that gives the browser the
 * token as the cookie yard_token on the session and proxy routes (under
 * /v1/jobs/, never sent to another site), or that removes it (null). A token
 * with characters a cookie cannot carry as they are gets none.
 */
export function tokenCookie(token: string | null, https: boolean): string | null {
  if (token && !/^[A-Za-z0-9_.~-]+$/.test(token)) return null;
  let c = `yard_token=${token ?? ''}; Path=/v1/jobs/; SameSite=Strict`;
  if (!token) c += '; Max-Age=0';
  if (https) c += '; Secure';
  return c;
}

/** A running task's name and port. */
export interface TaskPort {
  task: string;
  port: number;
}

/** runningTasks: ROLE/INDEX of the tasks of the job's current attempt that run. */
export function runningTasks(job: Job): string[] {
  const tasks = job.tasks ?? [];
  const latest = Math.max(0, ...tasks.map((t) => t.attempt));
  return tasks.filter((t) => t.attempt === latest && t.state === 'running').map((t) => `${t.role}/${t.index}`);
}

/**
 * notebookUrl: where a running notebook job (framework jupyter) serves,
 * through the master's proxy, with Jupyter's own token when the viewer sees
 * the spec's env; null for any other job, or one not running.
 */
export function notebookUrl(job: Job): string | null {
  const spec = (job.spec ?? {}) as { framework?: string; env?: Record<string, unknown> };
  if (spec.framework !== 'jupyter' || job.state !== 'running') return null;
  const t = (job.tasks ?? []).find((x) => x.attempt === job.attempt && x.state === 'running' && x.port);
  if (!t) return null;
  const base = `/v1/jobs/${job.id}/proxy/${encodeURIComponent(t.role)}/${t.index}/${t.port}/`;
  const token = spec.env?.JUPYTER_TOKEN;
  return typeof token === 'string' && token ? `${base}?token=${encodeURIComponent(token)}` : base;
}
