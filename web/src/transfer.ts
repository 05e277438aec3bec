// Uploads to the master: a dataset (chunks, missing check, PUTs, manifest) and a job's code.
import { postJson, request } from './api';
import { buildTarGz, hashFiles, uniqueChunks, type SourceFile } from './lib/upload';

export interface Progress {
  phase: string;
  done: number;
  total: number;
}

export interface DatasetReply {
  name: string;
  version: number;
  digest: string;
  size: number;
  files: number;
  created: boolean;
}

/** uploadDataset: chunk and hash every file, upload the chunks the master lacks, make the version. */
export async function uploadDataset(name: string, files: SourceFile[], progress: (p: Progress) => void): Promise<DatasetReply> {
  const bytes = files.reduce((s, f) => s + f.size, 0);
  progress({ phase: 'hashing', done: 0, total: bytes });
  const { manifest, chunks, sorted } = await hashFiles(files, (d) => progress({ phase: 'hashing', done: d, total: bytes }));
  const unique = uniqueChunks(chunks);
  const missing = new Set<string>();
  for (let i = 0; i < unique.length; i += 1000) {
    const r = await postJson<{ missing: string[] }>('/v1/blobs/missing', { digests: unique.slice(i, i + 1000).map((c) => c.digest) });
    for (const d of r.missing ?? []) missing.add(d);
  }
  const todo = unique.filter((c) => missing.has(c.digest));
  const upBytes = todo.reduce((s, c) => s + (c.end - c.start), 0);
  let done = 0;
  progress({ phase: 'uploading', done, total: upBytes });
  for (const c of todo) {
    const body = await sorted[c.file].slice(c.start, c.end);
    await request('PUT', `/v1/blobs/${c.digest}`, body as BodyInit, 'application/octet-stream');
    done += c.end - c.start;
    progress({ phase: 'uploading', done, total: upBytes });
  }
  progress({ phase: 'creating the version', done: 1, total: 1 });
  return postJson<DatasetReply>('/v1/datasets', { name, manifest });
}

/** uploadCode: pack files as a tar.gz and POST /v1/code; its digest. */
export async function uploadCode(files: SourceFile[]): Promise<{ digest: string; size: number }> {
  const tgz = await buildTarGz(files);
  if (tgz.length > 256 * 1024 * 1024) throw new Error('the code archive is over 256 MiB');
  const res = await request('POST', '/v1/code', tgz as BodyInit, 'application/gzip');
  return res.json();
}
