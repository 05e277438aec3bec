import { useEffect, useState } from 'preact/hooks';
import { ApiError, getJson, postJson, errorText } from '../api';
import { fieldMessage, formFieldKeys, placeError } from '../lib/errors';
import { FRAMEWORKS, emptyForm, emptyRole, formToSpec, specToForm, specToYaml, submitBody, yamlToSpec, type FormState } from '../lib/spec';
import { datasetName, fromFile, ignoredCode, type SourceFile } from '../lib/upload';
import { formatBytes } from '../lib/format';
import type { Dataset, Job } from '../lib/types';
import { uploadCode, uploadDataset, type Progress } from '../transfer';
import { loadResubmit } from '../lib/resubmit';
import { RESUBMIT_KEY } from './job';

type Errors = Record<string, string>;

function FieldError({ k, errs }: { k: string; errs: Errors }) {
  const m = errs[k];
  if (!m) return null;
  return (
    <span class="field-error" role="alert" id={`err-${k}`} data-testid={`error-${k}`}>
      {m}
    </span>
  );
}

const dirProps = { webkitdirectory: true, directory: '' } as unknown as Record<string, unknown>;

function filesOf(input: HTMLInputElement, skip?: (p: string) => boolean): SourceFile[] {
  const out: SourceFile[] = [];
  for (const f of Array.from(input.files ?? [])) {
    const s = fromFile(f);
    if (!skip || !skip(s.path)) out.push(s);
  }
  return out;
}

/** specFile: the spec in a code folder: job.yaml, else the first top-level .yaml. */
function specFile(files: SourceFile[]): SourceFile | undefined {
  return files.find((s) => s.path === 'job.yaml' || s.path === 'job.yml') ?? files.find((s) => /^[^/]*\.ya?ml$/.test(s.path));
}

function ProgressBar({ p }: { p: Progress }) {
  return (
    <div class="progress" data-testid="upload-progress">
      <label>
        {p.phase}: {formatBytes(p.done)} of {formatBytes(p.total)}
        <progress max={p.total || 1} value={p.done} />
      </label>
    </div>
  );
}

