import { describe, expect, it } from 'vitest';
import { runOrigin, triggerText, type Template } from '../src/pages/templates';

const base: Template = {
  name: 't', user: 'u', team: null, on_dataset: null, on_git: null, created_at: 0, runs: [], spec: {},
};

describe('templates', () => {
  it('names what runs a template', () => {
    expect(triggerText({ ...base, on_dataset: 'digits' })).toBe('dataset digits');
    expect(triggerText({ ...base, on_git: { branches: ['main', 'release/*'], build_only: false } })).toBe(
      'git main, release/*',
    );
    expect(triggerText({ ...base, on_git: { branches: ['main'], build_only: true } })).toBe('git main (build only)');
  });
  it('names what made a run: a dataset version or a pushed commit', () => {
    expect(runOrigin({ ...base, on_dataset: 'digits' }, { version: 3, job: 7 })).toBe('digits@3');
    const sha = '0123456789abcdef0123456789abcdef01234567';
    expect(runOrigin({ ...base, on_git: { branches: ['main'], build_only: false } }, { commit: sha, ref: 'main' })).toBe(
      'main@0123456',
    );
  });
});
