// API errors: {"error": {"code", "message", "field"}} (docs/protocol.md).

export interface ApiErrorInfo {
  status: number;
  code: string;
  message: string;
  field?: string;
}

/** parseApiError: an error reply's status and body text to its code, message and field. */
export function parseApiError(status: number, body: string): ApiErrorInfo {
  try {
    const doc = JSON.parse(body);
    const e = doc?.error;
    if (e && typeof e === 'object') {
      return {
        status,
        code: typeof e.code === 'string' ? e.code : 'error',
        message: typeof e.message === 'string' ? e.message : JSON.stringify(e),
        ...(typeof e.field === 'string' && e.field ? { field: e.field } : {}),
      };
    }
  } catch {
    /* not JSON */
  }
  const text = body.trim().slice(0, 300);
  return { status, code: `http_${status}`, message: text || `HTTP ${status}` };
}

/** fieldMessage: the message without its leading "field: " (shown next to that field). */
export function fieldMessage(e: ApiErrorInfo): string {
  if (e.field && e.message.startsWith(`${e.field}: `)) return e.message.slice(e.field.length + 2);
  return e.message;
}

function parts(path: string): string[] {
  return path.split(/\.|(?=\[)/).filter(Boolean);
}

/**
 * placeError: the key of the form input an error's field belongs to: the known key equal to the
 * field, or the longest known key that is a path prefix of it ("tasks.worker.gpus.x" ->
 * "tasks.worker.gpus", "data[1].source" -> "data[1]"); null (show it at the top) when none.
 */
export function placeError(field: string | undefined, known: Iterable<string>): string | null {
  if (!field) return null;
  const fp = parts(field);
  let best: string | null = null;
  let bestLen = 0;
  for (const k of known) {
    const kp = parts(k);
    if (kp.length > fp.length || kp.length <= bestLen) continue;
    if (kp.every((p, i) => p === fp[i])) {
      best = k;
      bestLen = kp.length;
    }
  }
  return best;
}

/** formFieldKeys: the error keys the submit form shows messages at, for its roles, params and data. */
export function formFieldKeys(roles: string[], params: string[], dataCount: number): string[] {
  const keys = ['name', 'framework', 'command', 'image', 'tasks', 'params', 'data'];
  for (const r of roles) {
    keys.push(`tasks.${r}`);
    for (const f of ['replicas', 'gpus', 'cpus', 'memory']) keys.push(`tasks.${r}.${f}`);
  }
  for (const p of params) keys.push(`params.${p}`);
  for (let i = 0; i < dataCount; i++) keys.push(`data[${i}]`);
  return keys;
}
