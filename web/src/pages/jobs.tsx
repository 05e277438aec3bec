import { useState } from 'preact/hooks';
import { getJson } from '../api';
import { usePoll } from '../hooks';
import { formatDuration, formatTime, stateClass } from '../lib/format';
import { EMPTY_FILTER, distinct, filterJobs, sortJobs, toggleSort, type JobFilter, type Sort, type SortKey } from '../lib/jobs';
import type { Job } from '../lib/types';

const STATES = ['queued', 'starting', 'running', 'succeeded', 'failed', 'cancelled', 'stopped_early'];
const COLUMNS: [SortKey, string][] = [
  ['id', 'ID'],
  ['name', 'Name'],
  ['user', 'User'],
  ['team', 'Team'],
  ['state', 'State'],
  ['submitted_at', 'Submitted'],
  ['duration', 'Duration'],
];

export function JobsPage() {
  const { data, error } = usePoll(() => getJson<{ jobs: Job[] }>('/v1/jobs?limit=1000'), 2000, []);
  const [filter, setFilter] = useState<JobFilter>(EMPTY_FILTER);
  const [sort, setSort] = useState<Sort>({ key: 'id', dir: 'desc' });
  const all = data?.jobs ?? [];
  const jobs = sortJobs(filterJobs(all, filter), sort);
  const users = distinct(all, (j) => j.user);
  const teams = distinct(all, (j) => j.team);
  const set = (k: keyof JobFilter) => (e: Event) => setFilter({ ...filter, [k]: (e.target as HTMLInputElement).value });
  const now = Date.now() * 1000;
  return (
    <section aria-labelledby="jobs-h">
      <h1 id="jobs-h">Jobs</h1>
      <form class="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <label>
          State
          <select data-testid="filter-state" value={filter.state} onChange={set('state')}>
            <option value="">any</option>
            {STATES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          User
          <input data-testid="filter-user" list="users" value={filter.user} onInput={set('user')} />
          <datalist id="users">{users.map((u) => <option key={u} value={u} />)}</datalist>
        </label>
        <label>
          Team
          <input data-testid="filter-team" list="teams" value={filter.team} onInput={set('team')} />
          <datalist id="teams">{teams.map((u) => <option key={u} value={u} />)}</datalist>
        </label>
        <label>
          Name
          <input data-testid="filter-name" type="search" value={filter.name} onInput={set('name')} />
        </label>
        <span class="muted">
          {jobs.length} of {all.length}
        </span>
      </form>
      {error && <p class="error" role="alert">{error}</p>}
      {!data && !error && <p>Loading…</p>}
      <table class="list jobs">
        <thead>
          <tr>
            {COLUMNS.map(([k, label]) => (
              <th key={k} scope="col" aria-sort={sort.key === k ? (sort.dir === 'asc' ? 'ascending' : 'descending') : undefined}>
                <button type="button" class="sort" data-testid={`sort-${k}`} onClick={() => setSort(toggleSort(sort, k))}>
                  {label}
                  {sort.key === k ? (sort.dir === 'asc' ? ' ▲' : ' ▼') : ''}
                </button>
              </th>
            ))}
            <th scope="col">Reason</th>
          </tr>
        </thead>
        <tbody>
          {jobs.map((j) => (
            <tr key={j.id} data-testid={`job-row-${j.id}`}>
              <td>
                <a href={`#/jobs/${j.id}`}>{j.id}</a>
              </td>
              <td>
                <a href={`#/jobs/${j.id}`}>{j.name}</a>
              </td>
              <td>{j.user}</td>
              <td>{j.team ?? '–'}</td>
              <td>
                <span class={`state ${stateClass(j.state)}`} data-testid="job-state">
                  {j.state}
                </span>
              </td>
              <td>{formatTime(j.submitted_at)}</td>
              <td>{j.started_at ? formatDuration((j.finished_at ?? now) - j.started_at) : '–'}</td>
              <td class="reason">{j.reason ? j.reason.message : ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
