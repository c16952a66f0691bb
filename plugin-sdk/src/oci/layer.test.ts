import { gunzipSync } from 'node:zlib';
import { Parser, type ReadEntry } from 'tar';
import { describe, expect, it } from 'vitest';
import { sha256 } from './digest.ts';
import { buildLayer, writeTar, type TarEntry } from './layer.ts';

async function list(tar: Buffer): Promise<{ path: string; type: string; mode?: number; uid?: number; mtime?: number; text: string }[]> {
  const out: { path: string; type: string; mode?: number; uid?: number; mtime?: number; text: string }[] = [];
  await new Promise<void>((resolve, reject) => {
    const parser = new Parser({ strict: true });
    parser.on('entry', (e: ReadEntry) => {
      const parts: Buffer[] = [];
      e.on('data', (c: Buffer) => parts.push(c));
      e.on('end', () => out.push({ path: e.path, type: e.type, mode: e.mode, uid: e.uid, mtime: e.mtime?.getTime(), text: Buffer.concat(parts).toString() }));
    });
    parser.on('end', () => resolve());
    parser.on('error', reject);
    parser.end(tar);
  });
  return out;
}

const entries: TarEntry[] = [
  { path: 'compiled-auth-plugins', type: 'Directory' },
  { path: 'compiled-auth-plugins/a.js', type: 'File', data: Buffer.from('alpha') },
  { path: `compiled-auth-plugins/${'long-name-'.repeat(20)}.js`, type: 'File', data: Buffer.from('long') },
];

describe('writeTar / buildLayer', () => {
  it('writes a tar that tar readers list back with pinned owner, mode and mtime', async () => {
    const items = await list(writeTar(entries, new Date(1_000_000_000_000)));
    expect(items.map((i) => [i.path, i.type, i.text])).toEqual([
      ['compiled-auth-plugins/', 'Directory', ''],
      ['compiled-auth-plugins/a.js', 'File', 'alpha'],
      [`compiled-auth-plugins/${'long-name-'.repeat(20)}.js`, 'File', 'long'],
    ]);
    expect(items.map((i) => i.mode)).toEqual([0o755, 0o644, 0o644]);
    expect(items.every((i) => i.uid === 0 && i.mtime === 1_000_000_000_000)).toBe(true);
  });

  it('is byte-for-byte reproducible, and the digests describe the bytes', () => {
    const a = buildLayer(entries);
    const b = buildLayer(entries);
    expect(a.digest).toBe(b.digest);
    expect(a.diffId).toBe(b.diffId);
    expect(a.digest).toBe(sha256(a.blob));
    expect(sha256(gunzipSync(a.blob))).toBe(a.diffId);
    expect(buildLayer(entries, new Date(5000)).digest).not.toBe(a.digest);
  });
});
