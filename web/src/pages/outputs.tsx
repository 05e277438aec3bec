import { useState } from 'preact/hooks';
import { getJson, request, errorText } from '../api';
import { usePoll } from '../hooks';
import { formatBytes } from '../lib/format';

interface TaskOutputs {
  task: number;
  role: string;
  index: number;
  attempt: number;
  state: string;
  outputs: string | null;
  size: number;
  /** the archive's files as its agent listed them (at most 256), null when not listed */
  files?: { path: string; size: number }[] | null;
  files_count?: number | null;
}

/** Files: the files of one task's archive, folded. */
function Files({ t }: { t: TaskOutputs }) {
  if (!t.files) return <span class="muted">not listed</span>;
  const more = (t.files_count ?? t.files.length) - t.files.length;
  return (
    <details>
      <summary>{t.files_count ?? t.files.length} file{(t.files_count ?? t.files.length) === 1 ? '' : 's'}</summary>
      <ul class="files">
        {t.files.map((f) => (
          <li key={f.path}><code>{f.path}</code> {formatBytes(f.size)}</li>
        ))}
        {more > 0 && <li class="muted">and {more} more (download the archive)</li>}
      </ul>
    </details>
  );
}
interface JobOutputs {
  job: number;
  checkpoint: string | null;
  tasks: TaskOutputs[];
}

/** download: a stored archive (GET /v1/code/DIGEST, with the token) saved as name. */
async function download(digest: string, name: string) {
  const r = await request('GET', `/v1/code/${digest}`);
  const url = URL.createObjectURL(await r.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

/** Outputs: what each task (every attempt) left in $YARD_OUTPUT_DIR, and the job's
 * checkpoint, each a tar.gz to download (docs/api.md, "Outputs"). */
export function Outputs({ job, live }: { job: number; live: boolean }) {
  const { data, error } = usePoll(() => getJson<JobOutputs>(`/v1/jobs/${job}/outputs`), live ? 5000 : 0, [job, live]);
  const [msg, setMsg] = useState<string | null>(null);
  const rows = (data?.tasks ?? []).filter((t) => t.outputs);
  const get = (digest: string, name: string) => download(digest, name).then(() => setMsg(null), (e) => setMsg(errorText(e)));
  return (
    <section aria-labelledby="outputs-h" data-testid="outputs">
      <h2 id="outputs-h">Outputs</h2>
      {error && <p class="error" role="alert">{error}</p>}
      {msg && <p class="error" role="alert">{msg}</p>}
      {data && !rows.length && !data.checkpoint && <p class="muted">No outputs yet (tasks write them to <code>$YARD_OUTPUT_DIR</code>).</p>}
      {(rows.length > 0 || data?.checkpoint) && (
        <table class="list">
          <thead>
            <tr><th>Task</th><th>Attempt</th><th>State</th><th>Files</th><th>Size</th><th></th></tr>
          </thead>
          <tbody>
            {rows.map((t) => (
              <tr key={t.task} data-testid={`outputs-${t.role}-${t.index}-${t.attempt}`}>
                <td>{t.role}/{t.index}</td>
                <td>{t.attempt}</td>
                <td>{t.state}</td>
                <td><Files t={t} /></td>
                <td>{formatBytes(t.size)}</td>
                <td>
                  <button type="button" class="link" onClick={() => get(t.outputs!, `job-${job}-${t.role}-${t.index}-attempt-${t.attempt}.tar.gz`)}>
                    Download
                  </button>
                </td>
              </tr>
            ))}
            {data?.checkpoint && (
              <tr data-testid="outputs-checkpoint">
                <td>checkpoint</td><td>latest</td><td>–</td><td>–</td><td>–</td>
                <td>
                  <button type="button" class="link" onClick={() => get(data.checkpoint!, `job-${job}-checkpoint.tar.gz`)}>
                    Download
                  </button>
                </td>
              </tr>
            )}
          </tbody>
        </table>
      )}
    </section>
  );
}
