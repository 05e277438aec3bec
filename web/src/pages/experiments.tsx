import { useState } from 'preact/hooks';
import { getJson, postJson } from '../api';
import { usePoll } from '../hooks';
import {
  differingParams,
  formatView,
  sortTrials,
  trialLabel,
  viewLines,
  type Experiment,
  type Param,
  type Trial,
  type View,
} from '../lib/experiments';
import { formatTime, isFinal, stateClass } from '../lib/format';
import { metricNames, type Line } from '../lib/metrics';
import { Chart, useJobsMetrics } from './charts';

function fmt(v: Param | null | undefined): string {
  if (v === null || v === undefined) return '–';
  return typeof v === 'number' ? String(Number(v.toPrecision(6))) : String(v);
}

/** ExperimentsPage: every experiment the caller may see, newest first. */
export function ExperimentsPage() {
  const { data, error } = usePoll(() => getJson<{ experiments: Experiment[] }>('/v1/experiments'), 3000, []);
  const exps = data?.experiments ?? [];
  return (
    <section aria-labelledby="exps-h">
      <h1 id="exps-h">Experiments</h1>
      {error && <p class="error" role="alert">{error}</p>}
      {data && !exps.length && (
        <p class="muted">
          No experiments yet: submit a spec with a <code>sweep:</code> section (docs/experiments.md).
        </p>
      )}
      {exps.length > 0 && (
        <table class="list" data-testid="experiments">
          <thead>
            <tr>
              <th>ID</th><th>Name</th><th>User</th><th>State</th><th>Method</th><th>Trials</th><th>Objective</th><th>Best</th><th>Created</th>
            </tr>
          </thead>
          <tbody>
            {exps.map((e) => {
              const done = Object.entries(e.counts).reduce((n, [s, k]) => n + (isFinal(s) ? k : 0), 0);
              return (
                <tr key={e.id} data-testid={`experiment-row-${e.id}`}>
                  <td><a href={`#/experiments/${e.id}`}>{e.id}</a></td>
                  <td><a href={`#/experiments/${e.id}`}>{e.name}</a></td>
                  <td>{e.user}</td>
                  <td><span class={`state ${stateClass(e.state)}`}>{e.state}</span></td>
                  <td>{e.method}{e.early_stop ? ` + ${e.early_stop.method}` : ''}</td>
                  <td>{done}/{e.trials_total}</td>
                  <td>{e.objective.mode} {e.objective.metric}</td>
                  <td>{e.best ? fmt(e.best.value) : '–'}</td>
                  <td>{formatTime(e.created_at)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** The compared trials' series of every metric, fetched again while any of them is live. */
function Compare({ exp, trials, view }: { exp: Experiment; trials: Trial[]; view: View }) {
  const live = trials.some((t) => !isFinal(t.state));
  const { data, error } = useJobsMetrics(trials.map((t) => t.job), live);
  const differing = differingParams(trials, exp.params);
  // the trial's first task (every attempt, in order) is what its objective is read from
  const lineOf = (t: Trial, name: string): Line => {
    const series = (data.get(t.job) ?? []).filter((s) => s.name === name);
    const first = series[0]?.task;
    const points = series.filter((s) => s.task === first).flatMap((s) => s.points.map((p) => [p[0], p[1]] as [number, number]));
    return { label: trialLabel(t, differing), points };
  };
  const names = metricNames([...data.values()].flat());
  return (
    <div data-testid="compare">
      {error && <p class="error" role="alert">{error}</p>}
      <div class="charts">
        {names.map((n) => (
          <Chart key={`${n}-${view.log}`} name={n} log={view.log} lines={viewLines(trials.map((t) => lineOf(t, n)), view)} />
        ))}
      </div>
    </div>
  );
}

/** ExperimentPage: its trials (sortable by any param or metric) and the comparison of the
 * ticked ones; the view lives in the hash's query, so its URL opens it again. */
export function ExperimentPage({ id, view, setView }: { id: number; view: View; setView: (v: View) => void }) {
  const { data: exp, error, refresh } = usePoll(() => getJson<Experiment>(`/v1/experiments/${id}`), 3000, [id]);
  const [actionError, setActionError] = useState<string | null>(null);
  if (!exp) return <section>{error ? <p class="error" role="alert">{error}</p> : <p class="muted">Loading…</p>}</section>;
  const trials = sortTrials(exp.trials ?? [], view.sort, view.desc);
  const cols: [string, string][] = [
    ['trial', 'Trial'],
    ['job', 'Job'],
    ['state', 'State'],
    ...exp.params.map((p) => [`param:${p}`, p] as [string, string]),
    ['last', `last ${exp.objective.metric}`],
    ['best', `best ${exp.objective.metric}`],
    ['step', 'Step'],
  ];
  const clickSort = (key: string) =>
    setView({ ...view, sort: key, desc: view.sort === key ? !view.desc : key === 'best' || key === 'last' ? exp.objective.mode === 'max' : false });
  const toggle = (job: number) =>
    setView({ ...view, compare: view.compare.includes(job) ? view.compare.filter((j) => j !== job) : [...view.compare, job] });
  const compared = (exp.trials ?? []).filter((t) => view.compare.includes(t.job));
  return (
    <section aria-labelledby="exp-h">
      <h1 id="exp-h">
        Experiment {exp.id} {exp.name} <span class={`state big ${stateClass(exp.state)}`} data-testid="experiment-state">{exp.state}</span>
      </h1>
      <p>
        {exp.method} over {exp.params.join(', ')}: {exp.trials_total} trials, {exp.max_parallel} at a time; objective {exp.objective.mode}{' '}
        {exp.objective.metric}
        {exp.early_stop ? `; early stopping: ${exp.early_stop.method}` : ''}. By {exp.user}
        {exp.team ? ` (${exp.team})` : ''}.
      </p>
      {exp.reason && <p class="error">{exp.reason}</p>}
      {error && <p class="error" role="alert">{error}</p>}
      {actionError && <p class="error" role="alert">{actionError}</p>}
      {exp.state === 'running' && (
        <button
          type="button"
          data-testid="experiment-cancel"
          onClick={async () => {
            try {
              await postJson(`/v1/experiments/${exp.id}/cancel`, {});
              setActionError(null);
              refresh();
            } catch (e) {
              setActionError((e as Error).message);
            }
          }}
        >
          Cancel experiment
        </button>
      )}
      <table class="list" data-testid="trials">
        <thead>
          <tr>
            <th>Compare</th>
            {cols.map(([key, label]) => (
              <th key={key} aria-sort={view.sort === key ? (view.desc ? 'descending' : 'ascending') : undefined}>
                <button type="button" class="link" data-testid={`sort-${key}`} onClick={() => clickSort(key)}>
                  {label}
                  {view.sort === key ? (view.desc ? ' ▼' : ' ▲') : ''}
                </button>
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {trials.map((t) => (
            <tr key={t.job} data-testid={`trial-row-${t.trial}`}>
              <td>
                <input type="checkbox" data-testid={`compare-${t.job}`} aria-label={`compare trial ${t.trial}`} checked={view.compare.includes(t.job)} onChange={() => toggle(t.job)} />
              </td>
              <td>{t.trial}</td>
              <td><a href={`#/jobs/${t.job}`}>{t.job}</a></td>
              <td><span class={`state ${stateClass(t.state)}`} title={t.reason}>{t.state}</span></td>
              {exp.params.map((p) => <td key={p}>{fmt(t.params[p])}</td>)}
              <td>{fmt(t.last)}</td>
              <td>{fmt(t.best)}</td>
              <td>{fmt(t.step)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <section aria-labelledby="compare-h" class="metrics">
        <h2 id="compare-h">Compare</h2>
        <form class="toolbar" onSubmit={(e) => e.preventDefault()}>
          <label>
            Smoothing
            <input type="range" min="0" max="0.99" step="0.01" data-testid="smooth" value={view.smooth}
              onInput={(e) => setView({ ...view, smooth: Number((e.target as HTMLInputElement).value) })} />
            <span>{view.smooth.toFixed(2)}</span>
          </label>
          <label>
            <input type="checkbox" data-testid="log-scale" checked={view.log} onChange={() => setView({ ...view, log: !view.log })} />
            log scale
          </label>
          <a href={`#/experiments/${exp.id}?${formatView(view)}`} data-testid="view-link">link to this view</a>
        </form>
        {compared.length ? (
          <Compare exp={exp} trials={compared} view={view} />
        ) : (
          <p class="muted">Tick trials to compare their curves.</p>
        )}
      </section>
    </section>
  );
}
