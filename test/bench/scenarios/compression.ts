// Response compression's cost (core/src/proxy/filters/compression.ts, issue 31: "gzip of a 20 KB
// JSON response", reported): the same GET of a 20 KB JSON document from an nginx upstream of its
// own, through a Gateway without `gzip` (the client asks for gzip all the same, and gets the
// document as it is), with `gzip` at Gloo's default settings, and with the client preferring br.
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchContext, BenchModule, BenchScenario, RunningTarget } from '../scenario.ts';
import { freePort, startNginx } from '../tools.ts';

const GROUP = 'compression';
/** About 20 KB of JSON, as an API would answer. */
const DOCUMENT = JSON.stringify({ items: Array.from({ length: 160 }, (_, i) => ({ id: i, sku: `sku-${1000 + i}`, name: `Product number ${i}`, price: Math.round(i * 137.3) / 100, tags: ['bench', i % 2 ? 'odd' : 'even'], inStock: i % 3 !== 0 })) });

const UNCOMPRESSED = 'compression: 20 KB JSON, no gzip on the Gateway';
const GZIP = 'compression: 20 KB JSON, gzip (Gloo defaults)';
const BROTLI = 'compression: 20 KB JSON, brotli (client prefers br)';

async function start(ctx: BenchContext, gzip: object | undefined): Promise<RunningTarget> {
  // nginx's workers (user nobody) cannot enter the run's private directory: the document sits in a readable one of its own.
  const root = await mkdtemp(join(tmpdir(), 'gatehouse-bench-json-'));
  await chmod(root, 0o755);
  await writeFile(join(root, 'doc.json'), DOCUMENT, { mode: 0o644 });
  const upstream = await startNginx(ctx.workDir, `json-${gzip ? 'on' : 'off'}-${Date.now()}`, (port) => `server { listen 127.0.0.1:${port}; gzip off; etag off; root ${root}; location / { default_type application/json; } }`);
  const port = await freePort();
  try {
    const target = await ctx.gatehouse(
      {
        'compression.yaml': [
          { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'json' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: upstream.port }] } } },
          { apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualService', metadata: { name: 'bench' }, spec: { virtualHost: { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'json' } } } }] } } },
          { apiVersion: 'gateway.solo.io/v1', kind: 'Gateway', metadata: { name: 'bench', namespace: 'default' }, spec: { bindAddress: '127.0.0.1', bindPort: port, httpGateway: { options: gzip ? { gzip } : {} } } },
        ],
      },
      ['--access-log', 'false'],
    );
    return {
      url: target.url,
      stop: async () => {
        await target.stop();
        await upstream.stop();
        await rm(root, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await upstream.stop();
    await rm(root, { recursive: true, force: true });
    throw error;
  }
}

export const scenarios: BenchScenario[] = [
  { group: GROUP, name: UNCOMPRESSED, request: { path: '/doc.json', headers: { 'accept-encoding': 'gzip' } }, start: (ctx) => start(ctx, undefined) },
  { group: GROUP, name: GZIP, request: { path: '/doc.json', headers: { 'accept-encoding': 'gzip' } }, start: (ctx) => start(ctx, {}) },
  { group: GROUP, name: BROTLI, request: { path: '/doc.json', headers: { 'accept-encoding': 'gzip;q=0.8, br' } }, start: (ctx) => start(ctx, {}) },
];

export const goals: BenchModule['goals'] = [
  { row: GZIP, against: UNCOMPRESSED },
  { row: BROTLI, against: UNCOMPRESSED },
];
