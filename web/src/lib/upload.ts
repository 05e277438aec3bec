// Dataset chunking and manifests (docs/datasets.md) and job code archives (tar.gz).

export const CHUNK_SIZE = 8 * 1024 * 1024; // 8 MiB

/** A file to upload: its path in the dataset or archive and a way to read its bytes. */
export interface SourceFile {
  path: string;
  size: number;
  slice(start: number, end: number): Promise<Uint8Array>;
}

export interface ManifestFile {
  path: string;
  size: number;
  mode: number;
  chunks: string[];
}

export interface Manifest {
  files: ManifestFile[];
}

/** chunkRanges: the [start, end) byte ranges of a file's chunks (none for an empty file). */
export function chunkRanges(size: number, chunk = CHUNK_SIZE): [number, number][] {
  const out: [number, number][] = [];
  for (let s = 0; s < size; s += chunk) out.push([s, Math.min(size, s + chunk)]);
  return out;
}

/** sha256Digest: "sha256:HEX" of bytes (WebCrypto). */
export async function sha256Digest(bytes: Uint8Array): Promise<string> {
  const h = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes as BufferSource));
  let hex = '';
  for (const b of h) hex += b.toString(16).padStart(2, '0');
  return `sha256:${hex}`;
}

const enc = new TextEncoder();

/** compareBytes: order of two paths by their UTF-8 bytes (the manifest's order). */
export function compareBytes(a: string, b: string): number {
  const x = enc.encode(a);
  const y = enc.encode(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

/**
 * relativePath: a browser File's path inside the picked folder: webkitRelativePath less its
 * first component (the folder itself), or the file's name when no folder was picked.
 */
export function relativePath(webkitRelativePath: string, name: string): string {
  if (!webkitRelativePath) return name;
  const i = webkitRelativePath.indexOf('/');
  return i >= 0 ? webkitRelativePath.slice(i + 1) : webkitRelativePath;
}

/** checkPath: null when a path is a valid manifest path, else why not. */
export function checkPath(p: string): string | null {
  if (!p) return 'empty path';
  if (p.startsWith('/')) return `'${p}' is absolute`;
  if (enc.encode(p).length > 4096) return `'${p.slice(0, 40)}...' is over 4096 bytes`;
  for (const c of p.split('/')) if (c === '' || c === '.' || c === '..') return `'${p}' has an empty, '.' or '..' component`;
  return null;
}

export interface ChunkRef {
  digest: string;
  file: number; // index into the files
  start: number;
  end: number;
}

/**
 * hashFiles: the manifest of files (sorted by path, mode 420) and every chunk's digest and
 * place; progress(bytesHashed) after each chunk.
 */
export async function hashFiles(
  files: SourceFile[],
  progress?: (bytes: number) => void,
): Promise<{ manifest: Manifest; chunks: ChunkRef[]; sorted: SourceFile[] }> {
  const sorted = [...files].sort((a, b) => compareBytes(a.path, b.path));
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i].path === sorted[i - 1].path) throw new Error(`'${sorted[i].path}' appears twice`);
  }
  for (const f of sorted) {
    const why = checkPath(f.path);
    if (why) throw new Error(why);
  }
  const manifest: Manifest = { files: [] };
  const chunks: ChunkRef[] = [];
  let done = 0;
  for (let fi = 0; fi < sorted.length; fi++) {
    const f = sorted[fi];
    const digests: string[] = [];
    for (const [s, e] of chunkRanges(f.size)) {
      const d = await sha256Digest(await f.slice(s, e));
      digests.push(d);
      chunks.push({ digest: d, file: fi, start: s, end: e });
      done += e - s;
      progress?.(done);
    }
    manifest.files.push({ path: f.path, size: f.size, mode: 420, chunks: digests });
  }
  return { manifest, chunks, sorted };
}

/** uniqueChunks: the chunks with distinct digests, first occurrence kept. */
export function uniqueChunks(chunks: ChunkRef[]): ChunkRef[] {
  const seen = new Set<string>();
  return chunks.filter((c) => (seen.has(c.digest) ? false : (seen.add(c.digest), true)));
}

/** datasetName: a valid dataset name ([a-z0-9][a-z0-9_.-]{0,62}) from a folder name. */
export function datasetName(s: string): string {
  let n = s.toLowerCase().replace(/[^a-z0-9_.-]+/g, '-').replace(/^[^a-z0-9]+/, '');
  n = n.slice(0, 63);
  return n || 'dataset';
}

// ---- tar (ustar) ----

