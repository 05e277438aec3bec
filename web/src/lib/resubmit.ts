/**
 * What the submit page starts from when it is opened as `#/submit/from/ID`:
 * the old job's spec and code digest. The job page leaves them in
 * sessionStorage when its re-submit button is pressed; a link opened
 * directly (a new tab, a bookmark, a reload after the entry was used) has
 * none, so the job is loaded from the API instead.
 */
export interface ResubmitSource {
  spec: Record<string, unknown>;
  code: string | null;
  from: number;
}

/** GitCode: a spec's `code` when the job's code is in git (docs/git.md). */
export interface GitCode {
  git: string;
  ref: string;
  path: string | null;
  sha: string | null;
}

/** gitCode: spec's code from git, or null when its code was uploaded. */
export function gitCode(spec: Record<string, unknown> | undefined): GitCode | null {
  const c = spec?.code;
  if (!c || typeof c !== 'object' || typeof (c as GitCode).git !== 'string') return null;
  return c as GitCode;
}

/**
 * uploadedCode: the code digest a re-submission sends: none for a spec
 * whose code is in git (the master fetches its code.sha again; it refuses
 * a digest beside it), else the old job's.
 */
function uploadedCode(spec: Record<string, unknown>, code: unknown): string | null {
  return gitCode(spec) || typeof code !== 'string' ? null : code;
}

/** resubmitId: the job id of a `#/submit/from/ID` hash, else null. */
export function resubmitId(hash: string): number | null {
  const m = /^#\/submit\/from\/(\d+)$/.exec(hash);
  if (!m) return null;
  const id = Number(m[1]);
  return Number.isSafeInteger(id) && id > 0 ? id : null;
}

/** parseStored: the sessionStorage entry, if it is one for job id. */
export function parseStored(raw: string | null, id: number): ResubmitSource | null {
  if (!raw) return null;
  try {
    const r = JSON.parse(raw) as Partial<ResubmitSource>;
    if (r && r.from === id && r.spec && typeof r.spec === 'object') {
      return { spec: r.spec, code: uploadedCode(r.spec, r.code), from: id };
    }
  } catch {
    /* a broken entry: load the job instead */
  }
  return null;
}

/**
 * loadResubmit: the source for hash, from the stored entry when it is the
 * same job's, else from getJob (GET /v1/jobs/ID); null when the hash is not
 * a re-submit one. Throws when the job cannot be loaded or its spec is not
 * the caller's to see (a redacted document).
 */
export async function loadResubmit(
  hash: string,
  stored: string | null,
  getJob: (path: string) => Promise<{ spec?: unknown; code?: string | null; redacted?: boolean }>,
): Promise<ResubmitSource | null> {
  const id = resubmitId(hash);
  if (id === null) return null;
  const s = parseStored(stored, id);
  if (s) return s;
  const job = await getJob(`/v1/jobs/${id}`);
  if (job.redacted || !job.spec || typeof job.spec !== 'object') {
    throw new Error(`job ${id}: its spec is not yours to see, so it cannot be re-submitted`);
  }
  const spec = job.spec as Record<string, unknown>;
  return { spec, code: uploadedCode(spec, job.code), from: id };
}
