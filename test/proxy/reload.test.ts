// Hot reload and last-accepted retention through a live `gatehouse run` process
// (SPEC 2.1, 2.4): reloads never fail a request; a bad update never takes a resource down.
import { renameSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';

interface Status {
  kind: string;
  name: string;
  state: string;
  serving: string;
  reasons: { code: string; message: string; path?: string; file?: string; line?: number }[];
}

let gw: GatehouseProcess;
let config: ConfigDir;
let a: TestServer;
let b: TestServer;

function vs(name: string, domain: string, upstream: string) {
  return manifests.virtualService(name, { domains: [domain], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: upstream } } } }] });
}

async function adminConfig(): Promise<{ generation: number; resources: Status[] }> {
  return JSON.parse((await send(gw.adminUrl, { path: '/config' })).body);
}

/**
 * Rewrites files in place, then waits until a reload after the write satisfies `ready`.
 * In place, not by rename: a file replaced by rename more than once is not seen again
 * (the known watcher bug pinned down at the end of this file).
 */
async function reload(files: Record<string, string | object | object[]>, ready: (cfg: { resources: Status[] }) => boolean = () => true): Promise<{ generation: number; resources: Status[] }> {
  const before = (await adminConfig()).generation;
  for (const [name, content] of Object.entries(files)) await writeFile(join(config.path, name), yamlOf(content));
  return eventually(async () => {
    const cfg = await adminConfig();
    return cfg.generation > before && ready(cfg) && cfg;
  });
}

function yamlOf(content: string | object | object[]): string {
  return typeof content === 'string' ? content : (Array.isArray(content) ? content : [content]).map((d) => stringify(d)).join('---\n');
}

function statusOf(cfg: { resources: Status[] }, kind: string, name: string): Status {
  const status = cfg.resources.find((r) => r.kind === kind && r.name === name);
  if (!status) throw new Error(`no status for ${kind} ${name}`);
  return status;
}

async function upstreamFor(host: string): Promise<string | undefined> {
  const reply = await send(gw.url, { headers: { host } });
  return reply.status === 200 ? (reply.headers['x-upstream'] as string) : `status ${reply.status}`;
}

beforeAll(async () => {
  [a, b] = await Promise.all([startEcho('a'), startEcho('b')]);
  config = await makeConfigDir({
    'upstreams.yaml': [manifests.upstream('a', [{ addr: '127.0.0.1', port: a.port }]), manifests.upstream('b', [{ addr: '127.0.0.1', port: b.port }])],
    'moving.yaml': manifests.upstream('moving', [{ addr: '127.0.0.1', port: a.port }]),
    'switch.yaml': vs('switch', 'switch.test', 'a'),
    'moving-vs.yaml': vs('moving-vs', 'moving.test', 'moving'),
    'keep.yaml': vs('keep', 'keep.test', 'a'),
  });
  gw = await startGatehouse('run', ['--config-dir', config.path]);
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([a?.close(), b?.close(), config?.cleanup()]);
});

describe('hot reload', () => {
  it('serves every request while the config is rewritten under concurrent load', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    const seen = { switch: new Set<string>(), moving: new Set<string>() };
    const failures: string[] = [];
    let requests = 0;
    let running = true;
    const loop = async (host: 'switch' | 'moving') => {
      while (running) {
        try {
          const reply = await send(gw.url, { headers: { host: `${host}.test` }, agent });
          requests++;
          if (reply.status !== 200) failures.push(`${host}: ${reply.status} ${reply.body}`);
          else seen[host].add(reply.headers['x-upstream'] as string);
        } catch (error) {
          failures.push(`${host}: ${(error as Error).message}`);
        }
      }
    };
    const loops = [loop('switch'), loop('switch'), loop('moving'), loop('moving')];
    try {
      // Alternate the route's upstream and the Upstream's host, several times each.
      for (let i = 1; i <= 6; i++) {
        const next = i % 2 === 1 ? 'b' : 'a';
        await reload({ 'switch.yaml': vs('switch', 'switch.test', next), 'moving.yaml': manifests.upstream('moving', [{ addr: '127.0.0.1', port: (i % 2 === 1 ? b : a).port }]) });
        await new Promise((r) => setTimeout(r, 150));
      }
    } finally {
      running = false;
      await Promise.all(loops);
      agent.destroy();
    }
    expect(failures).toEqual([]);
    expect(requests).toBeGreaterThan(100);
    expect([...seen.switch].sort()).toEqual(['a', 'b']);
    expect([...seen.moving].sort()).toEqual(['a', 'b']);
    // The last write wins.
    expect(await upstreamFor('switch.test')).toBe('a');
    expect(await upstreamFor('moving.test')).toBe('a');
  });

  it('adds and removes virtual hosts without a restart', async () => {
    await reload({ 'added.yaml': vs('added', 'added.test', 'b') });
    expect(await upstreamFor('added.test')).toBe('b');
    const before = (await adminConfig()).generation;
    await config.remove('added.yaml');
    await eventually(async () => (await adminConfig()).generation > before);
    expect(await upstreamFor('added.test')).toBe('status 404');
  });
});