function putString(h: Uint8Array, off: number, len: number, s: string) {
  const b = enc.encode(s);
  if (b.length > len) throw new Error(`tar: '${s}' does not fit ${len} bytes`);
  h.set(b, off);
}

function putOctal(h: Uint8Array, off: number, len: number, n: number) {
  putString(h, off, len, n.toString(8).padStart(len - 1, '0') + '\0');
}

/** splitName: a path as ustar's (prefix, name): name <= 100 bytes, prefix <= 155. */
export function splitName(path: string): [string, string] {
  if (enc.encode(path).length <= 100) return ['', path];
  for (let i = path.indexOf('/'); i >= 0; i = path.indexOf('/', i + 1)) {
    const prefix = path.slice(0, i);
    const name = path.slice(i + 1);
    if (enc.encode(prefix).length <= 155 && enc.encode(name).length <= 100 && name) return [prefix, name];
  }
  throw new Error(`tar: the path '${path}' is too long`);
}

/** tarHeader: a 512-byte ustar header for a regular file (typeflag '0') or a directory ('5'). */
export function tarHeader(path: string, size: number, mode: number, type: '0' | '5'): Uint8Array {
  const h = new Uint8Array(512);
  const [prefix, name] = splitName(path);
  putString(h, 0, 100, name);
  putOctal(h, 100, 8, mode);
  putOctal(h, 108, 8, 0); // uid
  putOctal(h, 116, 8, 0); // gid
  putOctal(h, 124, 12, size);
  putOctal(h, 136, 12, 0); // mtime: 0, so the same tree gives the same archive
  h.fill(0x20, 148, 156); // checksum computed over spaces
  h[156] = type.charCodeAt(0);
  putString(h, 257, 6, 'ustar\0');
  putString(h, 263, 2, '00');
  putString(h, 265, 32, 'root');
  putString(h, 297, 32, 'root');
  putString(h, 345, 155, prefix);
  let sum = 0;
  for (const b of h) sum += b;
  putString(h, 148, 8, sum.toString(8).padStart(6, '0') + '\0 ');
  return h;
}

/** buildTar: an uncompressed ustar archive of the files (sorted, with their directories). */
export async function buildTar(files: SourceFile[]): Promise<Uint8Array> {
  const sorted = [...files].sort((a, b) => compareBytes(a.path, b.path));
  const parts: Uint8Array[] = [];
  const dirs = new Set<string>();
  for (const f of sorted) {
    const why = checkPath(f.path);
    if (why) throw new Error(why);
    const comps = f.path.split('/');
    for (let i = 1; i < comps.length; i++) {
      const d = comps.slice(0, i).join('/') + '/';
      if (!dirs.has(d)) {
        dirs.add(d);
        parts.push(tarHeader(d, 0, 0o755, '5'));
      }
    }
    parts.push(tarHeader(f.path, f.size, 0o644, '0'));
    const body = await f.slice(0, f.size);
    if (body.length !== f.size) throw new Error(`'${f.path}' changed while it was read`);
    parts.push(body);
    const pad = (512 - (f.size % 512)) % 512;
    if (pad) parts.push(new Uint8Array(pad));
  }
  parts.push(new Uint8Array(1024)); // two zero blocks end the archive
  let total = 0;
  for (const p of parts) total += p.length;
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** gzip: bytes compressed with the platform's CompressionStream. */
export async function gzip(bytes: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([bytes as BlobPart]).stream().pipeThrough(new CompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** buildTarGz: the job's code archive. */
export async function buildTarGz(files: SourceFile[]): Promise<Uint8Array> {
  return gzip(await buildTar(files));
}

/** fromFile: a browser File as a SourceFile. */
export function fromFile(f: File, path?: string): SourceFile {
  return {
    path: path ?? relativePath((f as File & { webkitRelativePath?: string }).webkitRelativePath ?? '', f.name),
    size: f.size,
    slice: async (s, e) => new Uint8Array(await f.slice(s, e).arrayBuffer()),
  };
}

/** fromBytes: in-memory bytes as a SourceFile (tests). */
export function fromBytes(path: string, bytes: Uint8Array): SourceFile {
  return { path, size: bytes.length, slice: async (s, e) => bytes.subarray(s, e) };
}

/** ignoredCode: files a code upload leaves out (VCS dirs, caches). */
export function ignoredCode(path: string): boolean {
  return path.split('/').some((c) => c === '.git' || c === '__pycache__' || c === 'node_modules' || c === '.DS_Store');
}
