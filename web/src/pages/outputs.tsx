import { useState } from 'preact/hooks';
import { getJson, request, errorText } from '../api';
import { usePoll } from '../hooks';
import { assembleFile, baseName, type Manifest, type ManifestFile } from '../lib/download';
import { formatBytes } from '../lib/format';

interface TaskOutputs {
  task: number;
  role: string;
  index: number;
  attempt: number;
  state: string;
  outputs: string | null;
  size: number;
  /** the first 256 files of its manifest, null when it left none */
  files?: { path: string; size: number }[] | null;
  files_count?: number | null;
}

/** saveBlob: hands blob to the browser as a download named name. */
function saveBlob(blob: Blob, name: string) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

async function getChunk(digest: string): Promise<Uint8Array> {
  return new Uint8Array(await (await request('GET', `/v1/blobs/${digest}`)).arrayBuffer());
}

/** Files: the files of a manifest (a task's outputs, the checkpoint), folded; once unfolded
 * the whole manifest is read, and each file downloads from its chunks, each one checked. */
function Files({ digest, count, onError }: { digest: string; count: number | null; onError: (m: string | null) => void }) {
  const [manifest, setManifest] = useState<Manifest | null>(null);
  const open = (e: Event) => {
    if ((e.currentTarget as HTMLDetailsElement).open && !manifest)
      getJson<Manifest>(`/v1/manifests/${digest}`).then(setManifest, (err) => onError(errorText(err)));
  };
  const save = (f: ManifestFile) =>
    assembleFile(f, getChunk).then((blob) => { saveBlob(blob, baseName(f.path)); onError(null); }, (err) => onError(errorText(err)));
  const n = manifest ? manifest.files.length : count;
  return (
    <details onToggle={open}>
      <summary>{n === null ? 'files' : `${n} file${n === 1 ? '' : 's'}`}</summary>
      {!manifest && <p class="muted">reading…</p>}
      {manifest && (
        <ul class="files">
          {manifest.files.map((f) => (
            <li key={f.path}>
              <code>{f.path}</code> {formatBytes(f.size)}{' '}
              <button type="button" class="link" data-testid="download-file" onClick={() => save(f)}>download</button>
            </li>
          ))}
        </ul>
      )}
    </details>
  );
}

interface JobOutputs {
  job: number;
  checkpoint: string | null;
  tasks: TaskOutputs[];
}

/** Outputs: what each task (every attempt) left in $YARD_OUTPUT_DIR, and the job's
 * checkpoint, each a manifest of chunks whose files download one by one (docs/api.md,
 * "Outputs"). */
export function Outputs({ job, live }: { job: number; live: boolean }) {
  const { data, error } = usePoll(() => getJson<JobOutputs>(`/v1/jobs/${job}/outputs`), live ? 5000 : 0, [job, live]);
  const [msg, setMsg] = useState<string | null>(null);
  const rows = (data?.tasks ?? []).filter((t) => t.outputs);
  return (
    <section aria-labelledby="outputs-h" data-testid="outputs">
      <h2 id="outputs-h">Outputs</h2>
      {error && <p class="error" role="alert">{error}</p>}
      {msg && <p class="error" role="alert">{msg}</p>}
      {data && !rows.length && !data.checkpoint && <p class="muted">No outputs yet (tasks write them to <code>$YARD_OUTPUT_DIR</code>).</p>}
      {(rows.length > 0 || data?.checkpoint) && (
        <table class="list">
          <thead>
            <tr><th>Task</th><th>Attempt</th><th>State</th><th>Files</th><th>Size</th></tr>
          </thead>
          <tbody>
            {rows.map((t) => (
              <tr key={t.task} data-testid={`outputs-${t.role}-${t.index}-${t.attempt}`}>
                <td>{t.role}/{t.index}</td>
                <td>{t.attempt}</td>
                <td>{t.state}</td>
                <td><Files digest={t.outputs!} count={t.files_count ?? null} onError={setMsg} /></td>
                <td>{formatBytes(t.size)}</td>
              </tr>
            ))}
            {data?.checkpoint && (
              <tr data-testid="outputs-checkpoint">
                <td>checkpoint</td><td>latest</td><td>–</td>
                <td><Files digest={data.checkpoint} count={null} onError={setMsg} /></td><td>–</td>
              </tr>
            )}
          </tbody>
        </table>
      )}
    </section>
  );
}
