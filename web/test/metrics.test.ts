import { describe, expect, it } from 'vitest';
import { linesFor, mergeSeries, metricNames, parseJobIds } from '../src/lib/metrics';
import { highlight, countMatches, taskNames } from '../src/lib/logs';
import type { Series } from '../src/lib/types';

const s = (task: string, name: string, pts: [number, number][], attempt = 0): Series => ({ task, attempt, name, points: pts.map(([a, b]) => [a, b, 0]) });

describe('metrics', () => {
  const a = [s('worker/0', 'loss', [[0, 2.3], [100, 0.35]]), s('worker/0', 'acc', [[100, 0.9]]), s('worker/1', 'loss', [[0, 2.2], [50, 1]])];
  const b = [s('worker/0', 'loss', [[0, 2.0], [100, 0.3], [100, 0.25]], 1)];
  it('names metrics', () => {
    expect(metricNames(a)).toEqual(['acc', 'loss']);
  });
  it('labels lines per task, job and attempt', () => {
    expect(linesFor(17, a, 'loss', false).map((l) => l.label)).toEqual(['worker/0', 'worker/1']);
    expect(linesFor(18, b, 'loss', true).map((l) => l.label)).toEqual(['#18 worker/0 (attempt 1)']);
  });
  it('merges series of several jobs on one step axis', () => {
    const lines = [...linesFor(17, a, 'loss', true), ...linesFor(18, b, 'loss', true)];
    expect(mergeSeries(lines)).toEqual([
      [0, 50, 100],
      [2.3, null, 0.35],
      [2.2, 1, null],
      [2.0, null, 0.25],
    ]);
    expect(mergeSeries([])).toEqual([[]]);
  });
  it('parses job ids to overlay', () => {
    expect(parseJobIds('12, 14 #15 12')).toEqual([12, 14, 15]);
    expect(parseJobIds('none')).toEqual([]);
  });
});

describe('logs', () => {
  it('highlights matches case-insensitively', () => {
    expect(highlight('Loss 1 loss 2', 'loss')).toEqual([
      { text: 'Loss', match: true },
      { text: ' 1 ', match: false },
      { text: 'loss', match: true },
      { text: ' 2', match: false },
    ]);
    expect(highlight('abc', '')).toEqual([{ text: 'abc', match: false }]);
    expect(countMatches('aaaa', 'aa')).toBe(2);
  });
  it('lists the latest attempt tasks', () => {
    const t = (role: string, index: number, attempt: number) => ({ role, index, attempt });
    expect(taskNames([t('worker', 0, 0), t('worker', 1, 0), t('worker', 0, 1), t('worker', 1, 1), t('ps', 0, 1)])).toEqual(['worker/0', 'worker/1', 'ps/0']);
    expect(taskNames([])).toEqual([]);
  });
});
