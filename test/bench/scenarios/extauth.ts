import { execFileSync } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import type { BenchContext, BenchModule, BenchScenario, RunningTarget } from '../scenario.ts';
import { benchManifests, startListening } from '../tools.ts';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';

const CLI = fileURLToPath(new URL('../../../core/bin/gatehouse.js', import.meta.url));
const AUTHORIZATION = `Basic ${Buffer.from('alice:wonderland').toString('base64')}`;

/** APR1 hash from the real tool, as users write it. */
function aliceHash(): { salt: string; hashedPassword: string } {
  const line = execFileSync('htpasswd', ['-nbm', 'alice', 'wonderland'], { encoding: 'utf8' }).trim();
  const [, salt, hashedPassword] = /\$apr1\$([^$]+)\$(.+)$/.exec(line)!;
  return { salt: salt!, hashedPassword: hashedPassword! };
}

/** The proxy rows' route, with or without a Basic-Auth AuthConfig on the virtual host. */
function config(ctx: BenchContext, auth: boolean) {
  const basic = { name: 'basic', configs: [{ basicAuth: { realm: 'bench', apr: { users: { alice: aliceHash() } } } }] };
  return { 'bench.yaml': benchManifests(ctx.upstreamPort, auth ? basic : undefined) };
}

/** Fails the row (instead of measuring 401/403s) unless the credentials get through. */
async function expectAllowed(target: RunningTarget): Promise<RunningTarget> {
  const response = await fetch(target.url, { headers: { authorization: AUTHORIZATION } });
  await response.arrayBuffer();
  if (response.status !== 200) {
    await target.stop();
    throw new Error(`the Basic-Auth route answered ${response.status}, not 200: auth is not wired into this gatehouse command`);
  }
  return target;
}

const request = { headers: { authorization: AUTHORIZATION } };

export const scenarios: BenchScenario[] = [
  { group: 'extauth', name: 'gatehouse run, route without auth', request, start: (ctx) => ctx.gatehouse(config(ctx, false), ['--access-log', 'false']) },
  { group: 'extauth', name: 'gatehouse run, Basic-Auth route', request, start: async (ctx) => expectAllowed(await ctx.gatehouse(config(ctx, true), ['--access-log', 'false'])) },
  {
    group: 'extauth',
    name: 'gateway + separate extauth, Basic-Auth route',
    request,
    start: async (ctx) => {
      const files = config(ctx, true);
      // The same manifests for both processes, as in Kubernetes (one set of CRDs).
      const dir = await mkdtemp(join(ctx.workDir, 'extauth-'));
      await writeFile(join(dir, 'bench.yaml'), files['bench.yaml'].map((d) => stringify(d)).join('---\n'));
      const extauth = await startListening(process.execPath, [...NODE_FLAGS, CLI, 'extauth', '--config-dir', dir, '--port', '0', '--host', '127.0.0.1']);
      try {
        const target = await ctx.gatehouse(files, ['--access-log', 'false', '--extauth-address', `127.0.0.1:${extauth.port}`], 'gateway');
        return await expectAllowed({
          url: target.url,
          stop: async () => {
            await target.stop();
            await extauth.stop();
          },
        });
      } catch (error) {
        await extauth.stop();
        throw error;
      }
    },
  },
];

export const goals: BenchModule['goals'] = [{ row: 'gatehouse run, Basic-Auth route', against: 'gatehouse run, route without auth', minThroughputRatio: 0.7 }];
