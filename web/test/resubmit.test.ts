import { describe, expect, it } from 'vitest';
import { gitCode, loadResubmit, parseStored, resubmitId } from '../src/lib/resubmit';

const spec = { name: 'digits', command: ['python', 'train.py'], tasks: { worker: { gpus: 1 } } };

describe('re-submit page source', () => {
  it('reads the job id of the hash', () => {
    expect(resubmitId('#/submit/from/12')).toBe(12);
    expect(resubmitId('#/submit')).toBeNull();
    expect(resubmitId('#/submit/from/x')).toBeNull();
    expect(resubmitId('#/submit/from/0')).toBeNull();
  });
  it('uses the stored entry only for the same job', () => {
    const raw = JSON.stringify({ spec, code: 'sha256:aa', from: 12 });
    expect(parseStored(raw, 12)).toEqual({ spec, code: 'sha256:aa', from: 12 });
    expect(parseStored(raw, 13)).toBeNull();
    expect(parseStored('{not json', 12)).toBeNull();
    expect(parseStored(null, 12)).toBeNull();
  });
  it('loads the job from the API when opened directly', async () => {
    const asked: string[] = [];
    const r = await loadResubmit('#/submit/from/7', null, async (p) => {
      asked.push(p);
      return { spec, code: 'sha256:bb' };
    });
    expect(asked).toEqual(['/v1/jobs/7']);
    expect(r).toEqual({ spec, code: 'sha256:bb', from: 7 });
  });
  it('loads the job when the stored entry is another job\'s', async () => {
    const raw = JSON.stringify({ spec: { name: 'old' }, code: null, from: 3 });
    const r = await loadResubmit('#/submit/from/7', raw, async () => ({ spec, code: null }));
    expect(r).toEqual({ spec, code: null, from: 7 });
  });
  it('does not ask the API when the entry is the job\'s', async () => {
    const raw = JSON.stringify({ spec, code: 'sha256:cc', from: 7 });
    const r = await loadResubmit('#/submit/from/7', raw, async () => {
      throw new Error('should not be called');
    });
    expect(r).toEqual({ spec, code: 'sha256:cc', from: 7 });
  });
  it('refuses a redacted job and ignores other pages', async () => {
    await expect(loadResubmit('#/submit/from/7', null, async () => ({ redacted: true, spec: { name: 'x' } })))
      .rejects.toThrow('job 7: its spec is not yours to see');
    expect(await loadResubmit('#/jobs', null, async () => ({ spec }))).toBeNull();
  });
  it('sends no code digest again for a job whose code is in git', async () => {
    const code = { git: 'git://h/r.git', ref: 'main', path: null, sha: 'a'.repeat(40) };
    const gspec = { ...spec, code };
    expect(gitCode(gspec)).toEqual(code);
    expect(gitCode(spec)).toBeNull();
    expect(parseStored(JSON.stringify({ spec: gspec, code: 'sha256:aa', from: 4 }), 4)).toEqual({ spec: gspec, code: null, from: 4 });
    const r = await loadResubmit('#/submit/from/4', null, async () => ({ spec: gspec, code: 'sha256:aa' }));
    expect(r).toEqual({ spec: gspec, code: null, from: 4 });
  });
});
