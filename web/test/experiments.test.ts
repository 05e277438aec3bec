import { describe, expect, it } from 'vitest';
import { differingParams, formatView, logSafe, parseView, smoothPoints, sortTrials, trialLabel, viewLines, type Trial } from '../src/lib/experiments';

const t = (trial: number, params: Trial['params'], best: number | null): Trial => ({
  trial, job: 10 + trial, state: 'succeeded', params, last: best, best, step: best === null ? null : 5,
});
const trials = [t(0, { lr: 0.1, bs: 32 }, 0.9), t(1, { lr: 0.2, bs: 32 }, null), t(2, { lr: 0.05, bs: 32 }, 0.95)];

describe('experiments', () => {
  it('labels compared trials by the params that differ', () => {
    const d = differingParams(trials, ['lr', 'bs']);
    expect(d).toEqual(['lr']);
    expect(trials.map((x) => trialLabel(x, d))).toEqual(['lr=0.1', 'lr=0.2', 'lr=0.05']);
    expect(trialLabel(trials[0], differingParams([trials[0]], ['lr', 'bs']))).toBe('#10');
    expect(differingParams([t(0, { a: 1, b: 'x' }, 1), t(1, { a: 1, b: 'y' }, 1)], ['a', 'b'])).toEqual(['b']);
  });

  it('sorts by a param or a metric, missing values last both ways', () => {
    expect(sortTrials(trials, 'param:lr', false).map((x) => x.trial)).toEqual([2, 0, 1]);
    expect(sortTrials(trials, 'param:lr', true).map((x) => x.trial)).toEqual([1, 0, 2]);
    expect(sortTrials(trials, 'best', true).map((x) => x.trial)).toEqual([2, 0, 1]);
    expect(sortTrials(trials, 'best', false).map((x) => x.trial)).toEqual([0, 2, 1]);
    expect(sortTrials(trials, null, false)).toEqual(trials);
  });

  it('smooths with a debiased moving average', () => {
    expect(smoothPoints([[1, 1], [2, 3]], 0)).toEqual([[1, 1], [2, 3]]);
    const s = smoothPoints([[1, 2], [2, 4]], 0.5);
    expect(s[0][1]).toBeCloseTo(2); // the first point is itself, not pulled to 0
    expect(s[1][1]).toBeCloseTo((0.5 * 2 * 0.5 + 0.5 * 4) / 0.75);
  });

  it('keeps only positive values on a log scale', () => {
    expect(logSafe([[1, 0], [2, -1], [3, 0.5]])).toEqual([[3, 0.5]]);
    expect(viewLines([{ label: 'a', points: [[1, 0], [2, 2]] }], { compare: [], smooth: 0, log: true, sort: null, desc: false })).toEqual([{ label: 'a', points: [[2, 2]] }]);
  });

  it('writes the view into the URL and reads it back', () => {
    const v = { compare: [12, 14], smooth: 0.6, log: true, sort: 'param:lr', desc: true };
    expect(formatView(v)).toBe('compare=12,14&smooth=0.6&log=1&sort=-param%3Alr');
    expect(parseView(formatView(v))).toEqual(v);
    expect(parseView('')).toEqual({ compare: [], smooth: 0, log: false, sort: null, desc: false });
    expect(parseView('compare=3,x,-1,3&smooth=7').compare).toEqual([3]);
    expect(parseView('smooth=7').smooth).toBe(0.99);
  });
});
