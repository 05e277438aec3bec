import { describe, expect, it } from 'vitest';
import { hours, keyLabel, pointsLine, usageLines, type UsageDoc } from '../src/lib/usage';

const doc: UsageDoc = {
  by: 'team',
  since: 0,
  until: 7_200_000_000,
  step: 3600,
  rows: [
    { key: 'vision', jobs: 2, tasks: 3, gpu_seconds: 10800, cpu_seconds: 60, memory_peak: 1 << 30 },
    { key: '', jobs: 1, tasks: 1, gpu_seconds: 1800, cpu_seconds: 0, memory_peak: null },
  ],
  buckets: [
    { start: 0, gpu_seconds: { vision: 7200 } },
    { start: 3_600_000_000, gpu_seconds: { vision: 3600, '': 1800 } },
  ],
};

describe('usage', () => {
  it('makes a line per group in the rows order, GPU-hours per step, 0 where idle', () => {
    expect(usageLines(doc)).toEqual([
      { label: 'vision', points: [[0, 2], [3600, 1]] },
      { label: '(none)', points: [[0, 0], [3600, 0.5]] },
    ]);
  });
  it('has no points without buckets', () => {
    expect(usageLines({ ...doc, buckets: undefined }).map((l) => l.points)).toEqual([[], []]);
  });
  it('formats hours and the no-team key', () => {
    expect(hours(5400)).toBe('1.500');
    expect(keyLabel('')).toBe('(none)');
    expect(keyLabel('nlp')).toBe('nlp');
  });
  it('makes a line of [time, value] points', () => {
    expect(pointsLine('util', [[10, 90], [15, 0]])).toEqual({ label: 'util', points: [[10, 90], [15, 0]] });
    expect(pointsLine('util', undefined).points).toEqual([]);
  });
});
