import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sha256 } from './digest.ts';
import { OciCodes } from './errors.ts';
import { buildPluginImage } from './image-build.ts';
import { openImage } from './image-store.ts';
import { writeTar } from './layer.ts';
import { packLayout, unpackLayout } from './layout-archive.ts';
import { resolveImage } from './resolve.ts';

describe('layout tarballs', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gh-archive-'));
    await mkdir(join(dir, 'plugins'));
    await writeFile(join(dir, 'plugins/a.js'), 'var a = 1;');
    await buildPluginImage({ from: join(dir, 'plugins'), tag: '1.0.0', output: join(dir, 'layout'), gatewayVersion: '1.0.0' });
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('packs reproducibly and reads back as the same image, cleaning up after itself', async () => {
    await packLayout(join(dir, 'layout'), join(dir, 'one.tar'));
    await packLayout(join(dir, 'layout'), join(dir, 'two.tar'));
    expect((await readFile(join(dir, 'one.tar'))).equals(await readFile(join(dir, 'two.tar')))).toBe(true);
    // A private TMPDIR shows that the unpacked copy is removed on close.
    const privateTmp = join(dir, 'tmp');
    await mkdir(privateTmp);
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = privateTmp;
    const opened = await openImage(`oci:${join(dir, 'one.tar')}:1.0.0`).finally(() => {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    });
    expect(await readdir(privateTmp)).toHaveLength(1);
    const root = await resolveImage(opened.store, opened.reference, 'all');
    const fromDir = await openImage(`oci:${join(dir, 'layout')}:1.0.0`);
    expect(root.digest).toBe((await resolveImage(fromDir.store, fromDir.reference, 'all')).digest);
    await opened.store.close();
    expect(await readdir(privateTmp)).toEqual([]);
  });

  it.each([
    ['a traversal path', { path: '../evil', type: 'File' as const, data: Buffer.from('x') }],
    ['a symbolic link', { path: `blobs/sha256/${sha256('x').slice(7)}`, type: 'SymbolicLink' as const, linkpath: '/etc/passwd' }],
    ['a file that is not part of a layout', { path: 'extra.sh', type: 'File' as const, data: Buffer.from('x') }],
  ])('refuses an archive with %s', async (_name, entry) => {
    const file = join(dir, 'bad.tar');
    await writeFile(file, writeTar([{ path: 'oci-layout', type: 'File', data: Buffer.from('{"imageLayoutVersion":"1.0.0"}') }, entry]));
    await expect(unpackLayout(file)).rejects.toMatchObject({ code: OciCodes.BAD_LAYOUT });
    expect(await readdir(dir)).not.toContain('evil');
  });
});
