/**
 * Gloo's route `shadowing` through a real `gatehouse run` with two real upstreams (issue 31 item
 * 4): the copy reaches the shadow with Envoy's `-shadow` Host, the same method, path, headers and
 * body; the client gets the primary's answer whatever the shadow does (500, hangs, resets, is
 * down); a body above the limit is not copied; percentages 0 and 50; counted on /metrics.
 */
import { createHash } from 'node:crypto';
import { connect as h2connect } from 'node:http2';
import { request as httpRequest, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { refusedPort, startBodyRecorder, startServer, type RecordedRequest, type TestServer } from '../support/upstream.ts';

let primary: Awaited<ReturnType<typeof startBodyRecorder>>;
let shadow: TestServer;
/** What the shadow upstream received (bodies by size and SHA-256). */
const shadowSeen: RecordedRequest[] = [];
/** Shadow requests on /hang the shadow holds open. */
const hanging: { path: string; res: ServerResponse }[] = [];
let config: ConfigDir;
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  primary = await startBodyRecorder('primary answer');
  shadow = await startServer((req, res) => {
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('data', (c: Buffer) => {
      hash.update(c);
      bytes += c.length;
    });
    req.on('end', () => {
      shadowSeen.push({ method: req.method!, path: req.url!, headers: req.headers, bytes, sha256: hash.digest('hex') });
      if (req.url!.startsWith('/hang')) return void hanging.push({ path: req.url!, res });
      if (req.url!.startsWith('/reset')) return void req.socket.destroy();
      // What the shadow answers is never the client's business.
      res.writeHead(503, { 'x-from': 'shadow' }).end('shadow answer');
    });
  });
  const down = await refusedPort();
  const to = { single: { upstream: { name: 'primary' } } };
  const shadowing = (upstream: string, percentage: number) => ({ shadowing: { upstream: { name: upstream }, percentage } });
  config = await makeConfigDir({
    'shadowing.yaml': [
      manifests.upstream('primary', [{ addr: '127.0.0.1', port: primary.port }]),
      manifests.upstream('shadow', [{ addr: '127.0.0.1', port: shadow.port }]),
      manifests.upstream('shadow-down', [{ addr: '127.0.0.1', port: down }]),
      manifests.virtualService('shadowing', {
        domains: ['*'],
        routes: [
          { name: 'down', matchers: [{ prefix: '/down' }], routeAction: to, options: shadowing('shadow-down', 100) },
          { name: 'rewritten', matchers: [{ prefix: '/rewritten' }], routeAction: to, options: { hostRewriteHeader: 'x-target', ...shadowing('shadow', 100) } },
          { name: 'none', matchers: [{ prefix: '/none' }], routeAction: to, options: shadowing('shadow', 0) },
          { name: 'half', matchers: [{ prefix: '/half' }], routeAction: to, options: shadowing('shadow', 50) },
          // A short route timeout: the hanging shadow is cut after it.
          { name: 'hang', matchers: [{ prefix: '/hang' }], routeAction: to, options: { timeout: '3s', ...shadowing('shadow', 100) } },
          { name: 'all', matchers: [{ prefix: '/' }], routeAction: to, options: { prefixRewrite: '/', ...shadowing('shadow', 100), headerManipulation: { requestHeadersToAdd: [{ header: { key: 'x-added', value: 'by-route' } }] } } },
        ],
      }),
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', config.path], { timeoutMs: 60_000 });
}, 90_000);

afterAll(async () => {
  await gatehouse?.stop();
  for (const { res } of hanging) res.destroy();
  await primary?.close();
  await shadow?.close();
  await config?.cleanup();
});

async function shadowCount(upstream: string, result: string): Promise<number> {
  const text = await (await fetch(`${gatehouse.adminUrl}/metrics`)).text();
  return Number(new RegExp(`gatehouse_shadow_requests_total\\{upstream="default/${upstream}",result="${result}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
}

const shadowOf = (path: string) => shadowSeen.find((s) => s.path === path);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('shadowing through gatehouse run', () => {
  it('copies the request to the shadow with Host suffixed -shadow, same method, path, headers; the client gets the primary\'s answer', async () => {
    const reply = await send(gatehouse.url, { path: '/orders/1?x=1', headers: { host: 'shop.example:8080', 'x-client': 'c1' } });
    expect(reply.status).toBe(200);
    expect(reply.body).toBe('primary answer');
    expect(reply.headers['x-from']).toBeUndefined();
    expect(primary.seen.at(-1)).toMatchObject({ path: '/orders/1?x=1', headers: { host: 'shop.example:8080', 'x-client': 'c1', 'x-added': 'by-route' } });
    const copy = await eventually(async () => shadowOf('/orders/1?x=1'));
    expect(copy.method).toBe('GET');
    expect(copy.headers).toMatchObject({ host: 'shop.example-shadow:8080', 'x-client': 'c1', 'x-added': 'by-route', 'x-request-id': primary.seen.at(-1)!.headers['x-request-id'] });
    await eventually(async () => (await shadowCount('shadow', 'ok')) >= 1);
  });

  it('the copy carries the route\'s Host rewrite, suffixed (Envoy copies the request as finalized); an invalid value is counted once', async () => {
    await send(gatehouse.url, { path: '/rewritten/1', headers: { host: 'shop.example', 'x-target': 'orders.internal:81' } });
    expect(primary.seen.at(-1)!.headers.host).toBe('orders.internal:81');
    expect((await eventually(async () => shadowOf('/rewritten/1'))).headers.host).toBe('orders.internal-shadow:81');
    await send(gatehouse.url, { path: '/rewritten/2', headers: { host: 'shop.example', 'x-target': 'bad/host' } });
    expect((await eventually(async () => shadowOf('/rewritten/2'))).headers.host).toBe('shop.example-shadow');
    const text = await (await fetch(`${gatehouse.adminUrl}/metrics`)).text();
    expect(text).toContain('gatehouse_host_rewrite_invalid_total{route="rewritten"} 1');
  });

  it('mirrors a request body byte for byte; the primary gets it whole too', async () => {
    const body = Buffer.alloc(300_000);
    for (let i = 0; i < body.length; i++) body[i] = (i * 31) & 0xff;
    const reply = await send(gatehouse.url, { method: 'POST', path: '/upload', headers: { host: 'shop.example', 'content-type': 'application/octet-stream' }, body });
    expect(reply.status).toBe(200);
    expect(primary.seen.at(-1)).toMatchObject({ method: 'POST', bytes: body.length, sha256: sha(body) });
    const copy = await eventually(async () => shadowOf('/upload'));
    expect(copy).toMatchObject({ method: 'POST', bytes: body.length, sha256: sha(body), headers: { host: 'shop.example-shadow' } });
  });

  it('an HTTP/2 (h2c) request and its body are mirrored too, :authority suffixed', async () => {
    const body = Buffer.alloc(100_000, 5);
    const session = h2connect(gatehouse.url);
    try {
      const status = await new Promise<number>((resolve, reject) => {
        const stream = session.request({ ':method': 'PUT', ':path': '/h2-upload', ':authority': 'shop.example' });
        stream.on('response', (h) => resolve(Number(h[':status'])));
        stream.on('error', reject);
        stream.resume();
        stream.end(body);
      });
      expect(status).toBe(200);
    } finally {
      session.close();
    }
    const copy = await eventually(async () => shadowOf('/h2-upload'));
    expect(copy).toMatchObject({ method: 'PUT', bytes: body.length, sha256: sha(body), headers: { host: 'shop.example-shadow' } });
  });

  it('a body above the shadow limit (1 MiB) reaches the primary whole and is not shadowed, counted body_too_large', async () => {
    const before = await shadowCount('shadow', 'body_too_large');
    const body = Buffer.alloc(1024 * 1024 + 50_000, 9);
    const reply = await send(gatehouse.url, { method: 'PUT', path: '/big', headers: { host: 'shop.example' }, body });
    expect(reply.status).toBe(200);
    expect(primary.seen.at(-1)).toMatchObject({ method: 'PUT', path: '/big', bytes: body.length, sha256: sha(body) });
    await eventually(async () => (await shadowCount('shadow', 'body_too_large')) === before + 1);
    // A later shadowed request has arrived; the big one never did.
    await send(gatehouse.url, { path: '/after-big', headers: { host: 'shop.example' } });
    await eventually(async () => shadowOf('/after-big'));
    expect(shadowOf('/big')).toBeUndefined();
  });

  it('a shadow that hangs does not hold the client: the answer comes while the shadow still holds the copy, which is cut after the route timeout', async () => {
    const failed = await shadowCount('shadow', 'failed');
    const reply = await send(gatehouse.url, { path: '/hang/1', headers: { host: 'shop.example' } });
    expect(reply.status).toBe(200);
    expect(reply.body).toBe('primary answer');
    // The copy is still held by the shadow, unanswered, when the client already has its answer...
    const held = await eventually(async () => hanging.find((h) => h.path === '/hang/1'));
    expect(held.res.socket?.destroyed).toBe(false);
    expect(await shadowCount('shadow', 'failed')).toBe(failed);
    // ...and the gateway gives it up at the route timeout (counted failed, its connection closed).
    await eventually(async () => (await shadowCount('shadow', 'failed')) === failed + 1, 15_000);
    await eventually(async () => held.res.socket === null || held.res.socket.destroyed);
  });

  it('a shadow that resets the connection, or is down, never reaches the client: every request gets the primary\'s answer', async () => {
    for (let i = 0; i < 5; i++) {
      const reset = await send(gatehouse.url, { path: `/reset/${i}`, headers: { host: 'shop.example' } });
      expect([reset.status, reset.body]).toEqual([200, 'primary answer']);
      const down = await send(gatehouse.url, { path: `/down/${i}`, headers: { host: 'shop.example' } });
      expect([down.status, down.body]).toEqual([200, 'primary answer']);
    }
    await eventually(async () => (await shadowCount('shadow-down', 'failed')) === 5);
    await eventually(async () => (await shadowCount('shadow', 'failed')) >= 6);
  });

  it('a client that leaves mid-body: no copy is sent, the slot is freed (counted abandoned), the gateway serves on', async () => {
    const before = await shadowCount('shadow', 'abandoned');
    const req = httpRequest({ host: '127.0.0.1', port: gatehouse.port, method: 'POST', path: '/leaves-mid-body', headers: { host: 'shop.example', 'content-length': '200000' }, agent: false });
    req.on('error', () => {});
    // The client goes once the primary upstream has the request (its body being copied on the way).
    const arrived = new Promise<void>((resolve) => {
      const onRequest = (r: { url?: string }) => r.url === '/leaves-mid-body' && (primary.server.off('request', onRequest), resolve());
      primary.server.on('request', onRequest);
    });
    req.write(Buffer.alloc(20_000, 1));
    await arrived;
    req.destroy();
    await eventually(async () => (await shadowCount('shadow', 'abandoned')) === before + 1);
    expect(shadowOf('/leaves-mid-body')).toBeUndefined();
    expect((await send(gatehouse.url, { path: '/still-serving', headers: { host: 'shop.example' } })).body).toBe('primary answer');
  });

  it('percentage 0 copies nothing; 50 copies about half', async () => {
    for (let i = 0; i < 20; i++) expect((await send(gatehouse.url, { path: `/none/${i}` })).status).toBe(200);
    const n = 100;
    for (let i = 0; i < n; i++) expect((await send(gatehouse.url, { path: `/half/${i}` })).status).toBe(200);
    // Every copy that was made is answered: wait for the ok count to settle on what the shadow saw.
    await send(gatehouse.url, { path: '/marker' });
    await eventually(async () => shadowOf('/marker'));
    const half = await eventually(async () => {
      const seen = shadowSeen.filter((s) => s.path.startsWith('/half/')).length;
      return seen > 0 ? seen : undefined;
    });
    expect(shadowSeen.some((s) => s.path.startsWith('/none/'))).toBe(false);
    // Binomial(100, 0.5): outside 25..75 with probability under 1e-6.
    expect(half).toBeGreaterThanOrEqual(25);
    expect(half).toBeLessThanOrEqual(75);
  });
});

describe('shadowing config', () => {
  it('a shadow Upstream that does not exist is named in the rejection', async () => {
    const bad = await makeConfigDir({
      'bad.yaml': [
        manifests.upstream('primary', [{ addr: '127.0.0.1', port: primary.port }]),
        manifests.virtualService('bad', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'primary' } } }, options: { shadowing: { upstream: { name: 'missing' }, percentage: 100 } } }] }),
      ],
    });
    try {
      const { execFile } = await import('node:child_process');
      const { fileURLToPath } = await import('node:url');
      const { NODE_FLAGS } = await import('@gatehouse/plugin-sdk/launch');
      const cli = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
      const out = await new Promise<{ code: number; text: string }>((resolve) =>
        execFile(process.execPath, [...NODE_FLAGS, cli, 'validate', bad.path], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 30_000 }, (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, text: stdout + stderr })),
      );
      expect(out.code).not.toBe(0);
      expect(out.text).toContain('options.shadowing.upstream');
      expect(out.text).toContain('missing');
    } finally {
      await bad.cleanup();
    }
  });
});
