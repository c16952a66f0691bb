import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { DirectoryWatcher, readManifests, type SourceRead } from './directory.ts';

const UPSTREAM = (name: string) => `apiVersion: gatehouse.gatehouse.dev/v1\nkind: Upstream\nmetadata: {name: ${name}}\nspec: {static: {hosts: [{addr: a, port: 1}]}}\n`;
const names = (read: SourceRead) => read.documents.map((d) => (d.value as { metadata: { name: string } }).metadata.name).sort();

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gh-dir-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('readManifests', () => {
  test('reads yaml, yml and json recursively, skips hidden entries and other files', async () => {
    await mkdir(join(dir, 'sub', 'deeper'), { recursive: true });
    await mkdir(join(dir, '..data'));
    await writeFile(join(dir, 'a.yaml'), UPSTREAM('a'));
    await writeFile(join(dir, 'sub', 'b.yml'), UPSTREAM('b'));
    await writeFile(join(dir, 'sub', 'deeper', 'c.json'), JSON.stringify({ apiVersion: 'x', kind: 'Upstream', metadata: { name: 'c' } }));
    await writeFile(join(dir, '..data', 'hidden.yaml'), UPSTREAM('hidden'));
    await writeFile(join(dir, '.swap.yaml'), UPSTREAM('swap'));
    await writeFile(join(dir, 'notes.txt'), 'not a manifest');
    expect(names(await readManifests([dir]))).toEqual(['a', 'b', 'c']);
  });

  test('a file named directly and through its directory is read once', async () => {
    await writeFile(join(dir, 'a.yaml'), UPSTREAM('a'));
    const read = await readManifests([join(dir, 'a.yaml'), dir]);
    expect(names(read)).toEqual(['a']);
  });

  test('a missing path is a read diagnostic', async () => {
    const read = await readManifests([join(dir, 'nope')]);
    expect(read.diagnostics).toEqual([expect.objectContaining({ code: 'GH_CONFIG_READ', file: join(dir, 'nope') })]);
  });
});

describe('DirectoryWatcher', () => {
  /** Starts a watcher; `next()` resolves with the next read, or undefined after `ms`. */
  function watchDir() {
    const reads: SourceRead[] = [];
    let wake: (() => void) | undefined;
    const watcher = new DirectoryWatcher(dir, (read) => {
      reads.push(read);
      wake?.();
    }, { debounceMs: 30 });
    watcher.start();
    const next = (ms = 3000) =>
      new Promise<SourceRead | undefined>((resolve) => {
        if (reads.length) return resolve(reads.shift());
        const timer = setTimeout(() => ((wake = undefined), resolve(undefined)), ms);
        wake = () => {
          clearTimeout(timer);
          wake = undefined;
          resolve(reads.shift());
        };
      });
    return { watcher, next };
  }

  test('a file rewritten every 10 ms still reloads, within the maximum wait (issue 17 finding 15)', async () => {
    await writeFile(join(dir, 'a.yaml'), UPSTREAM('v0'));
    const reads: SourceRead[] = [];
    const watcher = new DirectoryWatcher(dir, (read) => void reads.push(read), { debounceMs: 100, maxWaitMs: 300 });
    watcher.start();
    let version = 0;
    const writer = setInterval(() => void writeFile(join(dir, 'a.yaml'), UPSTREAM(`v${++version}`)), 10);
    try {
      // Without the maximum wait the debounce never settled while writes went on: no read at all.
      await vi.waitFor(() => expect(reads.length).toBeGreaterThanOrEqual(2), { timeout: 10_000, interval: 50 });
    } finally {
      clearInterval(writer);
    }
    await watcher.close();
  });

  test('a reload that throws is reported and the next change reloads again', async () => {
    const errors: unknown[] = [];
    let calls = 0;
    const watcher = new DirectoryWatcher(
      dir,
      () => {
        calls++;
        if (calls === 1) throw new Error('boom');
      },
      { debounceMs: 30, onError: (e) => errors.push(e) },
    );
    watcher.start();
    await writeFile(join(dir, 'b.yaml'), UPSTREAM('v1'));
    await expect.poll(() => errors.length, { timeout: 3000 }).toBe(1);
    await writeFile(join(dir, 'b.yaml'), UPSTREAM('v2'));
    await expect.poll(() => calls, { timeout: 3000 }).toBe(2);
    await watcher.close();
  });

  test('sees a file replaced by rename, again and again', async () => {
    await writeFile(join(dir, 'a.yaml'), UPSTREAM('v0'));
    const { watcher, next } = watchDir();
    for (const version of ['v1', 'v2', 'v3']) {
      await writeFile(join(dir, '.a.yaml.tmp'), UPSTREAM(version));
      await rename(join(dir, '.a.yaml.tmp'), join(dir, 'a.yaml'));
      expect(names((await next())!)).toEqual([version]);
    }
    await watcher.close();
  });

  test('watches directories created after it started', async () => {
    const { watcher, next } = watchDir();
    await mkdir(join(dir, 'team'));
    await next(); // the new directory itself
    await writeFile(join(dir, 'team', 'b.yaml'), UPSTREAM('b'));
    expect(names((await next())!)).toEqual(['b']);
    await watcher.close();
  });

  test('ignores files that are not manifests', async () => {
    const { watcher, next } = watchDir();
    await writeFile(join(dir, 'gateway.log'), 'noise');
    expect(await next(400)).toBeUndefined();
    await writeFile(join(dir, 'c.yaml'), UPSTREAM('c'));
    expect(names((await next())!)).toEqual(['c']);
    await watcher.close();
  });

  test('follows a Kubernetes ConfigMap volume swap (..data symlink replaced)', async () => {
    await mkdir(join(dir, '..2026_01'));
    await writeFile(join(dir, '..2026_01', 'routes.yaml'), UPSTREAM('old'));
    await symlink('..2026_01', join(dir, '..data'));
    await symlink(join('..data', 'routes.yaml'), join(dir, 'routes.yaml'));
    expect(names(await readManifests([dir]))).toEqual(['old']);
    const { watcher, next } = watchDir();
    await mkdir(join(dir, '..2026_02'));
    await writeFile(join(dir, '..2026_02', 'routes.yaml'), UPSTREAM('new'));
    await symlink('..2026_02', join(dir, '..data_tmp'));
    await rename(join(dir, '..data_tmp'), join(dir, '..data'));
    let read = await next();
    while (read && names(read)[0] !== 'new') read = await next();
    expect(read && names(read)).toEqual(['new']);
    await watcher.close();
  });
});
