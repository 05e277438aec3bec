import { describe, expect, it } from 'vitest';
import { assembleFile, baseName } from '../src/lib/download';
import { sha256Digest } from '../src/lib/upload';

const enc = new TextEncoder();

async function store(parts: string[]) {
  const m = new Map<string, Uint8Array>();
  const digests: string[] = [];
  for (const p of parts) {
    const b = enc.encode(p);
    const d = await sha256Digest(b);
    m.set(d, b);
    digests.push(d);
  }
  return { m, digests };
}

describe('assembleFile', () => {
  it('puts the chunks back in order', async () => {
    const { m, digests } = await store(['hello ', 'world']);
    const blob = await assembleFile({ path: 'a/b.txt', size: 11, mode: 420, chunks: digests }, async (d) => m.get(d)!);
    expect(await blob.text()).toBe('hello world');
  });

  it('refuses a chunk whose bytes are not its digest', async () => {
    const { digests } = await store(['hello ']);
    await expect(
      assembleFile({ path: 'a.txt', size: 6, mode: 420, chunks: digests }, async () => enc.encode('HELLO ')),
    ).rejects.toThrow(/checksum mismatch: chunk sha256:[0-9a-f]{64} of a\.txt/);
  });

  it('refuses a file whose chunks hold another size', async () => {
    const { m, digests } = await store(['abc']);
    await expect(
      assembleFile({ path: 'x', size: 4, mode: 420, chunks: digests }, async (d) => m.get(d)!),
    ).rejects.toThrow('x has 3 bytes, its manifest says 4');
  });

  it('makes an empty file of no chunks', async () => {
    const blob = await assembleFile({ path: 'e', size: 0, mode: 420, chunks: [] }, async () => new Uint8Array());
    expect(blob.size).toBe(0);
  });
});

describe('baseName', () => {
  it('is the last path component', () => {
    expect(baseName('worker-0/sub/model.pt')).toBe('model.pt');
    expect(baseName('model.pt')).toBe('model.pt');
  });
});
