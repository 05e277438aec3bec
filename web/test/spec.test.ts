import { describe, expect, it } from 'vitest';
import { emptyForm, formToSpec, parseScalar, specToForm, specToYaml, yamlToSpec, submitBody, YamlError } from '../src/lib/spec';
import { fieldMessage, formFieldKeys, parseApiError, placeError } from '../src/lib/errors';

const digits = `
name: pytorch-ddp-digits
framework: pytorch
command: [/usr/bin/python3, train.py, --epochs, "{params.epochs}"]
params: {epochs: 10, lr: 0.1}
env: {OMP_NUM_THREADS: "1"}
tasks:
  worker: {replicas: 2, gpus: 0, cpus: 1, memory: 2GiB}
restart: {max: 1}
timeout: 30m
`;

describe('spec', () => {
  it('types scalars', () => {
    expect(parseScalar('10')).toBe(10);
    expect(parseScalar('0.1')).toBe(0.1);
    expect(parseScalar('-1')).toBe(-1);
    expect(parseScalar('true')).toBe(true);
    expect(parseScalar('2GiB')).toBe('2GiB');
    expect(parseScalar('1e-3')).toBe(0.001);
    expect(parseScalar('abc')).toBe('abc');
  });
  it('builds a spec from the form', () => {
    const f = emptyForm();
    f.name = ' digits ';
    f.framework = 'pytorch';
    f.command = '/usr/bin/python3\ntrain.py\n--epochs\n{params.epochs}\n\n';
    f.params = [{ key: 'epochs', value: '3' }, { key: '', value: 'ignored' }, { key: 'opt', value: 'sgd' }];
    f.roles = [{ name: 'worker', replicas: '2', gpus: '0', cpus: '1', memory: '2GiB' }];
    f.data = [{ source: 'yard://digits@1', mount: 'digits' }, { source: '', mount: 'x' }];
    expect(formToSpec(f)).toEqual({
      name: 'digits',
      framework: 'pytorch',
      command: ['/usr/bin/python3', 'train.py', '--epochs', '{params.epochs}'],
      params: { epochs: 3, opt: 'sgd' },
      tasks: { worker: { replicas: 2, gpus: 0, cpus: 1, memory: '2GiB' } },
      data: [{ source: 'yard://digits@1', mount: 'digits' }],
    });
  });
  it('leaves the default framework and empty inputs out', () => {
    const f = emptyForm();
    f.command = 'sleep\n5';
    f.roles[0].memory = '';
    expect(formToSpec(f)).toEqual({ command: ['sleep', '5'], tasks: { worker: { replicas: 1, gpus: 0, cpus: 1 } } });
  });
  it('round-trips YAML through the form, keeping fields it has no inputs for', () => {
    const spec = yamlToSpec(digits);
    const f = specToForm(spec);
    expect(f.command.split('\n')).toEqual(['/usr/bin/python3', 'train.py', '--epochs', '{params.epochs}']);
    expect(f.params).toEqual([{ key: 'epochs', value: '10' }, { key: 'lr', value: '0.1' }]);
    expect(f.roles[0]).toEqual({ name: 'worker', replicas: '2', gpus: '0', cpus: '1', memory: '2GiB' });
    expect(formToSpec(f)).toEqual(spec);
    expect(yamlToSpec(specToYaml(spec))).toEqual(spec);
  });
  it('keeps role members the form has no inputs for', () => {
    const spec = { tasks: { worker: { replicas: 1, gpus: 0, cpus: 1, memory: 1073741824, pids: 4096, command: null } } };
    const f = specToForm(spec);
    expect(f.roles[0].memory).toBe('1073741824');
    expect(formToSpec(f)).toEqual(spec);
  });
  it('refuses bad YAML with the parser message', () => {
    expect(() => yamlToSpec('name: [a')).toThrow(YamlError);
    expect(() => yamlToSpec('- a\n- b')).toThrow(/mapping/);
    expect(() => yamlToSpec('')).toThrow(/empty/);
    expect(yamlToSpec('{"name": "x"}')).toEqual({ name: 'x' });
  });
  it('makes the submit body', () => {
    expect(submitBody({ name: 'x' })).toEqual({ spec: { name: 'x' } });
    expect(submitBody({ name: 'x' }, 'sha256:ab')).toEqual({ spec: { name: 'x' }, code: 'sha256:ab' });
  });
});

describe('API errors', () => {
  it('parses an error document', () => {
    const e = parseApiError(400, JSON.stringify({ error: { code: 'invalid_spec', message: 'tasks.worker.gpus: expected an integer >= 0, got "two"', field: 'tasks.worker.gpus' } }));
    expect(e).toEqual({ status: 400, code: 'invalid_spec', message: 'tasks.worker.gpus: expected an integer >= 0, got "two"', field: 'tasks.worker.gpus' });
    expect(fieldMessage(e)).toBe('expected an integer >= 0, got "two"');
  });
  it('parses a reply that is not JSON', () => {
    expect(parseApiError(502, 'Bad Gateway')).toEqual({ status: 502, code: 'http_502', message: 'Bad Gateway' });
    expect(parseApiError(500, '')).toEqual({ status: 500, code: 'http_500', message: 'HTTP 500' });
  });
  it('places field errors next to their input, unknown ones at the top', () => {
    const keys = formFieldKeys(['worker', 'ps'], ['epochs'], 2);
    expect(placeError('tasks.worker.gpus', keys)).toBe('tasks.worker.gpus');
    expect(placeError('tasks.ps', keys)).toBe('tasks.ps');
    expect(placeError('tasks.worker.foo', keys)).toBe('tasks.worker');
    expect(placeError('tasks.chief.gpus', keys)).toBe('tasks');
    expect(placeError('params.epochs', keys)).toBe('params.epochs');
    expect(placeError('data[1].source', keys)).toBe('data[1]');
    expect(placeError('name', keys)).toBe('name');
    expect(placeError('restart.max', keys)).toBeNull();
    expect(placeError('bogus', keys)).toBeNull();
    expect(placeError(undefined, keys)).toBeNull();
  });
});
