import { useState } from 'preact/hooks';
import { getJson } from '../api';
import { usePoll } from '../hooks';
import { formatBytes } from '../lib/format';
import { hours, keyLabel, usageLines, WINDOWS, type UsageBy, type UsageDoc } from '../lib/usage';
import { Chart } from './charts';

/** UsagePage: GPU- and CPU-hours and peak memory by user, team or pool, and GPU-hours over time. */
export function UsagePage() {
  const [by, setBy] = useState<UsageBy>('user');
  const [win, setWin] = useState(2);
  const w = WINDOWS[win];
  const { data, error } = usePoll(() => getJson<UsageDoc>(`/v1/usage?by=${by}&since=${w.since}&step=${w.step}`), 10000, [by, win]);
  return (
    <section aria-labelledby="usage-h">
      <h1 id="usage-h">Usage</h1>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          By{' '}
          <select data-testid="usage-by" value={by} onChange={(e) => setBy((e.target as HTMLSelectElement).value as UsageBy)}>
            <option value="user">user</option>
            <option value="team">team</option>
            <option value="pool">pool</option>
          </select>
        </label>{' '}
        <label>
          Window{' '}
          <select data-testid="usage-window" value={String(win)} onChange={(e) => setWin(Number((e.target as HTMLSelectElement).value))}>
            {WINDOWS.map((x, i) => (
              <option key={x.since} value={String(i)}>
                {x.label}
              </option>
            ))}
          </select>
        </label>
      </form>
      {error && <p class="error" role="alert">{error}</p>}
      {!data && !error && <p>Loading…</p>}
      {data && data.rows.length === 0 && <p data-testid="usage-empty">No task ran in this window.</p>}
      {data && data.rows.length > 0 && (
        <>
          <table class="list" data-testid="usage-table">
            <thead>
              <tr>
                <th scope="col">{data.by}</th>
                <th scope="col">Jobs</th>
                <th scope="col">Tasks</th>
                <th scope="col">GPU-hours</th>
                <th scope="col">CPU-hours</th>
                <th scope="col">Peak memory</th>
              </tr>
            </thead>
            <tbody>
              {data.rows.map((r) => (
                <tr key={r.key} data-testid={`usage-row-${r.key || 'none'}`}>
                  <td>{keyLabel(r.key)}</td>
                  <td>{r.jobs}</td>
                  <td>{r.tasks}</td>
                  <td data-testid={`usage-gpu-${r.key || 'none'}`}>{hours(r.gpu_seconds)}</td>
                  <td>{hours(r.cpu_seconds)}</td>
                  <td>{formatBytes(r.memory_peak)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <Chart name="GPU-hours" lines={usageLines(data)} time />
        </>
      )}
    </section>
  );
}
