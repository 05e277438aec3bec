import { describe, expect, it } from 'vitest';
import {
  CH_RESIZE,
  CH_STDIN,
  closeText,
  execUrl,
  message,
  notebookUrl,
  parseMessage,
  resizeMessage,
  runningTasks,
  statusText,
  stdinMessage,
  tokenCookie,
} from '../src/lib/session';
import type { Job } from '../src/lib/types';

describe('execUrl', () => {
  it('is the exec WebSocket of the page\'s master, the command as cmd= in order', () => {
    const u = execUrl({ protocol: 'http:', host: 'm:7420' }, 7, 'worker/1', ['/bin/sh', '-c', 'echo a&b'], 120, 40);
    expect(u).toBe('ws://m:7420/v1/jobs/7/exec?task=worker%2F1&tty=1&stdin=1&cols=120&rows=40&cmd=%2Fbin%2Fsh&cmd=-c&cmd=echo+a%26b');
    const q = new URL(u.replace(/^ws/, 'http')).searchParams;
    expect(q.getAll('cmd')).toEqual(['/bin/sh', '-c', 'echo a&b']);
  });
  it('is wss under https', () => {
    expect(execUrl({ protocol: 'https:', host: 'm' }, 1, 'w/0', ['x'], 80, 24)).toMatch(/^wss:\/\/m\/v1\/jobs\/1\/exec\?/);
  });
});

describe('yard.exec.v1 messages', () => {
  it('puts the channel first', () => {
    expect(Array.from(message(3, new Uint8Array([9, 8])))).toEqual([3, 9, 8]);
    expect(Array.from(stdinMessage('é\r'))).toEqual([CH_STDIN, 0xc3, 0xa9, 13]);
    expect(Array.from(stdinMessage(new Uint8Array([0xff])))).toEqual([CH_STDIN, 0xff]);
    const r = resizeMessage(100, 30);
    expect(r[0]).toBe(CH_RESIZE);
    expect(JSON.parse(new TextDecoder().decode(r.subarray(1)))).toEqual({ cols: 100, rows: 30 });
  });
  it('reads the channel back', () => {
    const m = parseMessage(new Uint8Array([1, 104, 105]).buffer);
    expect(m?.channel).toBe(1);
    expect(new TextDecoder().decode(m!.payload)).toBe('hi');
    expect(parseMessage(new ArrayBuffer(0))).toBeNull();
  });
  it('says how a command ended', () => {
    expect(statusText({ exit_code: 0, signal: null, message: null })).toBe('exited with status 0');
    expect(statusText({ exit_code: null, signal: 9, message: null })).toBe('killed by signal 9');
    expect(statusText({ exit_code: null, signal: null, message: "node 'n1' was lost" })).toBe("ended: node 'n1' was lost");
    expect(closeText(1011, "node 'n1' was lost")).toBe("the session was cut off: node 'n1' was lost");
    expect(closeText(1006, '')).toBe('the session ended: the master or the agent went away');
  });
});

describe('tokenCookie', () => {
  it('is for the session and proxy routes only, never another site', () => {
    expect(tokenCookie('yard_u_abc', false)).toBe('yard_token=yard_u_abc; Path=/v1/jobs/; SameSite=Strict');
    expect(tokenCookie('yard_u_abc', true)).toBe('yard_token=yard_u_abc; Path=/v1/jobs/; SameSite=Strict; Secure');
  });
  it('removes it on sign-out', () => {
    expect(tokenCookie(null, false)).toBe('yard_token=; Path=/v1/jobs/; SameSite=Strict; Max-Age=0');
  });
  it('sets none for a token a cookie cannot carry as it is', () => {
    expect(tokenCookie('a;b', false)).toBeNull();
    expect(tokenCookie('a b', false)).toBeNull();
  });
});

function job(over: Partial<Job>): Job {
  return {
    id: 12,
    name: 'notebook',
    user: 'alice',
    state: 'running',
    attempt: 1,
    spec: { framework: 'jupyter', env: { JUPYTER_TOKEN: 'ab/c' } },
    tasks: [
      { id: 1, role: 'notebook', index: 0, attempt: 0, state: 'failed', port: 30000 },
      { id: 2, role: 'notebook', index: 0, attempt: 1, state: 'running', port: 30001 },
    ],
    ...over,
  } as unknown as Job;
}

describe('notebookUrl', () => {
  it('is the proxy\'s path to the current task\'s port, with Jupyter\'s token', () => {
    expect(notebookUrl(job({}))).toBe('/v1/jobs/12/proxy/notebook/0/30001/?token=ab%2Fc');
  });
  it('has no token when the viewer does not see the env', () => {
    expect(notebookUrl(job({ spec: { framework: 'jupyter' } }))).toBe('/v1/jobs/12/proxy/notebook/0/30001/');
  });
  it('is null for other jobs, and for a notebook that does not run', () => {
    expect(notebookUrl(job({ spec: { framework: 'command' } }))).toBeNull();
    expect(notebookUrl(job({ state: 'queued' }))).toBeNull();
    expect(notebookUrl(job({ tasks: [] }))).toBeNull();
  });
  it('names the running tasks of the current attempt', () => {
    expect(runningTasks(job({}))).toEqual(['notebook/0']);
  });
});
