/**
 * A file of a manifest (docs/datasets.md) put back together in the browser
 * from the master's chunk store: each chunk fetched (GET /v1/blobs/DIGEST),
 * checked against its digest and its file's size.
 */
import { sha256Digest, type ManifestFile } from './upload';

export type { Manifest, ManifestFile } from './upload';

/** assembleFile: f's bytes, from getChunk(digest) for each chunk in order; throws naming
 * the chunk whose bytes hash to another digest, or the file when the sizes differ. */
export async function assembleFile(f: ManifestFile, getChunk: (digest: string) => Promise<Uint8Array>): Promise<Blob> {
  const parts: Uint8Array[] = [];
  let got = 0;
  for (const d of f.chunks) {
    const bytes = await getChunk(d);
    const actual = await sha256Digest(bytes);
    if (actual !== d) throw new Error(`checksum mismatch: chunk ${d} of ${f.path} arrived as ${actual}`);
    parts.push(bytes);
    got += bytes.length;
  }
  if (got !== f.size) throw new Error(`${f.path} has ${got} bytes, its manifest says ${f.size}`);
  return new Blob(parts as BlobPart[]);
}

/** baseName: the last component of a manifest path, for the saved file's name. */
export function baseName(path: string): string {
  const i = path.lastIndexOf('/');
  return i < 0 ? path : path.slice(i + 1);
}
