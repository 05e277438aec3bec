import { describe, expect, it } from 'vitest';
import { EMPTY_FILTER, filterJobs, sortJobs, toggleSort, distinct } from '../src/lib/jobs';
import { poolTotals, timeline } from '../src/lib/cluster';
import type { Job, Node } from '../src/lib/types';

const job = (id: number, o: Partial<Job>): Job => ({
  id, name: `j${id}`, user: 'alice', team: null, state: 'running', reason: null, exit_code: null, attempt: 0,
  submitted_at: id * 1000, started_at: null, running_at: null, finished_at: null, ...o,
});

const jobs = [
  job(1, { name: 'digits', user: 'alice', team: 'vision', state: 'succeeded', started_at: 100, finished_at: 500 }),
  job(2, { name: 'bert', user: 'bob', team: 'nlp', state: 'running', started_at: 100 }),
  job(3, { name: 'Digits-2', user: 'bob', state: 'queued' }),
];

describe('job list', () => {
  it('filters by state, user, team and name', () => {
    expect(filterJobs(jobs, { ...EMPTY_FILTER, state: 'running' }).map((j) => j.id)).toEqual([2]);
    expect(filterJobs(jobs, { ...EMPTY_FILTER, user: 'bob' }).map((j) => j.id)).toEqual([2, 3]);
    expect(filterJobs(jobs, { ...EMPTY_FILTER, team: 'vision' }).map((j) => j.id)).toEqual([1]);
    expect(filterJobs(jobs, { ...EMPTY_FILTER, name: 'digits' }).map((j) => j.id)).toEqual([1, 3]);
    expect(filterJobs(jobs, EMPTY_FILTER)).toHaveLength(3);
  });
  it('sorts by columns', () => {
    expect(sortJobs(jobs, { key: 'id', dir: 'desc' }).map((j) => j.id)).toEqual([3, 2, 1]);
    expect(sortJobs(jobs, { key: 'name', dir: 'asc' }).map((j) => j.id)).toEqual([2, 1, 3]);
    expect(sortJobs(jobs, { key: 'state', dir: 'asc' }).map((j) => j.id)).toEqual([3, 2, 1]);
    expect(sortJobs(jobs, { key: 'duration', dir: 'desc' }, 1000).map((j) => j.id)).toEqual([2, 1, 3]);
  });
  it('toggles the sort', () => {
    expect(toggleSort({ key: 'id', dir: 'desc' }, 'id')).toEqual({ key: 'id', dir: 'asc' });
    expect(toggleSort({ key: 'id', dir: 'desc' }, 'name')).toEqual({ key: 'name', dir: 'asc' });
  });
  it('lists distinct users and teams', () => {
    expect(distinct(jobs, (j) => j.user)).toEqual(['alice', 'bob']);
    expect(distinct(jobs, (j) => j.team)).toEqual(['nlp', 'vision']);
  });
  it('builds the timeline', () => {
    const t = timeline(jobs[0]);
    expect(t.map((s) => s.label)).toEqual(['submitted', 'started', 'running', 'succeeded']);
    expect(t[3].at).toBe(500);
  });
  it('builds the timeline from the history, restarts and preemptions named', () => {
    const t = timeline({
      ...jobs[0],
      events: [
        { at: 1, state: 'queued', attempt: 0 },
        { at: 1.5, state: 'starting', phase: 'building', attempt: 0,
          reason: { code: 'building', message: 'worker/0: building image yard/build:ab' } },
        { at: 2, state: 'running', attempt: 0 },
        { at: 3, state: 'queued', attempt: 1, reason: { code: 'preempted', message: 'preempted by job 9' } },
        { at: 4, state: 'succeeded', attempt: 1 },
      ],
    });
    expect(t.map((s) => s.label)).toEqual(['queued', 'starting: building', 'running',
      'queued again (attempt 2)', 'succeeded']);
    expect(t[1].detail).toBe('building: worker/0: building image yard/build:ab');
    expect(t[3].detail).toBe('preempted: preempted by job 9');
    expect(t[4].at).toBe(4);
  });
});

describe('cluster totals', () => {
  it('counts used and free GPUs per pool', () => {
    const g = (index: number, j: number | null) => ({ index, model: 'A100', memory: 1, job: j });
    const nodes: Node[] = [
      { name: 'a', state: 'ready', cpus: 1, memory: 1, pool: 'default', gpus: [g(0, 7), g(1, null)] },
      { name: 'b', state: 'draining', cpus: 1, memory: 1, gpus: [g(0, null)] },
      { name: 'c', state: 'lost', cpus: 1, memory: 1, pool: 'big', gpus: [g(0, null)] },
      { name: 'd', state: 'ready', drained: true, drain: { reason: 'disk swap', by: 'admin', at: 1 },
        cpus: 1, memory: 1, gpus: [g(0, null)] },
    ];
    expect(poolTotals(nodes)).toEqual([
      { pool: 'big', nodes: 1, gpus: 0, used: 0, free: 0 },
      { pool: 'default', nodes: 3, gpus: 4, used: 1, free: 1 },
    ]);
  });
});
