// Envoy's buffer filter as Gloo configures it, through `gatehouse run` (docs/compression.md,
// "Request buffering"): the Gateway's `httpGateway.options.buffer` for its listener, and
// `bufferPerRoute` on a virtual host or route (a limit, or `disabled`). A buffered request
// reaches the upstream only once its whole body has arrived, with its length; a body over the
// limit gets 413 and never reaches the upstream; a route with buffering off streams.
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually } from '../support/http.ts';
import { freePort } from '../support/ports.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

interface Seen {
  path: string;
  bytes: number;
  sha256: string;
  contentLength: string | undefined;
  /** Whether the client had finished sending when the upstream got the request's headers. */
  clientDone: boolean;
}

let gw: GatehouseProcess;
let config: ConfigDir;
let upstream: TestServer;
let port: number;
const seen: Seen[] = [];
let clientDone = false;
/** Set when the upstream gets a request's headers. */
let started = false;

beforeAll(async () => {
  upstream = await startServer((req, res) => {
    const arrivedAfterClient = clientDone;
    started = true;
    const hash = createHash('sha256');
    let bytes = 0;
    req.on('data', (c: Buffer) => {
      hash.update(c);
      bytes += c.length;
    });
    req.on('end', () => {
      seen.push({ path: req.url!, bytes, sha256: hash.digest('hex'), contentLength: req.headers['content-length'], clientDone: arrivedAfterClient });
      res.end('ok');
    });
  });
  port = await freePort();
  const up = { single: { upstream: { name: 'up' } } };
  config = await makeConfigDir({
    'up.yaml': manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
    'vs.yaml': [
      manifests.virtualService('buffered', {
        domains: ['buffered.test'],
        options: { bufferPerRoute: { buffer: { maxRequestBytes: 50_000 } } },
        routes: [
          { matchers: [{ prefix: '/big' }], options: { bufferPerRoute: { buffer: { maxRequestBytes: 200_000 } } }, routeAction: up },
          { matchers: [{ prefix: '/off' }], options: { bufferPerRoute: { disabled: true } }, routeAction: up },
          { matchers: [{ prefix: '/' }], routeAction: up },
        ],
      }),
      manifests.virtualService('plain', { domains: ['plain.test'], routes: [{ matchers: [{ prefix: '/' }], routeAction: up }] }),
    ],
    'gw.yaml': { apiVersion: 'gateway.solo.io/v1', kind: 'Gateway', metadata: { name: 'gw', namespace: 'default' }, spec: { bindAddress: '127.0.0.1', bindPort: port, httpGateway: { options: { buffer: { maxRequestBytes: 1000 } } } } },
  });
  gw = await startGatehouse('run', ['--config-dir', config.path], { timeoutMs: 30_000 });
});

afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
  await config?.cleanup();
});

const body = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 13 + 7) & 0xff));
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** POSTs `data` in `parts` chunked writes (no content-length unless `declared`); a pause between parts when `slow`. */
function post(host: string, path: string, data: Buffer, options: { parts?: number; declared?: boolean; slow?: boolean; untilUpstream?: boolean } = {}): Promise<{ status: number; error: string | undefined; body: string }> {
  clientDone = false;
  started = false;
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { host };
    if (options.declared) headers['content-length'] = String(data.length);
    const req = httpRequest({ host: '127.0.0.1', port, path, method: 'POST', headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (s: string) => (text += s));
      res.on('end', () => resolve({ status: res.statusCode!, error: res.headers['x-gatehouse-error'] as string | undefined, body: text }));
    });
    req.on('error', reject);
    const parts = options.parts ?? 4;
    const size = Math.ceil(data.length / parts);
    void (async () => {
      for (let i = 0; i < parts; i++) {
        if (!req.write(data.subarray(i * size, (i + 1) * size))) await new Promise((r) => req.once('drain', r));
        // A slow client: the gateway has the headers and part of the body for a while.
        if (options.slow && i < parts - 1) await new Promise((r) => setTimeout(r, 150));
        // The rest is sent only once the upstream has the request: a gateway that held the body would never get it.
        if (options.untilUpstream && i === 0) await eventually(async () => started, 10_000, 20);
      }
      clientDone = true;
      req.end();
    })().catch(reject);
  });
}

describe('bufferPerRoute and the Gateway buffer', () => {
  it('holds the request until its whole body is in, then sends it with its length', async () => {
    const data = body(40_000);
    const before = seen.length;
    const reply = await post('buffered.test', '/', data, { slow: true });
    expect(reply.status).toBe(200);
    const got = seen.slice(before);
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({ bytes: 40_000, sha256: sha(data), contentLength: '40000', clientDone: true });
  });

  it('answers 413 over the virtual host limit; the upstream never sees the request', async () => {
    const before = seen.length;
    const chunked = await post('buffered.test', '/', body(60_000));
    expect([chunked.status, chunked.error]).toEqual([413, 'GH_BUFFER_TOO_LARGE']);
    const declared = await post('buffered.test', '/', body(60_000), { declared: true });
    expect([declared.status, declared.error]).toEqual([413, 'GH_BUFFER_TOO_LARGE']);
    expect(seen.length).toBe(before);
  });

  it('a route\'s own limit wins over the virtual host\'s', async () => {
    const data = body(150_000);
    const before = seen.length;
    expect((await post('buffered.test', '/big', data)).status).toBe(200);
    expect(seen.slice(before)[0]).toMatchObject({ bytes: 150_000, sha256: sha(data) });
    expect((await post('buffered.test', '/big', body(250_000))).status).toBe(413);
  });

  it('disabled on a route: a body far over every limit streams through as it comes', async () => {
    const data = body(3_000_000);
    const before = seen.length;
    const reply = await post('buffered.test', '/off', data, { parts: 8, untilUpstream: true });
    expect(reply.status).toBe(200);
    // The upstream had the request before the client finished sending: nothing held it.
    expect(seen.slice(before)[0]).toMatchObject({ bytes: 3_000_000, sha256: sha(data), contentLength: undefined, clientDone: false });
  });

  it('the Gateway\'s buffer applies where no virtual host or route sets one', async () => {
    const before = seen.length;
    expect((await post('plain.test', '/', body(900))).status).toBe(200);
    expect((await post('plain.test', '/', body(1001))).status).toBe(413);
    expect(seen.length).toBe(before + 1);
  });
});
