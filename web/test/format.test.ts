import { describe, expect, it } from 'vitest';
import { formatBytes, formatDuration, formatUtil, stateClass, isFinal } from '../src/lib/format';

describe('format', () => {
  it('formats bytes', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(85899345920)).toBe('80 GiB');
    expect(formatBytes(2 * 1024 ** 3)).toBe('2 GiB');
    expect(formatBytes(null)).toBe('–');
  });
  it('formats durations', () => {
    expect(formatDuration(4.2e6)).toBe('4.2s');
    expect(formatDuration(65e6)).toBe('1m 5s');
    expect(formatDuration(3723e6)).toBe('1h 2m 3s');
    expect(formatDuration(null)).toBe('–');
  });
  it('formats utilisation, absent as a dash', () => {
    expect(formatUtil(undefined)).toBe('–');
    expect(formatUtil(null)).toBe('–');
    expect(formatUtil(42)).toBe('42%');
    expect(formatUtil(0.5)).toBe('50%');
    expect(formatUtil(0)).toBe('0%');
  });
  it('colours states', () => {
    expect(stateClass('running')).toBe('st-running');
    expect(stateClass('lost')).toBe('st-failed');
    expect(stateClass('draining')).toBe('st-starting');
    expect(stateClass('weird')).toBe('st-other');
    expect(isFinal('cancelled')).toBe(true);
    expect(isFinal('queued')).toBe(false);
  });
});