export function SubmitPage() {
  const [form, setForm] = useState<FormState>(emptyForm);
  const [tab, setTab] = useState<'form' | 'yaml'>('form');
  const [yaml, setYaml] = useState('');
  const [errs, setErrs] = useState<Errors>({});
  const [topErr, setTopErr] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [code, setCode] = useState<SourceFile[]>([]);
  const [keepCode, setKeepCode] = useState<{ digest: string; from: number } | null>(null);
  const [datasets, setDatasets] = useState<Dataset[]>([]);
  const [pick, setPick] = useState({ name: '', mount: '' });
  const [dsName, setDsName] = useState('');
  const [dsFiles, setDsFiles] = useState<SourceFile[]>([]);
  const [dsProgress, setDsProgress] = useState<Progress | null>(null);
  const [dsMsg, setDsMsg] = useState<string | null>(null);
  const [from, setFrom] = useState<number | null>(null);

  useEffect(() => {
    loadResubmit(window.location.hash, sessionStorage.getItem(RESUBMIT_KEY), (p) => getJson<Job>(p))
      .then((r) => {
        if (!r) return;
        setForm(specToForm(r.spec));
        setFrom(r.from);
        if (r.code) setKeepCode({ digest: r.code, from: r.from });
      })
      .catch((e) => setTopErr(errorText(e)));
    getJson<{ datasets: Dataset[] }>('/v1/datasets')
      .then((r) => setDatasets(r.datasets ?? []))
      .catch(() => {});
  }, []);

  const upd = (patch: Partial<FormState>) => setForm({ ...form, ...patch });
  const val = (e: Event) => (e.target as HTMLInputElement).value;

  const switchTab = (t: 'form' | 'yaml') => {
    if (t === tab) return;
    if (t === 'yaml') {
      setYaml(specToYaml(formToSpec(form)));
      setTab('yaml');
      setTopErr(null);
    } else {
      try {
        setForm(specToForm(yamlToSpec(yaml)));
        setTab('form');
        setTopErr(null);
      } catch (e) {
        setTopErr(`YAML: ${(e as Error).message}`);
      }
    }
  };

  const loadSpecFromCode = async () => {
    const f = specFile(code);
    if (!f) return;
    const text = new TextDecoder().decode(await f.slice(0, f.size));
    try {
      const spec = yamlToSpec(text);
      setForm(specToForm(spec));
      setYaml(specToYaml(spec));
      setTopErr(null);
    } catch (e) {
      setTopErr(`${f.path}: ${(e as Error).message}`);
    }
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    setErrs({});
    setTopErr(null);
    let spec;
    try {
      spec = tab === 'yaml' ? yamlToSpec(yaml) : formToSpec(form);
    } catch (err) {
      setTopErr(`YAML: ${(err as Error).message}`);
      return;
    }
    try {
      let digest: string | null = null;
      if (code.length) {
        setBusy(`uploading the code (${code.length} files)…`);
        digest = (await uploadCode(code)).digest;
      } else if (keepCode) digest = keepCode.digest;
      setBusy('submitting…');
      const job = await postJson<Job>('/v1/jobs', submitBody(spec, digest));
      sessionStorage.removeItem(RESUBMIT_KEY);
      window.location.hash = `#/jobs/${job.id}`;
    } catch (err) {
      if (err instanceof ApiError) {
        const keys = formFieldKeys(
          form.roles.map((r) => r.name.trim()),
          form.params.map((p) => p.key.trim()),
          form.data.length,
        );
        const k = tab === 'form' ? placeError(err.info.field, keys) : null;
        if (k) setErrs({ [k]: fieldMessage(err.info) });
        else setTopErr(`${err.info.code}: ${err.info.message}`);
      } else setTopErr(errorText(err));
    } finally {
      setBusy(null);
    }
  };

  const uploadDs = async () => {
    const name = dsName.trim();
    if (!name || !dsFiles.length) return;
    setDsMsg(null);
    try {
      const r = await uploadDataset(name, dsFiles, setDsProgress);
      setDsMsg(`${r.created ? 'Created' : 'Unchanged:'} ${r.name}@${r.version} (${r.files} files, ${formatBytes(r.size)})`);
      upd({ data: [...form.data, { source: `yard://${r.name}@${r.version}`, mount: r.name }] });
      getJson<{ datasets: Dataset[] }>('/v1/datasets')
        .then((x) => setDatasets(x.datasets ?? []))
        .catch(() => {});
    } catch (err) {
      setDsMsg(errorText(err));
    } finally {
      setDsProgress(null);
    }
  };

  const described = (k: string) => (errs[k] ? { 'aria-describedby': `err-${k}`, 'aria-invalid': true } : {});
  const hasYamlInCode = !!specFile(code);

  return (
    <section aria-labelledby="submit-h" class="submit">
      <h1 id="submit-h">Submit a job{from ? ` (from job ${from})` : ''}</h1>
      <div role="tablist" aria-label="Spec editor" class="tabs">
        <button type="button" role="tab" aria-selected={tab === 'form'} data-testid="tab-form" onClick={() => switchTab('form')}>
          Form
        </button>
        <button type="button" role="tab" aria-selected={tab === 'yaml'} data-testid="tab-yaml" onClick={() => switchTab('yaml')}>
          YAML
        </button>
      </div>
      {topErr && (
        <p class="error" role="alert" data-testid="submit-error">
          {topErr}
        </p>
      )}
      <form onSubmit={submit} noValidate>
        {tab === 'yaml' ? (
          <div class="field">
            <label for="submit-yaml">Spec (YAML or JSON)</label>
            <textarea id="submit-yaml" data-testid="submit-yaml" rows={22} spellcheck={false} value={yaml} onInput={(e) => setYaml(val(e))} />
          </div>
        ) : (
          <>
            <div class="row">
              <div class="field">
                <label for="submit-name">Name</label>
                <input id="submit-name" data-testid="submit-name" value={form.name} onInput={(e) => upd({ name: val(e) })} {...described('name')} />
                <FieldError k="name" errs={errs} />
              </div>
              <div class="field">
                <label for="submit-framework">Framework</label>
                <select id="submit-framework" data-testid="submit-framework" value={form.framework} onChange={(e) => upd({ framework: val(e) })} {...described('framework')}>
                  {FRAMEWORKS.map((f) => (
                    <option key={f} value={f}>
                      {f}
                    </option>
                  ))}
                </select>
                <FieldError k="framework" errs={errs} />
              </div>
              <div class="field grow">
                <label for="submit-image">Image (optional)</label>
                <input id="submit-image" data-testid="submit-image" value={form.image} placeholder="none: the process runtime" onInput={(e) => upd({ image: val(e) })} {...described('image')} />
                <FieldError k="image" errs={errs} />
              </div>
            </div>
            <div class="field">
              <label for="submit-command">Command (argv, one entry per line)</label>
              <textarea id="submit-command" data-testid="submit-command" rows={6} spellcheck={false} value={form.command} onInput={(e) => upd({ command: val(e) })} {...described('command')} />
              <FieldError k="command" errs={errs} />
            </div>

            <fieldset>
              <legend>Roles</legend>
              <FieldError k="tasks" errs={errs} />
              <table class="rows">
                <thead>
                  <tr>
                    <th scope="col">Role</th>
                    <th scope="col">Replicas</th>
                    <th scope="col">GPUs</th>
                    <th scope="col">CPUs</th>
                    <th scope="col">Memory</th>
                    <th scope="col">
                      <span class="sr-only">Remove</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {form.roles.map((r, i) => {
                    const set = (k: keyof typeof r) => (e: Event) => upd({ roles: form.roles.map((x, j) => (j === i ? { ...x, [k]: val(e) } : x)) });
                    const base = `tasks.${r.name.trim()}`;
                    return (
                      <tr key={i}>
                        {(['name', 'replicas', 'gpus', 'cpus', 'memory'] as const).map((k) => {
                          const ek = k === 'name' ? base : `${base}.${k}`;
                          return (
                            <td key={k}>
                              <input
                                aria-label={`${k === 'name' ? 'role' : k} of role ${i + 1}`}
                                data-testid={`role-${k}-${i}`}
                                value={r[k]}
                                size={k === 'name' ? 12 : 6}
                                onInput={set(k)}
                                {...described(ek)}
                              />
                              <FieldError k={ek} errs={errs} />
                            </td>
                          );
                        })}
                        <td>
                          <button type="button" data-testid={`role-remove-${i}`} aria-label={`remove role ${r.name || i + 1}`} onClick={() => upd({ roles: form.roles.filter((_, j) => j !== i) })}>
                            Remove
                          </button>
                        </td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
              <button type="button" data-testid="role-add" onClick={() => upd({ roles: [...form.roles, emptyRole(form.roles.length ? `role${form.roles.length + 1}` : 'worker')] })}>
                Add role
              </button>
            </fieldset>

            <fieldset>
              <legend>Parameters</legend>
              <FieldError k="params" errs={errs} />
              {form.params.map((p, i) => {
                const set = (k: 'key' | 'value') => (e: Event) => upd({ params: form.params.map((x, j) => (j === i ? { ...x, [k]: val(e) } : x)) });
                const ek = `params.${p.key.trim()}`;
                return (
                  <div class="param" key={i}>
                    <input aria-label={`parameter ${i + 1} name`} data-testid={`param-key-${i}`} value={p.key} onInput={set('key')} placeholder="name" />
                    <span aria-hidden="true">=</span>
                    <input aria-label={`parameter ${i + 1} value`} data-testid={`param-value-${i}`} value={p.value} onInput={set('value')} placeholder="value" {...described(ek)} />
                    <button type="button" data-testid={`param-remove-${i}`} aria-label={`remove parameter ${p.key || i + 1}`} onClick={() => upd({ params: form.params.filter((_, j) => j !== i) })}>
                      Remove
                    </button>
                    <FieldError k={ek} errs={errs} />
                  </div>
                );
              })}
              <button type="button" data-testid="param-add" onClick={() => upd({ params: [...form.params, { key: '', value: '' }] })}>
                Add parameter
              </button>
              <p class="hint">Use them in the command as <code>{'{params.NAME}'}</code>. Numbers and true/false are typed.</p>
            </fieldset>

            <fieldset>
              <legend>Data</legend>
              <FieldError k="data" errs={errs} />
              {form.data.map((d, i) => (
                <div class="param" key={i} data-testid={`data-row-${i}`}>
                  <input aria-label={`data ${i + 1} source`} value={d.source} size={30} onInput={(e) => upd({ data: form.data.map((x, j) => (j === i ? { ...x, source: val(e) } : x)) })} {...described(`data[${i}]`)} />
                  <span aria-hidden="true">→</span>
                  <input aria-label={`data ${i + 1} mount`} value={d.mount} size={14} onInput={(e) => upd({ data: form.data.map((x, j) => (j === i ? { ...x, mount: val(e) } : x)) })} />
                  <button type="button" aria-label={`remove data ${i + 1}`} onClick={() => upd({ data: form.data.filter((_, j) => j !== i) })}>
                    Remove
                  </button>
                  <FieldError k={`data[${i}]`} errs={errs} />
                </div>
              ))}
              <div class="row">
                <label>
                  Dataset
                  <select data-testid="data-pick" value={pick.name} onChange={(e) => setPick({ name: val(e), mount: pick.mount || val(e) })}>
                    <option value="">choose…</option>
                    {datasets.map((d) => (
                      <option key={d.name} value={d.name}>
                        {d.name} (v{d.latest}, {formatBytes(d.size)})
                      </option>
                    ))}
                  </select>
                </label>
                <label>
                  Mount
                  <input data-testid="data-mount" value={pick.mount} onInput={(e) => setPick({ ...pick, mount: val(e) })} size={14} />
                </label>
                <button
                  type="button"
                  data-testid="data-add"
                  disabled={!pick.name}
                  onClick={() => {
                    const d = datasets.find((x) => x.name === pick.name);
                    upd({ data: [...form.data, { source: `yard://${pick.name}${d ? `@${d.latest}` : ''}`, mount: pick.mount.trim() || pick.name }] });
                    setPick({ name: '', mount: '' });
                  }}
                >
                  Add dataset
                </button>
              </div>
              <details>
                <summary>Upload a new dataset</summary>
                <div class="row">
                  <label>
                    Name
                    <input data-testid="dataset-name" value={dsName} onInput={(e) => setDsName(val(e))} size={16} />
                  </label>
                  <label>
                    Folder
                    <input
                      type="file"
                      data-testid="dataset-folder"
                      multiple
                      {...dirProps}
                      onChange={(e) => {
                        const input = e.target as HTMLInputElement;
                        setDsFiles(filesOf(input));
                        const first = input.files?.[0] as (File & { webkitRelativePath?: string }) | undefined;
                        if (!dsName && first?.webkitRelativePath) setDsName(datasetName(first.webkitRelativePath.split('/')[0]));
                      }}
                    />
                  </label>
                  <label>
                    or files
                    <input type="file" data-testid="dataset-files" multiple onChange={(e) => setDsFiles(filesOf(e.target as HTMLInputElement))} />
                  </label>
                  <button type="button" data-testid="dataset-upload" disabled={!dsName.trim() || !dsFiles.length || !!dsProgress} onClick={uploadDs}>
                    Upload {dsFiles.length ? `${dsFiles.length} files (${formatBytes(dsFiles.reduce((s, f) => s + f.size, 0))})` : ''}
                  </button>
                </div>
                {dsProgress && <ProgressBar p={dsProgress} />}
                {dsMsg && (
                  <p role="status" data-testid="dataset-message">
                    {dsMsg}
                  </p>
                )}
              </details>
            </fieldset>
          </>
        )}

        <fieldset>
          <legend>Code</legend>
          <label for="code-upload">Upload a folder as the job's code (its working directory)</label>
          <input
            id="code-upload"
            type="file"
            data-testid="code-upload"
            multiple
            {...dirProps}
            onChange={(e) => setCode(filesOf(e.target as HTMLInputElement, ignoredCode))}
          />
          {code.length > 0 && (
            <p class="muted" data-testid="code-summary">
              {code.length} files, {formatBytes(code.reduce((s, f) => s + f.size, 0))}{' '}
              <button type="button" class="link" onClick={() => setCode([])}>
                clear
              </button>
              {hasYamlInCode && (
                <>
                  {' '}
                  <button type="button" data-testid="code-load-spec" onClick={loadSpecFromCode}>
                    Load the folder's spec ({specFile(code)!.path})
                  </button>
                </>
              )}
            </p>
          )}
          {!code.length && keepCode && (
            <label class="check">
              <input type="checkbox" checked onChange={() => setKeepCode(null)} data-testid="keep-code" />
              Reuse the code of job {keepCode.from}
            </label>
          )}
        </fieldset>

        <div class="actions">
          <button type="submit" class="primary" data-testid="submit-button" disabled={!!busy}>
            Submit
          </button>
          {busy && (
            <span role="status" class="muted">
              {busy}
            </span>
          )}
        </div>
      </form>
    </section>
  );
}
