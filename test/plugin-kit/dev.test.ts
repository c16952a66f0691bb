import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initProject } from '../../plugin-sdk/src/cli/init.ts';

// `gatehouse-plugin dev` (issue 30 item 7) in a project made by `gatehouse-plugin init`: one
// command runs a local gateway with the plugin in front of an echo upstream, and an edit of the
// plugin's source is served without restarting anything. The project sits inside this
// repository so its imports resolve to the workspace packages (test/plugin-kit/init.test.ts
// covers the packed packages).

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'plugin-sdk/bin/gatehouse-plugin.js');
let work: string;
let project: string;
let dev: ChildProcess;
let output = '';
let url: string;

/** Polls `probe` until it answers something truthy; fails naming `what` (with the dev output) after `timeoutMs`. */
async function until<T>(probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await Promise.resolve(probe()).catch(() => undefined);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms; gatehouse-plugin dev wrote:\n${output.slice(-4000)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

beforeAll(async () => {
  work = await mkdtemp(join(ROOT, 'test/plugin-kit/.dev-'));
  project = join(work, 'team');
  await initProject({ dir: project });
  dev = spawn(process.execPath, [CLI, 'dev', '--port', '0', '--config', JSON.stringify({ Header: 'x-team', AllowedValues: ['core'] })], { cwd: project, stdio: ['ignore', 'pipe', 'pipe'] });
  dev.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  dev.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  url = await until(() => /gatehouse-plugin dev: (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1], 90_000, "the dev gateway's URL");
}, 120_000);

afterAll(async () => {
  if (dev && dev.exitCode === null) {
    const exited = new Promise((resolve) => dev.once('exit', resolve));
    dev.kill('SIGINT');
    await exited;
  }
  if (work) await rm(work, { recursive: true, force: true });
});

describe('gatehouse-plugin dev', () => {
  it('serves the plugin in front of an echo upstream: denied without the header, allowed (and echoed) with it', async () => {
    expect((await fetch(`${url}/orders`)).status).toBe(403);
    const allowed = await fetch(`${url}/orders?x=1`, { headers: { 'x-team': 'core' } });
    expect(allowed.status).toBe(200);
    const echoed = (await allowed.json()) as { path: string; headers: Record<string, string> };
    expect(echoed.path).toBe('/orders?x=1');
    expect(echoed.headers['x-team']).toBe('allowed');
  });

  it('rebuilds on an edit of the source, and the gateway serves the new build without a restart', async () => {
    const source = join(project, 'src/index.ts');
    const builds = () => output.split('\n').filter((line) => line.startsWith('built Team ')).length;
    const before = builds();
    await writeFile(source, (await readFile(source, 'utf8')).replace("{ 'x-team': 'allowed' }", "{ 'x-team': 'allowed, edited' }"));
    await until(() => builds() > before, 30_000, 'a rebuild');
    await until(async () => {
      const reply = await fetch(`${url}/orders`, { headers: { 'x-team': 'core' } });
      const echoed = (await reply.json()) as { headers: Record<string, string> };
      return echoed.headers['x-team'] === 'allowed, edited';
    }, 30_000, 'the edited plugin serving');
    // A broken edit keeps the last good build serving.
    await writeFile(source, `${await readFile(source, 'utf8')}\nthis is not TypeScript (`);
    await until(() => output.includes('build failed, the last good build keeps serving'), 30_000, 'the failed build reported');
    expect((await fetch(`${url}/orders`, { headers: { 'x-team': 'core' } })).status).toBe(200);
  });
});
