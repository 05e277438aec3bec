import { getJson } from '../api';
import { usePoll } from '../hooks';
import { formatTime } from '../lib/format';

/** One run of a template: the job a new dataset version (or a push) made, or why it was refused;
 * neither while a pushed commit's code is fetched. */
export interface Run {
  version?: number;
  commit?: string;
  ref?: string;
  build_only?: boolean;
  job?: number;
  error?: string;
}

export interface Template {
  name: string;
  user: string;
  team: string | null;
  on_dataset: string | null;
  on_git: { branches: string[]; build_only: boolean } | null;
  created_at: number;
  runs: Run[];
  spec: unknown;
}

/** What runs template t: "dataset digits" or "git main, release/*". */
export function triggerText(t: Template): string {
  if (!t.on_git) return `dataset ${t.on_dataset}`;
  return `git ${t.on_git.branches.join(', ')}${t.on_git.build_only ? ' (build only)' : ''}`;
}

/** What made run r of t: "digits@3" or "main@1a2b3c4". */
export function runOrigin(t: Template, r: Run): string {
  return r.commit ? `${r.ref}@${r.commit.slice(0, 7)}` : `${t.on_dataset}@${r.version}`;
}

function RunCell({ r, t }: { r: Run; t: Template }) {
  return (
    <>
      {runOrigin(t, r)} →{' '}
      {r.job !== undefined ? (
        <a href={`#/jobs/${r.job}`}>job {r.job}</a>
      ) : r.error !== undefined ? (
        <span class="error">refused: {r.error}</span>
      ) : (
        <span class="muted">fetching its code</span>
      )}
    </>
  );
}

/** TemplatesPage: the job templates that run again on each new version of their dataset
 * (docs/pipelines.md, "Templates") or on each push to their repository (docs/git.md). */
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
          version of the dataset, <code>--on-git BRANCH</code> on each push to that branch.
        </p>
      )}
      {list.length > 0 && (
        <table class="list" data-testid="templates">
          <thead>
            <tr><th>Name</th><th>User</th><th>Team</th><th>Runs on</th><th>Runs</th><th>Last run</th><th>Created</th></tr>
          </thead>
          <tbody>
            {list.map((t) => {
              const last = t.runs[t.runs.length - 1];
              return (
                <tr key={t.name} data-testid={`template-row-${t.name}`}>
                  <td><a href={`#/templates/${encodeURIComponent(t.name)}`}>{t.name}</a></td>
                  <td>{t.user}</td>
                  <td>{t.team ?? '–'}</td>
                  <td>{triggerText(t)}</td>
                  <td>{t.runs.length}</td>
                  <td>{last ? <RunCell r={last} t={t} /> : '–'}</td>
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
            {data.user}{data.team ? ` (team ${data.team})` : ''} · runs on <code>{triggerText(data)}</code> · created{' '}
            {formatTime(data.created_at)}
          </p>
          <h2>Runs</h2>
          {!data.runs.length && (
            <p class="muted">No run yet: {data.on_git ? 'the next push makes one' : `the next version of ${data.on_dataset} makes one`}.</p>
          )}
          {data.runs.length > 0 && (
            <ul data-testid="template-runs">
              {[...data.runs].reverse().map((r) => (
                <li key={r.commit ?? r.version}><RunCell r={r} t={data} /></li>
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
