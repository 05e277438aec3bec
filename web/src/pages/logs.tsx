import { useEffect, useRef, useState } from 'preact/hooks';
import { request, NetError, errorText } from '../api';
import { countMatches, highlight, logsPath, type AttemptChoice } from '../lib/logs';

const PAGE = 256 * 1024; // bytes per request
const KEEP = 8 * 1024 * 1024; // the most text the view holds

/**
 * LogView: a task's stream of one attempt (null: the latest), paged by
 * offset; follows new bytes while "follow" is on. With more than one
 * attempt, a picker chooses which (onAttempt).
 */
export function LogView({ job, tasks, live, attempt = null, attempts = [], onAttempt }: {
  job: number;
  tasks: string[];
  live: boolean;
  attempt?: number | null;
  attempts?: AttemptChoice[];
  onAttempt?: (a: number | null) => void;
}) {
  const [task, setTask] = useState(tasks[0] ?? 'worker/0');
  const [stream, setStream] = useState<'stdout' | 'stderr'>('stdout');
  const [text, setText] = useState('');
  const [follow, setFollow] = useState(true);
  const [query, setQuery] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [eof, setEof] = useState(false);
  const pre = useRef<HTMLPreElement>(null);
  const offset = useRef(0);

  useEffect(() => {
    if (!tasks.includes(task) && tasks.length) setTask(tasks[0]);
  }, [tasks.join(',')]);

  useEffect(() => {
    if (!tasks.length) return; // not placed yet: no log to ask for
    let alive = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const dec = new TextDecoder();
    offset.current = 0;
    setText('');
    setEof(false);
    setError(null);
    const step = async () => {
      let more = false;
      let ended = false;
      try {
        const res = await request('GET', logsPath(job, task, stream, offset.current, PAGE, attempt));
        const buf = new Uint8Array(await res.arrayBuffer());
        if (!alive) return;
        const next = Number(res.headers.get('X-Yard-Offset') ?? offset.current + buf.length);
        const size = Number(res.headers.get('X-Yard-Size') ?? next);
        ended = res.headers.get('X-Yard-Eof') === '1';
        offset.current = next;
        if (buf.length) {
          const chunk = dec.decode(buf, { stream: true });
          setText((t) => {
            const s = t + chunk;
            return s.length > KEEP ? s.slice(s.length - KEEP) : s;
          });
        }
        more = next < size;
        setEof(ended);
        setError(null);
      } catch (e) {
        if (!alive) return;
        if (!(e instanceof NetError)) {
          const msg = errorText(e);
          // A task that has not started yet has no log: not an error worth shouting about.
          setError(msg);
        }
      }
      if (!alive) return;
      if (more) timer = setTimeout(step, 0);
      else if (!ended && followRef.current) timer = setTimeout(step, 1000);
      else if (!ended) timer = setTimeout(step, 3000);
    };
    step();
    return () => {
      alive = false;
      if (timer) clearTimeout(timer);
    };
  }, [job, task, stream, attempt, tasks.length > 0]);

  const followRef = useRef(follow);
  followRef.current = follow;
  useEffect(() => {
    if (follow && pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [text, follow]);

  const download = () => {
    const url = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = `job-${job}-${task.replace('/', '-')}${attempt == null ? '' : `-attempt${attempt}`}-${stream}.log`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  };

  const matches = query ? countMatches(text, query) : 0;
  return (
    <section aria-labelledby="logs-h" class="logs">
      <h2 id="logs-h">Logs</h2>
      <div class="toolbar">
        {attempts.length > 1 && (
          <label>
            Attempt
            <select
              data-testid="log-attempt"
              value={attempt == null ? '' : String(attempt)}
              onChange={(e) => {
                const v = (e.target as HTMLSelectElement).value;
                onAttempt?.(v === '' ? null : Number(v));
              }}
            >
              {attempts.map((a) => (
                <option key={a.attempt} value={a.latest ? '' : String(a.attempt)}>
                  {a.label}
                </option>
              ))}
            </select>
          </label>
        )}
        <label>
          Task
          <select data-testid="log-task" value={task} onChange={(e) => setTask((e.target as HTMLSelectElement).value)}>
            {(tasks.length ? tasks : [task]).map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
        <label>
          Stream
          <select data-testid="log-stream" value={stream} onChange={(e) => setStream((e.target as HTMLSelectElement).value as 'stdout' | 'stderr')}>
            <option value="stdout">stdout</option>
            <option value="stderr">stderr</option>
          </select>
        </label>
        <label class="check">
          <input type="checkbox" data-testid="log-follow" checked={follow} onChange={(e) => setFollow((e.target as HTMLInputElement).checked)} />
          Follow
        </label>
        <label>
          Search
          <input type="search" data-testid="log-search" value={query} onInput={(e) => setQuery((e.target as HTMLInputElement).value)} />
        </label>
        {query && <span class="muted" data-testid="log-matches">{matches} matches</span>}
        <button type="button" data-testid="log-download" onClick={download} disabled={!text}>
          Download
        </button>
        <span class="muted">
          {offset.current} bytes{eof ? ' (end)' : live ? '' : ''}
        </span>
      </div>
      {error && <p class="error" role="alert">{error}</p>}
      <pre class="log" data-testid="log-view" ref={pre} tabIndex={0} aria-label={`log of ${task} ${stream}`}>
        {highlight(text, query).map((p, i) => (p.match ? <mark key={i}>{p.text}</mark> : p.text))}
      </pre>
    </section>
  );
}
