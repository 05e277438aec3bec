import { describe, expect, it } from 'vitest';
import { gunzipSync } from 'node:zlib';
import { createHash } from 'node:crypto';
import {
  CHUNK_SIZE, buildTar, buildTarGz, checkPath, chunkRanges, compareBytes, datasetName, fromBytes, hashFiles,
  relativePath, sha256Digest, splitName, tarHeader, uniqueChunks, ignoredCode,
} from '../src/lib/upload';

const sha = (b: Uint8Array) => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const text = (s: string) => new TextEncoder().encode(s);

describe('dataset chunks and manifest', () => {
  it('splits files into 8 MiB chunks', () => {
    expect(CHUNK_SIZE).toBe(8388608);
    expect(chunkRanges(0)).toEqual([]);
    expect(chunkRanges(5)).toEqual([[0, 5]]);
    expect(chunkRanges(CHUNK_SIZE)).toEqual([[0, CHUNK_SIZE]]);
    expect(chunkRanges(CHUNK_SIZE * 2 + 1)).toEqual([[0, CHUNK_SIZE], [CHUNK_SIZE, CHUNK_SIZE * 2], [CHUNK_SIZE * 2, CHUNK_SIZE * 2 + 1]]);
  });
  it('hashes with WebCrypto', async () => {
    expect(await sha256Digest(text('abc'))).toBe('sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
  it('orders paths by bytes and strips the folder name', () => {
    expect(['b', 'a/b', 'B', 'a.txt', 'a/a'].sort(compareBytes)).toEqual(['B', 'a.txt', 'a/a', 'a/b', 'b']);
    expect(compareBytes('\uffff', '\u{1F600}')).toBeLessThan(0);
    expect(relativePath('digits/train/x.csv', 'x.csv')).toBe('train/x.csv');
    expect(relativePath('', 'x.csv')).toBe('x.csv');
    expect(datasetName('My Digits!')).toBe('my-digits-');
    expect(datasetName('__')).toBe('dataset');
  });
  it('checks paths', () => {
    expect(checkPath('a/b')).toBeNull();
    expect(checkPath('/a')).toMatch(/absolute/);
    expect(checkPath('a/../b')).toMatch(/'\.\.'/);
    expect(checkPath('a//b')).toMatch(/empty/);
  });
  it('builds the manifest as docs/datasets.md defines it', async () => {
    const big = new Uint8Array(CHUNK_SIZE + 10).fill(7);
    const files = [fromBytes('z.txt', text('hello')), fromBytes('empty', new Uint8Array()), fromBytes('dir/big.bin', big), fromBytes('dup.txt', text('hello'))];
    const seen: number[] = [];
    const { manifest, chunks } = await hashFiles(files, (b) => seen.push(b));
    expect(manifest).toEqual({
      files: [
        { path: 'dir/big.bin', size: CHUNK_SIZE + 10, mode: 420, chunks: [sha(big.subarray(0, CHUNK_SIZE)), sha(big.subarray(CHUNK_SIZE))] },
        { path: 'dup.txt', size: 5, mode: 420, chunks: [sha(text('hello'))] },
        { path: 'empty', size: 0, mode: 420, chunks: [] },
        { path: 'z.txt', size: 5, mode: 420, chunks: [sha(text('hello'))] },
      ],
    });
    expect(chunks).toHaveLength(4);
    expect(uniqueChunks(chunks)).toHaveLength(3);
    expect(seen[seen.length - 1]).toBe(CHUNK_SIZE + 20);
  });
  it('refuses duplicate and bad paths', async () => {
    await expect(hashFiles([fromBytes('a', text('1')), fromBytes('a', text('2'))])).rejects.toThrow(/twice/);
    await expect(hashFiles([fromBytes('../a', text('1'))])).rejects.toThrow();
  });
});

function readTar(tar: Uint8Array) {
  const out: { name: string; type: string; size: number; body: string; mode: number }[] = [];
  const dec = new TextDecoder();
  const str = (b: Uint8Array) => dec.decode(b.subarray(0, b.indexOf(0) < 0 ? b.length : b.indexOf(0)));
  let off = 0;
  while (off + 512 <= tar.length) {
    const h = tar.subarray(off, off + 512);
    if (h.every((x) => x === 0)) break;
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
    expect(parseInt(str(h.subarray(148, 156)), 8)).toBe(sum);
    expect(str(h.subarray(257, 263))).toBe('ustar');
    const prefix = str(h.subarray(345, 500));
    const name = (prefix ? prefix + '/' : '') + str(h.subarray(0, 100));
    const size = parseInt(str(h.subarray(124, 136)), 8);
    const mode = parseInt(str(h.subarray(100, 108)), 8);
    const type = String.fromCharCode(h[156]);
    out.push({ name, type, size, mode, body: dec.decode(tar.subarray(off + 512, off + 512 + size)) });
    off += 512 + Math.ceil(size / 512) * 512;
  }
  return out;
}

describe('code archive', () => {
  it('writes ustar headers with long names split', () => {
    const long = 'd'.repeat(80) + '/' + 'f'.repeat(90);
    expect(splitName('a/b')).toEqual(['', 'a/b']);
    expect(splitName(long)).toEqual(['d'.repeat(80), 'f'.repeat(90)]);
    expect(() => splitName('x'.repeat(300))).toThrow(/too long/);
    expect(tarHeader('a', 1, 0o644, '0')).toHaveLength(512);
  });
  it('packs sorted files with their directories and gzips them', async () => {
    const long = 'd'.repeat(80) + '/' + 'f'.repeat(90);
    const files = [fromBytes('train.py', text('print(1)\n')), fromBytes('lib/util.py', text('x = 1\n')), fromBytes(long, text('L'))];
    const tar = await buildTar(files);
    expect(tar.length % 512).toBe(0);
    const entries = readTar(tar);
    expect(entries.map((e) => [e.name, e.type])).toEqual([
      ['d'.repeat(80) + '/', '5'],
      [long, '0'],
      ['lib/', '5'],
      ['lib/util.py', '0'],
      ['train.py', '0'],
    ]);
    expect(entries[4]).toMatchObject({ size: 9, mode: 0o644, body: 'print(1)\n' });
    const gz = await buildTarGz(files);
    expect(gz[0]).toBe(0x1f);
    expect(gz[1]).toBe(0x8b);
    expect(new Uint8Array(gunzipSync(gz))).toEqual(tar);
  });
  it('leaves VCS and cache dirs out of code', () => {
    expect(ignoredCode('.git/config')).toBe(true);
    expect(ignoredCode('a/__pycache__/x.pyc')).toBe(true);
    expect(ignoredCode('train.py')).toBe(false);
  });
});
