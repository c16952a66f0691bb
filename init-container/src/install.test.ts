import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InitCodes } from './errors.ts';
import { installFiles, mergeSources } from './install.ts';

const files = (entries: Record<string, string>) => new Map(Object.entries(entries).map(([k, v]) => [k, { data: Buffer.from(v) }]));

describe('installFiles', () => {
  let root: string;
  let dest: string;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'gh-install-'));
    dest = join(root, 'auth-plugins');
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('creates --dest and writes every file, leaving no temporary files behind', async () => {
    const result = await installFiles(dest, files({ 'a.js': 'A', 'sub/b.js': 'B' }));
    expect(result).toEqual({ written: ['a.js', 'sub/b.js'], unchanged: [] });
    expect(await readFile(join(dest, 'a.js'), 'utf8')).toBe('A');
    expect(await readFile(join(dest, 'sub/b.js'), 'utf8')).toBe('B');
    expect((await readdir(dest)).sort()).toEqual(['a.js', 'sub']);
    expect(((await lstat(join(dest, 'a.js'))).mode & 0o777).toString(8)).toBe('644');
  });

  it('is idempotent: a rerun with the same content writes nothing, a changed file is replaced', async () => {
    await installFiles(dest, files({ 'a.js': 'A', 'b.js': 'B' }));
    expect(await installFiles(dest, files({ 'a.js': 'A', 'b.js': 'B' }))).toEqual({ written: [], unchanged: ['a.js', 'b.js'] });
    expect(await installFiles(dest, files({ 'a.js': 'A2', 'b.js': 'B' }))).toEqual({ written: ['a.js'], unchanged: ['b.js'] });
    expect(await readFile(join(dest, 'a.js'), 'utf8')).toBe('A2');
  });

  it('replaces a symbolic link at the target itself, never writing through it', async () => {
    const outside = join(root, 'outside.txt');
    await writeFile(outside, 'precious');
    await mkdir(dest);
    await symlink(outside, join(dest, 'a.js'));
    await installFiles(dest, files({ 'a.js': 'A' }));
    expect(await readFile(outside, 'utf8')).toBe('precious');
    expect((await lstat(join(dest, 'a.js'))).isFile()).toBe(true);
  });

  it('refuses to write through a directory that is a symbolic link out of --dest', async () => {
    const outside = join(root, 'elsewhere');
    await mkdir(outside);
    await mkdir(dest);
    await symlink(outside, join(dest, 'sub'));
    await expect(installFiles(dest, files({ 'sub/b.js': 'B' }))).rejects.toMatchObject({ code: InitCodes.UNSAFE_ENTRY });
    expect(await readdir(outside)).toEqual([]);
  });

  it('refuses paths that resolve outside --dest even if a caller passes them', async () => {
    await expect(installFiles(dest, files({ '../escape.js': 'x' }))).rejects.toMatchObject({ code: InitCodes.UNSAFE_PATH });
    // Nothing escaped, and the --dest this call created is gone again (issue 24 finding 14).
    expect(await readdir(root)).toEqual([]);
  });
});

describe('mergeSources', () => {
  it('accepts the same file with the same content from two images, refuses different content', () => {
    const a = { source: 'img-a', files: new Map([['x.js', Buffer.from('1')]]) };
    const b = { source: 'img-b', files: new Map([['x.js', Buffer.from('1')], ['y.js', Buffer.from('2')]]) };
    expect([...mergeSources([a, b]).keys()]).toEqual(['x.js', 'y.js']);
    const c = { source: 'img-c', files: new Map([['x.js', Buffer.from('other')]]) };
    expect(() => mergeSources([a, c])).toThrow(expect.objectContaining({ code: InitCodes.CONFLICT, message: expect.stringContaining('img-a and img-c') }));
  });
});
