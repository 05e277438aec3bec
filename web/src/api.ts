// The master's REST API on the same origin, with the token and the connection state.
import { parseApiError, type ApiErrorInfo } from './lib/errors';

const TOKEN_KEY = 'yard.token';

export function getToken(): string | null {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setToken(t: string | null) {
  try {
    if (t) localStorage.setItem(TOKEN_KEY, t);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    /* private mode: the token lives for this page only */
  }
}

/** takeTokenFromUrl: ?token=T stored and removed from the address bar. */
export function takeTokenFromUrl() {
  const u = new URL(window.location.href);
  const t = u.searchParams.get('token');
  if (t) {
    setToken(t);
    u.searchParams.delete('token');
    history.replaceState(history.state, '', u.pathname + (u.search === '?' ? '' : u.search) + u.hash);
  }
}

export class ApiError extends Error {
  info: ApiErrorInfo;
  constructor(info: ApiErrorInfo) {
    super(info.message);
    this.info = info;
  }
}

/** A connection failure (the master is down or restarting): polling retries. */
export class NetError extends Error {}

// ---- connection state: "ok" or "reconnecting" ----
type Listener = (reconnecting: boolean) => void;
let reconnecting = false;
const listeners = new Set<Listener>();
function setReconnecting(v: boolean) {
  if (v === reconnecting) return;
  reconnecting = v;
  for (const l of listeners) l(v);
}
export function onConnection(l: Listener): () => void {
  listeners.add(l);
  l(reconnecting);
  return () => listeners.delete(l);
}

let unauthorized: (() => void) | null = null;
export function onUnauthorized(f: () => void) {
  unauthorized = f;
}

export interface RawReply {
  status: number;
  headers: Headers;
  body: Response;
}

/** request: a call with the bearer token; errors become ApiError (HTTP) or NetError (no reply). */
export async function request(method: string, path: string, body?: BodyInit | null, contentType?: string): Promise<Response> {
  const headers: Record<string, string> = {};
  const t = getToken();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (contentType) headers['Content-Type'] = contentType;
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body ?? undefined, cache: 'no-store' });
  } catch (e) {
    setReconnecting(true);
    throw new NetError(`cannot reach the master: ${(e as Error).message}`);
  }
  // A proxy in front of a master that is down (the dev server, a load balancer) answers 5xx
  // without the master's JSON error document: that is a connection failure too.
  if (res.status >= 500) {
    const info = parseApiError(res.status, await res.text().catch(() => ''));
    if (info.code.startsWith('http_')) {
      setReconnecting(true);
      throw new NetError(`the master is not answering (HTTP ${res.status})`);
    }
    setReconnecting(false);
    throw new ApiError(info);
  }
  setReconnecting(false);
  if (!res.ok) {
    const info = parseApiError(res.status, await res.text().catch(() => ''));
    if (res.status === 401 && unauthorized) unauthorized();
    throw new ApiError(info);
  }
  return res;
}

export async function getJson<T>(path: string): Promise<T> {
  return (await request('GET', path)).json() as Promise<T>;
}

export async function postJson<T>(path: string, body: unknown): Promise<T> {
  return (await request('POST', path, JSON.stringify(body), 'application/json')).json() as Promise<T>;
}

export function errorText(e: unknown): string {
  if (e instanceof ApiError) return `${e.info.code}: ${e.info.message}`;
  return (e as Error)?.message ?? String(e);
}
