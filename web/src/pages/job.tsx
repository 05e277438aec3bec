import { useState } from 'preact/hooks';
import { getJson, postJson, errorText } from '../api';
import { usePoll } from '../hooks';
import { formatDuration, formatTime, isFinal, stateClass } from '../lib/format';
import { timeline } from '../lib/cluster';
import { attemptChoices, taskNames } from '../lib/logs';
import { gitCode } from '../lib/resubmit';
import { specToYaml } from '../lib/spec';
import type { Job } from '../lib/types';
import { LogView } from './logs';
import { Chart, Charts } from './charts';
import { pointsLine } from '../lib/usage';
import { Outputs } from './outputs';
import { TerminalPanel } from './terminal';
import { notebookUrl, runningTasks } from '../lib/session';

export const RESUBMIT_KEY = 'yard.resubmit';

export function JobPage({ id }: { id: number }) {
  const { data: job, error, refresh } = usePoll(() => getJson<Job>(`/v1/jobs/${id}`), 2000, [id]);
  const [actionMsg, setActionMsg] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // the attempt whose logs are shown; null: the latest, whichever it is
  const [logAttempt, setLogAttempt] = useState<number | null>(null);

  if (!job)
    return (
      <section>
        <h1>Job {id}</h1>
        {error ? <p class="error" role="alert">{error}</p> : <p>Loading…</p>}
      </section>
    );

  const act = (action: 'cancel' | 'hold' | 'release', done: string) => async () => {
    setBusy(true);
    try {
      await postJson(`/v1/jobs/${job.id}/${action}`, {});
      setActionMsg(done);
      refresh();
    } catch (e) {
      setActionMsg(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  const resubmit = () => {
    sessionStorage.setItem(RESUBMIT_KEY, JSON.stringify({ spec: job.spec ?? {}, code: job.code ?? null, from: job.id }));
    window.location.hash = `#/submit/from/${job.id}`;
  };
  const tasks = job.tasks ?? [];
  const latest = Math.max(0, ...tasks.map((t) => t.attempt));
  const current = tasks.filter((t) => t.attempt === latest);
  const live = !isFinal(job.state);
  const params = (job.spec?.params ?? {}) as Record<string, unknown>;
  const notebook = notebookUrl(job);
  return (
    <article aria-labelledby="job-h" class="job">
      <header class="job-head">
        <h1 id="job-h">
          Job {job.id}: {job.name}
        </h1>
        <span class={`state big ${stateClass(job.state)}`} data-testid="job-state">
          {job.state}
        </span>
        {job.experiment ? (
          <a href={`#/experiments/${job.experiment}`} data-testid="job-experiment">
            trial {job.trial} of experiment {job.experiment}
          </a>
        ) : null}
        <div class="actions">
          <button type="button" data-testid="cancel-button" onClick={act('cancel', 'Cancel requested.')} disabled={busy || !live}>
            Cancel
          </button>
          {job.state === 'queued' &&
            (job.reason?.code === 'held' ? (
              <button type="button" data-testid="release-button" onClick={act('release', 'Released.')} disabled={busy}>
                Release
              </button>
            ) : (
              <button type="button" data-testid="hold-button" onClick={act('hold', 'Held: it stays queued until released.')} disabled={busy}>
                Hold
              </button>
            ))}
          <button type="button" data-testid="resubmit-button" onClick={resubmit}>
            Re-submit…
          </button>
          {notebook && (
            // its own tab, with no way back to this one (the notebook is served on this origin)
            <a class="button primary" href={notebook} target="_blank" rel="noopener noreferrer" data-testid="notebook-link">
              Open the notebook
            </a>
          )}
        </div>
      </header>
      {error && <p class="error" role="alert">{error}</p>}
      {actionMsg && <p role="status" data-testid="action-message">{actionMsg}</p>}
      {job.reason && (
        <p class="reason" data-testid="job-reason">
          <code class="reason-code">{job.reason.code}</code> {job.reason.message}
        </p>
      )}
      <div class="job-grid">
        <section aria-labelledby="summary-h">
          <h2 id="summary-h">Summary</h2>
          <dl class="facts">
            <dt>User</dt>
            <dd>{job.user}</dd>
            <dt>Team</dt>
            <dd>{job.team ?? '–'}</dd>
            <dt>Priority</dt>
            <dd>{job.priority ?? '–'}</dd>
            <dt>Exit code</dt>
            <dd>{job.exit_code ?? '–'}</dd>
            <dt>Attempt</dt>
            <dd data-testid="job-attempt">{job.attempt} ({job.attempt} restart{job.attempt === 1 ? '' : 's'})</dd>
            <dt>Preemptions</dt>
            <dd>{job.preemptions ?? 0}</dd>
            {job.queue_position != null && (
              <>
                <dt>Queue position</dt>
                <dd>
                  {job.queue_position}
                  {job.ahead?.length ? ` (behind ${job.ahead.join(', ')})` : ''}
                </dd>
              </>
            )}
            <dt>Code</dt>
            <dd class="mono">{job.code ? job.code.slice(0, 19) + '…' : '–'}</dd>
            {gitCode(job.spec) && (
              <>
                <dt>Repository</dt>
                <dd class="mono" data-testid="job-git-repo">
                  {gitCode(job.spec)!.git}
                  {gitCode(job.spec)!.path ? ` (${gitCode(job.spec)!.path})` : ''}
                </dd>
                <dt>Ref</dt>
                <dd class="mono" data-testid="job-git-ref">{gitCode(job.spec)!.ref}</dd>
                <dt>Commit</dt>
                <dd class="mono" data-testid="job-git-sha">{gitCode(job.spec)!.sha ?? '–'}</dd>
              </>
            )}
          </dl>
          <h3>Timeline</h3>
          <ol class="timeline" data-testid="timeline">
            {timeline(job).map((s, i, all) => (
              <li key={`${i}-${s.label}`} class={s.at ? 'done' : 'pending'} data-testid={`timeline-${i}`}>
                <span class="tl-label">{s.label}</span> <time>{formatTime(s.at)}</time>
                {s.at && i > 0 && all[i - 1].at ? <span class="muted"> (+{formatDuration(s.at - all[i - 1].at!)})</span> : null}
                {s.detail ? <div class="muted tl-detail">{s.detail}</div> : null}
              </li>
            ))}
          </ol>
          <h3>Parameters</h3>
          {Object.keys(params).length ? (
            <table class="list params" data-testid="job-params">
              <tbody>
                {Object.entries(params).map(([k, v]) => (
                  <tr key={k}>
                    <th scope="row">{k}</th>
                    <td>{JSON.stringify(v)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            <p class="muted">none</p>
          )}
        </section>
        <section aria-labelledby="placement-h">
          <h2 id="placement-h">Placement</h2>
          <table class="list" data-testid="placement">
            <thead>
              <tr>
                <th scope="col">Task</th>
                <th scope="col">State</th>
                <th scope="col">Node</th>
                <th scope="col">GPUs</th>
                <th scope="col">Port</th>
                <th scope="col">Exit</th>
              </tr>
            </thead>
            <tbody>
              {current.map((t) => (
                <tr key={t.id}>
                  <td>
                    {t.role}/{t.index}
                  </td>
                  <td>
                    <span class={`state ${stateClass(t.state)}`}>{t.state}</span>
                  </td>
                  <td>{t.node ? <a href="#/cluster">{t.node}</a> : '–'}</td>
                  <td>{t.gpus?.length ? t.gpus.join(', ') : '–'}</td>
                  <td>{t.port ?? '–'}</td>
                  <td title={t.reason?.message}>{t.exit_code ?? (t.signal ? `signal ${t.signal}` : '–')}</td>
                </tr>
              ))}
              {current.length === 0 && (
                <tr>
                  <td colSpan={6} class="muted">
                    not placed yet
                  </td>
                </tr>
              )}
            </tbody>
          </table>
          <details>
            <summary>Spec</summary>
            <pre class="spec" data-testid="job-spec">{specToYaml(job.spec ?? {})}</pre>
          </details>
        </section>
      </div>
      {live && <TerminalPanel job={job.id} tasks={runningTasks(job)} />}
      <LogView
        job={job.id}
        tasks={taskNames(tasks, logAttempt)}
        live={live && logAttempt == null}
        attempt={logAttempt}
        attempts={attemptChoices(tasks)}
        onAttempt={setLogAttempt}
      />
      {job.gpu_util && (
        <section aria-labelledby="util-h" data-testid="job-gpu-util">
          <h2 id="util-h">GPU utilisation</h2>
          <p>
            {job.gpu_util.last.toFixed(0)}% now, mean {job.gpu_util.mean.toFixed(0)}%
            {job.gpu_util.flagged && <span class="state failed"> idle: flagged</span>}
          </p>
          <Chart name="GPU util %" lines={[pointsLine('util', job.gpu_util.points)]} time />
        </section>
      )}
      <Charts job={job.id} live={live} />
      <Outputs job={job.id} live={live} />
    </article>
  );
}
