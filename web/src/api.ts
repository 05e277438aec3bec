// The master's REST API on the same origin, with the token and the connection state.
import { parseApiError, type ApiErrorInfo } from './lib/errors';
import { tokenCookie } from './lib/session';

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
  syncTokenCookie(t);
}

/**
 * syncTokenCookie: the browser's cookie yard_token follows the token (set,
 * or removed with null): a browser cannot send an Authorization header on
 * a WebSocket or a link it opens, so the session and proxy routes (the
 * terminal, a notebook) take the cookie, under /v1/jobs/ only.
 */
export function syncTokenCookie(t: string | null) {
  const c = tokenCookie(t, window.location.protocol === 'https:');
  if (c) document.cookie = c;
}

export interface SignInUrl {
  /** the token of a #token=T fragment, or null */
  token: string | null;
  /** whether the address has a ?token= query: never used (see takeTokenFromUrl) */
  queryToken: boolean;
  /** the address (path, query and fragment) without either, or null when it has neither */
  clean: string | null;
}

/**
 * parseSignInUrl: the sign-in token of an address. It is taken from the fragment only
 * (/#token=T): a fragment is never sent to the server, so the token stays out of proxy and
 * access logs and Referer headers. A ?token= query is reported and dropped, never used.
 */
export function parseSignInUrl(href: string): SignInUrl {
  const u = new URL(href);
  const m = /^#token=([^&]*)/.exec(u.hash);
  let token: string | null = null;
  if (m) {
    try {
      token = decodeURIComponent(m[1]) || null;
    } catch {
      token = null;
    }
    u.hash = '';
  }
  const queryToken = u.searchParams.has('token');
  if (queryToken) u.searchParams.delete('token');
  const clean = m || queryToken ? u.pathname + u.search + u.hash : null;
  return { token, queryToken, clean };
}

export const QUERY_TOKEN_MESSAGE =
  'The token in the address (?token=) was not used: a query string is sent to the server and ' +
  'kept in history and logs. Open /#token=T instead, or sign in here.';

/**
 * takeTokenFromUrl: a #token=T fragment is stored (as the sign-in form does) and removed from
 * the address bar; a ?token= query is removed too, unused. Returns the message to show for
 * that case, else null.
 */
export function takeTokenFromUrl(): string | null {
  const s = parseSignInUrl(window.location.href);
  if (s.token) setToken(s.token);
  if (s.clean !== null) history.replaceState(history.state, '', s.clean);
  return s.queryToken ? QUERY_TOKEN_MESSAGE : null;
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

/**
 * leaderAddress: where the browser goes when a reply is a standby master's 503 not_leader
 * naming the leader (several masters sharing one store): the leader's address with the token
 * in the fragment, as a sign-in link, since this origin's storage is not the leader's. Null
 * when the reply is not one, names no leader, names this origin (no loop), or a leader of
 * another scheme than this page's (never from https to http).
 */
export function leaderAddress(status: number, body: string, here: string, token: string | null): string | null {
  if (status !== 503) return null;
  let leader: unknown;
  try {
    const e = JSON.parse(body)?.error;
    if (e?.code !== 'not_leader') return null;
    leader = e.leader;
  } catch {
    return null;
  }
  if (typeof leader !== 'string') return null;
  let to: URL;
  const cur = new URL(here);
  try {
    to = new URL(leader);
  } catch {
    return null;
  }
  if (to.protocol !== cur.protocol || to.origin === cur.origin) return null;
  return leader.replace(/\/+$/, '') + '/' + (token ? `#token=${encodeURIComponent(token)}` : '');
}

let movingTo: string | null = null;

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
    const text = await res.text().catch(() => '');
    const to = leaderAddress(res.status, text, window.location.href, getToken());
    if (to) {
      // a standby did nothing: the leader's page asks again
      if (movingTo !== to) window.location.assign(to);
      movingTo = to;
      throw new NetError('this master is a standby: moving to the leader');
    }
    const info = parseApiError(res.status, text);
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
