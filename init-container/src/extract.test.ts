import { gzipSync, zstdCompressSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { writeTar, type TarEntry } from '@gatehouse/plugin-sdk/oci';
import { InitCodes } from './errors.ts';
import { applyLayer, checkEntryPath, type PluginFiles } from './extract.ts';
import { DEFAULT_LIMITS } from './limits.ts';

async function* once(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
  // Split in uneven pieces so the parser sees entries across chunk boundaries.
  for (let i = 0; i < bytes.byteLength; i += 700) yield bytes.subarray(i, i + 700);
}

const file = (path: string, text: string): TarEntry => ({ path, type: 'File', data: Buffer.from(text) });

async function apply(entries: TarEntry[], files: PluginFiles = new Map(), options: { gzip?: boolean; limits?: typeof DEFAULT_LIMITS } = {}) {
  const tar = writeTar(entries);
  await applyLayer(once(options.gzip === false ? tar : gzipSync(tar)), files, 'test layer', options.limits ?? DEFAULT_LIMITS);
  return files;
}

describe('checkEntryPath', () => {
  it('normalises ./ prefixes, repeated and trailing slashes', () => {
    expect(checkEntryPath('./compiled-auth-plugins//a.js', 'l')).toBe('compiled-auth-plugins/a.js');
    expect(checkEntryPath('compiled-auth-plugins/', 'l')).toBe('compiled-auth-plugins');
  });

  it.each(['../etc/passwd', 'compiled-auth-plugins/../../x.js', 'a/./../b'])('refuses the traversal path %s', (path) => {
    expect(() => checkEntryPath(path, 'l')).toThrow(expect.objectContaining({ code: InitCodes.UNSAFE_PATH }));
  });

  it.each(['/etc/passwd', '/compiled-auth-plugins/a.js', 'C:/x'])('refuses the absolute path %s', (path) => {
    expect(() => checkEntryPath(path, 'l')).toThrow(expect.objectContaining({ code: InitCodes.UNSAFE_PATH }));
  });
});

describe('applyLayer', () => {
  it('collects regular files under compiled-auth-plugins/ and skips the rest of the image', async () => {
    const files = await apply([
      { path: 'compiled-auth-plugins', type: 'Directory' },
      file('compiled-auth-plugins/a.js', 'A'),
      file('./compiled-auth-plugins/nested/b.js', 'B'),
      file('etc/os-release', 'ID=test'),
      { path: 'usr/bin/sh', type: 'SymbolicLink', linkpath: '/bin/busybox' },
      { path: 'dev/null', type: 'CharacterDevice' },
    ]);
    expect([...files.keys()].sort()).toEqual(['a.js', 'nested/b.js']);
    expect(files.get('a.js')!.toString()).toBe('A');
  });

  it('reads uncompressed and zstd layers as well as gzip', async () => {
    const files = await apply([file('compiled-auth-plugins/a.js', 'plain')], new Map(), { gzip: false });
    expect(files.get('a.js')!.toString()).toBe('plain');
    const zstd = new Map();
    await applyLayer(once(zstdCompressSync(writeTar([file('compiled-auth-plugins/z.js', 'zstd')]))), zstd, 'zstd layer', DEFAULT_LIMITS);
    expect(zstd.get('z.js')?.toString()).toBe('zstd');
  });

  it('applies whiteouts and opaque directories from upper layers', async () => {
    const files: PluginFiles = new Map();
    await apply([file('compiled-auth-plugins/a.js', 'A'), file('compiled-auth-plugins/b.js', 'B'), file('compiled-auth-plugins/sub/c.js', 'C')], files);
    await apply([file('compiled-auth-plugins/.wh.a.js', ''), file('compiled-auth-plugins/sub/.wh..wh..opq', ''), file('compiled-auth-plugins/sub/d.js', 'D')], files);
    expect([...files.keys()].sort()).toEqual(['b.js', 'sub/d.js']);
    await apply([file('.wh.compiled-auth-plugins', '')], files);
    expect(files.size).toBe(0);
  });

  it.each<[string, TarEntry]>([
    ['a symbolic link', { path: 'compiled-auth-plugins/evil.js', type: 'SymbolicLink', linkpath: '/etc/shadow' }],
    ['a hard link', { path: 'compiled-auth-plugins/evil.js', type: 'Link', linkpath: 'etc/shadow' }],
    ['a character device', { path: 'compiled-auth-plugins/tty', type: 'CharacterDevice' }],
    ['a block device', { path: 'compiled-auth-plugins/sda', type: 'BlockDevice' }],
    ['a FIFO', { path: 'compiled-auth-plugins/pipe', type: 'FIFO' }],
    ['the plugin directory as a symbolic link', { path: 'compiled-auth-plugins', type: 'SymbolicLink', linkpath: '/etc' }],
  ])('refuses %s under compiled-auth-plugins/ and keeps earlier files unchanged', async (_name, entry) => {
    const files: PluginFiles = new Map([['kept.js', Buffer.from('K')]]);
    await expect(apply([file('compiled-auth-plugins/ok.js', 'ok'), entry], files)).rejects.toMatchObject({ code: InitCodes.UNSAFE_ENTRY });
    expect([...files.keys()]).toEqual(['kept.js']);
  });

  it('refuses traversal and absolute entry paths anywhere in the layer', async () => {
    await expect(apply([file('../outside.js', 'x')])).rejects.toMatchObject({ code: InitCodes.UNSAFE_PATH });
    await expect(apply([file('compiled-auth-plugins/../../outside.js', 'x')])).rejects.toMatchObject({ code: InitCodes.UNSAFE_PATH });
    await expect(apply([file('/compiled-auth-plugins/a.js', 'x')])).rejects.toMatchObject({ code: InitCodes.UNSAFE_PATH });
  });

  it('refuses a plugin file over the per-file limit', async () => {
    const limits = { ...DEFAULT_LIMITS, maxFileBytes: 1024 };
    await expect(apply([file('compiled-auth-plugins/big.js', 'x'.repeat(1025))], new Map(), { limits })).rejects.toMatchObject({ code: InitCodes.TOO_LARGE, message: expect.stringContaining('1025 bytes') });
    await expect(apply([file('compiled-auth-plugins/fits.js', 'x'.repeat(1024))], new Map(), { limits })).resolves.toBeInstanceOf(Map);
  });

  it('accepts a layer missing only its final padding and end-of-archive blocks (as umoci writes them)', async () => {
    const tar = writeTar([file('compiled-auth-plugins/a.js', 'var a = 1;')]);
    const cut = tar.subarray(0, 512 + 'var a = 1;'.length);
    const files = new Map();
    await applyLayer(once(gzipSync(cut)), files, 'cut layer', DEFAULT_LIMITS);
    expect(files.get('a.js')?.toString()).toBe('var a = 1;');
  });

  it('refuses a layer whose last file is cut off', async () => {
    const tar = writeTar([file('compiled-auth-plugins/a.js', 'var a = 1;')]);
    await expect(applyLayer(once(gzipSync(tar.subarray(0, 512 + 4))), new Map(), 'cut layer', DEFAULT_LIMITS)).rejects.toMatchObject({ code: InitCodes.BAD_LAYER, message: expect.stringContaining('cut off 6 bytes') });
  });

  it('refuses bytes that are not a tar stream', async () => {
    await expect(applyLayer(once(Buffer.from('this is not a tar archive at all, just text'.repeat(20))), new Map(), 'junk', DEFAULT_LIMITS)).rejects.toMatchObject({ code: InitCodes.BAD_LAYER });
  });
});
