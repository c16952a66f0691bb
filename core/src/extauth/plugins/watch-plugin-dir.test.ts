import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { watchPluginDir, type PluginDirWatcher } from './watch-plugin-dir.ts';

let dir: string | undefined;
let watcher: PluginDirWatcher | undefined;

afterEach(async () => {
  watcher?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function collector() {
  const batches: string[][] = [];
  return { batches, onChange: (names: string[]) => void batches.push(names) };
}

describe('watchPluginDir', () => {
  it('reports a replaced, an added and a removed file, debounced into one batch', async () => {
    dir = await mkdtemp(join(tmpdir(), 'gatehouse-watch-'));
    await writeFile(join(dir, 'A.js'), 'a1');
    await writeFile(join(dir, 'B.js'), 'b1');
    const { batches, onChange } = collector();
    watcher = await watchPluginDir(dir, onChange, { debounceMs: 50 });
    // An atomic replace (temp file + rename) as gatehouse-plugin build and gatehouse-init do it.
    await writeFile(join(dir, 'A.js.123.tmp'), 'a2');
    await rename(join(dir, 'A.js.123.tmp'), join(dir, 'A.js'));
    await writeFile(join(dir, 'C.js'), 'c1');
    await rm(join(dir, 'B.js'));
    await expect.poll(() => batches, { timeout: 3000 }).toEqual([['A.js', 'B.js', 'C.js']]);
  });

  it('does not report a file rewritten with the same content', async () => {
    dir = await mkdtemp(join(tmpdir(), 'gatehouse-watch-'));
    await writeFile(join(dir, 'A.js'), 'same');
    const { batches, onChange } = collector();
    watcher = await watchPluginDir(dir, onChange, { debounceMs: 20 });
    await writeFile(join(dir, 'A.js'), 'same');
    await writeFile(join(dir, 'B.js'), 'new');
    await expect.poll(() => batches, { timeout: 3000 }).toEqual([['B.js']]);
  });

  it('notices a directory that appears later (polling)', async () => {
    const parent = await mkdtemp(join(tmpdir(), 'gatehouse-watch-'));
    dir = parent;
    const pluginsDir = join(parent, 'plugins');
    const { batches, onChange } = collector();
    watcher = await watchPluginDir(pluginsDir, onChange, { debounceMs: 20, pollMs: 100 });
    const { mkdir } = await import('node:fs/promises');
    await mkdir(pluginsDir);
    await writeFile(join(pluginsDir, 'A.js'), 'a');
    await expect.poll(() => batches.flat(), { timeout: 3000 }).toContain('A.js');
  });
});
