import { describe, expect, it } from 'vitest';
import { attemptChoices, latestAttempt, logsPath, taskNames } from '../src/lib/logs';

// a gang of two that failed once (worker/1 crashed, worker/0 was stopped with it) and restarted
const t = (index: number, attempt: number, state: string, reason: { code: string; message: string } | null = null) => ({
  role: 'worker', index, attempt, state, reason,
});
const tasks = [
  t(0, 0, 'killed', { code: 'stopped', message: 'the gang stopped' }),
  t(1, 0, 'failed', { code: 'task_failed', message: 'worker/1 exited with status 3' }),
  t(0, 1, 'running'),
  t(1, 1, 'running'),
];

describe('the attempt picker of the job page', () => {
  it('lists every attempt, the latest first, each earlier one with why it ended', () => {
    expect(attemptChoices(tasks)).toEqual([
      { attempt: 1, label: 'attempt 1 (latest)', latest: true },
      { attempt: 0, label: 'attempt 0 (ended: task_failed: worker/1 exited with status 3)', latest: false },
    ]);
  });
  it('has one choice for a job that never restarted, none for one without tasks', () => {
    expect(attemptChoices([t(0, 0, 'running')]).map((c) => c.attempt)).toEqual([0]);
    expect(attemptChoices([])).toEqual([]);
    expect(latestAttempt([])).toBe(-1);
  });
  it('names the tasks of the chosen attempt', () => {
    expect(taskNames(tasks, 0)).toEqual(['worker/0', 'worker/1']);
    expect(taskNames(tasks.slice(0, 3), 1)).toEqual(['worker/0']);
    expect(taskNames(tasks.slice(0, 3))).toEqual(['worker/0']);
    expect(taskNames(tasks, 5)).toEqual([]);
  });
  it("asks for the chosen attempt's log, the latest when none is chosen", () => {
    expect(logsPath(7, 'worker/1', 'stdout', 10, 256, 0)).toBe('/v1/jobs/7/logs?task=worker%2F1&attempt=0&stream=stdout&offset=10&limit=256');
    expect(logsPath(7, 'worker/1', 'stderr', 0, 256, null)).toBe('/v1/jobs/7/logs?task=worker%2F1&stream=stderr&offset=0&limit=256');
  });
});
