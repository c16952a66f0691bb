// Plugin auth rows (issue 5): a route behind the sandboxed RequiredHeader plugin, against
// the extauth group's "gatehouse run, route without auth" row of the same run.
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import type { BenchContext, BenchModule, BenchScenario, RunningTarget } from '../scenario.ts';
import { benchManifests } from '../tools.ts';

const REQUIRED_HEADER = fileURLToPath(new URL('../../../plugins/required-header/src/index.ts', import.meta.url));
const request = { headers: { 'x-api-key': 'bench' } };

function config(ctx: BenchContext) {
  const plugin = { name: 'plugin', configs: [{ pluginAuth: { name: 'RequiredHeader', config: { RequiredHeader: 'x-api-key', AllowedValues: ['bench'] } } }] };
  return { 'bench.yaml': benchManifests(ctx.upstreamPort, plugin) };
}

/** Fails the row (instead of measuring 403s) unless the plugin lets the bench request through. */
async function expectAllowed(target: RunningTarget): Promise<RunningTarget> {
  // The plugin step is built asynchronously after the first config load: give it a moment.
  for (let attempt = 0; attempt < 50; attempt++) {
    const response = await fetch(target.url, request);
    await response.arrayBuffer();
    if (response.status === 200) return target;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await target.stop();
  throw new Error('the plugin route never answered 200: the plugin did not load (see the gatehouse log in the bench work dir)');
}

export const scenarios: BenchScenario[] = [
  {
    group: 'extauth',
    name: 'gatehouse run, plugin route (RequiredHeader)',
    request,
    start: async (ctx) => {
      const pluginDir = await mkdtemp(join(ctx.workDir, 'auth-plugins-'));
      await buildPlugin({ entry: REQUIRED_HEADER, name: 'RequiredHeader', outDir: pluginDir });
      return expectAllowed(await ctx.gatehouse(config(ctx), ['--access-log', 'false', '--plugin-dir', pluginDir]));
    },
  },
];

export const goals: BenchModule['goals'] = [{ row: 'gatehouse run, plugin route (RequiredHeader)', against: 'gatehouse run, route without auth', minThroughputRatio: 0.6 }];