describe('last-accepted retention', () => {
  it('a rejected update keeps the last accepted version serving, and status says why', async () => {
    const broken = vs('keep', 'keep.test', 'b') as { spec: { virtualHost: { routes: { matchers: object[] }[] } } };
    broken.spec.virtualHost.routes[0]!.matchers = [{ prefixx: '/' }];
    const cfg = await reload({ 'keep.yaml': broken }, (c) => statusOf(c, 'VirtualService', 'keep').state === 'Rejected');
    const status = statusOf(cfg, 'VirtualService', 'keep');
    expect(status.serving).toBe('last-accepted');
    expect(status.reasons[0]).toMatchObject({ code: 'GH_CONFIG_UNKNOWN_FIELD', path: 'spec.virtualHost.routes[0].matchers[0].prefixx' });
    expect(status.reasons[0]!.file).toMatch(/keep\.yaml$/);
    // Still the old version: upstream a, not the b the broken update asks for.
    expect(await upstreamFor('keep.test')).toBe('a');
  });

  it('an update referencing a missing Upstream is rejected; the old route keeps serving', async () => {
    const cfg = await reload({ 'keep.yaml': vs('keep', 'keep.test', 'ghost') }, (c) => statusOf(c, 'VirtualService', 'keep').reasons.some((r) => r.code === 'GH_CONFIG_MISSING_REF'));
    expect(statusOf(cfg, 'VirtualService', 'keep')).toMatchObject({ state: 'Rejected', serving: 'last-accepted' });
    expect(await upstreamFor('keep.test')).toBe('a');
  });

  it('a YAML syntax error keeps every resource of that file serving', async () => {
    const cfg = await reload({ 'keep.yaml': 'apiVersion: gateway.gatehouse.dev/v1\nkind: VirtualService\nmetadata: {name: keep\nspec: [\n' }, (c) =>
      statusOf(c, 'VirtualService', 'keep').reasons.some((r) => r.code === 'GH_CONFIG_PARSE'),
    );
    expect(statusOf(cfg, 'VirtualService', 'keep')).toMatchObject({ state: 'Rejected', serving: 'last-accepted' });
    expect(await upstreamFor('keep.test')).toBe('a');
    // Other files are unaffected.
    expect(statusOf(cfg, 'VirtualService', 'switch')).toMatchObject({ state: 'Accepted', serving: 'current' });
  });

  it('a rejected Upstream keeps its last accepted hosts, so routes using it keep working', async () => {
    const cfg = await reload({ 'moving.yaml': manifests.upstream('moving', [{ addr: '127.0.0.1', port: 0 }]) }, (c) => statusOf(c, 'Upstream', 'moving').state === 'Rejected');
    expect(statusOf(cfg, 'Upstream', 'moving').serving).toBe('last-accepted');
    expect(statusOf(cfg, 'VirtualService', 'moving-vs').state).toBe('Accepted');
    expect(await upstreamFor('moving.test')).toBe('a');
  });

  it('fixing the file serves the new version again', async () => {
    const cfg = await reload({ 'keep.yaml': vs('keep', 'keep.test', 'b') }, (c) => statusOf(c, 'VirtualService', 'keep').state === 'Accepted');
    expect(statusOf(cfg, 'VirtualService', 'keep').serving).toBe('current');
    expect(await upstreamFor('keep.test')).toBe('b');
  });

  it('a resource never accepted is not served', async () => {
    const fresh = vs('fresh', 'fresh.test', 'a') as { spec: { virtualHost: object } };
    fresh.spec.virtualHost = { ...fresh.spec.virtualHost, colour: 'red' };
    const cfg = await reload({ 'fresh.yaml': fresh }, (c) => c.resources.some((r) => r.name === 'fresh'));
    expect(statusOf(cfg, 'VirtualService', 'fresh')).toMatchObject({ state: 'Rejected', serving: 'none' });
    const reply = await send(gw.url, { headers: { host: 'fresh.test' } });
    expect(reply.status).toBe(404);
    expect(reply.headers['x-gatehouse-error']).toBe('GH_NO_VIRTUAL_HOST');
  });

  it('rejections show in the reload metrics', async () => {
    const text = (await send(gw.adminUrl, { path: '/metrics' })).body;
    expect(text).toMatch(/gatehouse_config_reloads_total\{result="rejected"\} [1-9]/);
    expect(text).toMatch(/gatehouse_config_rejected_resources\{kind="VirtualService"\} [1-9]/);
  });
});

describe('watching files replaced by rename', () => {
  // KNOWN BUG (config source, reported to the lead): Node's recursive fs.watch on Linux
  // watches each file's inode; once a file is replaced by rename (how kubectl, ConfigMap
  // volumes and atomic writers update files), later replacements of it raise no event, so
  // the gateway never reloads them. Non-recursive fs.watch on each directory sees them.
  // Flip to `it` once core/src/config/source/directory.ts no longer relies on it.
  it('reloads a file each time it is replaced by rename', async () => {
    const path = join(config.path, 'renamed.yaml');
    const replace = (upstream: string) => {
      // One synchronous step, as an atomic writer does it.
      writeFileSync(`${path}.tmp`, yamlOf(vs('renamed', 'renamed.test', upstream)));
      renameSync(`${path}.tmp`, path);
    };
    for (const [i, upstream] of ['a', 'b', 'a', 'b', 'a'].entries()) {
      replace(upstream);
      await eventually(async () => (await upstreamFor('renamed.test')) === upstream, 3_000).catch(() => {
        throw new Error(`replacement ${i + 1} (to ${upstream}) was never reloaded`);
      });
    }
  });
});
