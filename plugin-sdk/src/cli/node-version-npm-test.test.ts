import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectFiles } from './init.ts';

// Issue 30 item 6: on Node 20 a plugin project's `npm test` prints the clear Node.js version
// message (from `gatehouse-plugin check-node`) instead of crashing inside vitest first. Runs the
// project's own test script with a real older Node.js found on PATH.

const BIN = fileURLToPath(new URL('../../bin/gatehouse-plugin.js', import.meta.url));
const VITEST = fileURLToPath(new URL('../../../node_modules/vitest/vitest.mjs', import.meta.url));

/** A `node` older than 24 on PATH (Debian's /usr/bin/node on the dev machine), with the npm beside it if any. */
function oldNode(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter).concat(['/usr/bin', '/usr/local/bin'])) {
    const candidate = join(dir, 'node');
    if (!existsSync(candidate)) continue;
    try {
      const version = execFileSync(candidate, ['--version'], { encoding: 'utf8' }).trim();
      if (Number(version.slice(1).split('.')[0]) < 24) return candidate;
    } catch {
      // Not runnable: try the next.
    }
  }
  return undefined;
}

const node20 = oldNode();
const run = (file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv) =>
  new Promise<{ code: number; output: string }>((resolve) =>
    execFile(file, args, { cwd, env, timeout: 60_000 }, (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, output: `${stdout}${stderr}` })),
  );

if (!node20 && process.env.CI === 'true') {
  it('needs a Node.js older than 24 on PATH on CI', () => {
    throw new Error('no node older than 24 on PATH');
  });
} else if (!node20) {
  console.warn('\n*** SKIPPED plugin-sdk/src/cli/node-version-npm-test.test.ts: no Node.js older than 24 on PATH ***\n');
}

describe.skipIf(!node20)('npm test of a new plugin project on an older Node.js', () => {
  let project: string;
  beforeAll(async () => {
    project = await mkdtemp(join(tmpdir(), 'gatehouse-node20-'));
    const files = projectFiles({ name: 'Old', sdk: '0.1.0', host: '0.1.0', packageName: 'old-node-plugin' });
    await writeFile(join(project, 'package.json'), files['package.json']!);
    await mkdir(join(project, 'node_modules', '.bin'), { recursive: true });
    // The project's installed bins, as npm links them.
    await symlink(BIN, join(project, 'node_modules', '.bin', 'gatehouse-plugin'));
    await symlink(VITEST, join(project, 'node_modules', '.bin', 'vitest'));
  });
  afterAll(() => rm(project, { recursive: true, force: true }));

  it('the test script checks Node.js first: the message names both versions, vitest never starts', async () => {
    const scripts = (JSON.parse(projectFiles({ name: 'Old', sdk: '0.1.0', host: '0.1.0', packageName: 'x' })['package.json']!) as { scripts: { test: string } }).scripts;
    expect(scripts.test).toBe('gatehouse-plugin check-node && vitest run');
    // `npm test` runs the script with a shell; PATH puts the old node first, as on a machine that has only it.
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${join(project, 'node_modules', '.bin')}${delimiter}${dirname(node20!)}${delimiter}${process.env.PATH ?? ''}` };
    delete env.NODE_OPTIONS;
    const result = await run('/bin/sh', ['-c', scripts.test], project, env);
    expect(result.code).toBe(1);
    expect(result.output).toMatch(/^Gatehouse needs Node\.js 24 or newer, but this is Node\.js 2\d\.\d+\.\d+ \(.*\); install Node\.js 24\+ .* \[GH_PLUGIN_NODE_VERSION\]\n$/);
    expect(result.output).not.toMatch(/vitest|RUN|TypeError/);
  });

  it('on Node.js 24 the check passes silently', async () => {
    const result = await run(process.execPath, [BIN, 'check-node'], project, { ...process.env });
    expect(result).toEqual({ code: 0, output: '' });
  });
});
