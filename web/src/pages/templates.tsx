import { getJson } from '../api';
import { usePoll } from '../hooks';
import { formatTime } from '../lib/format';

/** One run of a template: the job a new dataset version made, or why it was refused. */
interface Run {
  version: number;
  job?: number;
  error?: string;
}

interface Template {
  name: string;
  user: string;
  team: string | null;
  on_dataset: string;
  created_at: number;
  runs: Run[];
  spec: unknown;
}

function RunCell({ r, dataset }: { r: Run; dataset: string }) {
  return (
    <>
      {dataset}@{r.version} →{' '}
      {r.job !== undefined ? <a href={`#/jobs/${r.job}`}>job {r.job}</a> : <span class="error">refused: {r.error}</span>}
    </>
  );
}

/** TemplatesPage: the job templates that run again on each new version of their dataset
 * (docs/pipelines.md, "Templates"). */
export function TemplatesPage() {
  const { data, error } = usePoll(() => getJson<{ templates: Template[] }>('/v1/templates'), 5000, []);
  const list = data?.templates ?? [];
  return (
    <section aria-labelledby="templates-h">
      <h1 id="templates-h">Templates</h1>
      {error && <p class="error" role="alert">{error}</p>}
      {data && !list.length && (
        <p class="muted">
          No templates yet: <code>yard template create NAME job.yaml --on-dataset DATASET</code> runs the job again on each new
          version of the dataset.
        </p>
      )}
      {list.length > 0 && (
        <table class="list" data-testid="templates">
          <thead>
            <tr><th>Name</th><th>User</th><th>Team</th><th>On dataset</th><th>Runs</th><th>Last run</th><th>Created</th></tr>
          </thead>
          <tbody>
            {list.map((t) => {
              const last = t.runs[t.runs.length - 1];
              return (
                <tr key={t.name} data-testid={`template-row-${t.name}`}>
                  <td><a href={`#/templates/${encodeURIComponent(t.name)}`}>{t.name}</a></td>
                  <td>{t.user}</td>
                  <td>{t.team ?? '–'}</td>
                  <td>{t.on_dataset}</td>
                  <td>{t.runs.length}</td>
                  <td>{last ? <RunCell r={last} dataset={t.on_dataset} /> : '–'}</td>
                  <td>{formatTime(t.created_at)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** TemplatePage: one template, every run it made (newest first) and its spec. */
export function TemplatePage({ name }: { name: string }) {
  const { data, error } = usePoll(() => getJson<Template>(`/v1/templates/${encodeURIComponent(name)}`), 5000, [name]);
  return (
    <section aria-labelledby="template-h">
      <h1 id="template-h">Template {name}</h1>
      {error && <p class="error" role="alert">{error}</p>}
      {data && (
        <>
          <p data-testid="template-summary">
            {data.user}{data.team ? ` (team ${data.team})` : ''} · runs on each new version of <code>{data.on_dataset}</code> · created{' '}
            {formatTime(data.created_at)}
          </p>
          <h2>Runs</h2>
          {!data.runs.length && <p class="muted">No run yet: the next version of {data.on_dataset} makes one.</p>}
          {data.runs.length > 0 && (
            <ul data-testid="template-runs">
              {[...data.runs].reverse().map((r) => (
                <li key={r.version}><RunCell r={r} dataset={data.on_dataset} /></li>
              ))}
            </ul>
          )}
          <h2>Spec</h2>
          <pre class="spec">{JSON.stringify(data.spec, null, 2)}</pre>
        </>
      )}
    </section>
  );
}
