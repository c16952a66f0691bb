// Response compression through `gatehouse run` (docs/compression.md): a Gateway's
// `httpGateway.options.gzip` compresses its routes' upstream responses as Envoy's compressor
// does (gzip, and brotli by the client's q-values), bodies checked by decompressing them with
// Node's zlib; what must not be compressed is not; a large response streams (the client reads
// before the upstream has finished, and a client that stops reading stops the upstream); the
// setting reloads.
import { randomBytes, createHash } from 'node:crypto';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:http2';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { brotliDecompressSync, createGunzip, gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { freePort } from '../support/ports.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

const MB = 1024 * 1024;
/** A 20 KB JSON document (the bench row's body). */
const JSON_BODY = JSON.stringify({ items: Array.from({ length: 250 }, (_, i) => ({ id: i, name: `item number ${i}`, tags: ['a', 'b', 'c'], price: i * 1.5 })) });
/** Random bytes: gzip cannot shrink them, so a compressed stream is as large as the plain one. */
const NOISE = randomBytes(256 * 1024);
const STREAM_TOTAL = 40 * MB;

let gw: GatehouseProcess;
let config: ConfigDir;
let upstream: TestServer;
let port: number;
/** Bytes of `/noise` the upstream has written so far. */
let produced = 0;
/** Ends `/slow` when called (set per request). */
let finishSlow: (() => void) | undefined;
let slowEnded = false;
/** `/noise` responses whose connection closed before the body was complete. */
let noiseCutShort = 0;

function gateway(gzip: object) {
  return { apiVersion: 'gateway.solo.io/v1', kind: 'Gateway', metadata: { name: 'gw', namespace: 'default' }, spec: { bindAddress: '127.0.0.1', bindPort: port, httpGateway: { options: { gzip } } } };
}

interface Raw {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** One request; the body as received (still encoded). */
function fetchRaw(path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method, headers: { host: 'app.test', ...headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.setTimeout(20_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  upstream = await startServer((req, res) => {
    req.resume();
    const url = req.url!;
    if (url === '/json') {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(JSON_BODY), etag: '"v1"' });
      return res.end(JSON_BODY);
    }
    if (url === '/weak') {
      res.writeHead(200, { 'content-type': 'application/json', etag: 'W/"v1"', vary: 'Origin' });
      return res.end(JSON_BODY);
    }
    if (url === '/transformed') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end('{"replaced":"by the template"}');
    }
    if (url === '/text') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      return res.end('plain text '.repeat(500));
    }
    if (url === '/png') {
      res.writeHead(200, { 'content-type': 'image/png' });
      return res.end(Buffer.alloc(5000, 1));
    }
    if (url === '/pre-encoded') {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      return res.end(gzipSync(JSON_BODY));
    }
    if (url === '/no-transform') {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-transform' });
      return res.end(JSON_BODY);
    }
    if (url === '/small') {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '10' });
      return res.end('0123456789');
    }
    if (url === '/range') {
      res.writeHead(206, { 'content-type': 'text/plain', 'content-range': 'bytes 0-99/5000' });
      return res.end('x'.repeat(100));
    }
    if (url === '/empty') {
      res.writeHead(204);
      return res.end();
    }
    if (url === '/slow') {
      // Half the body now, the rest only when the test has read the first part through the gateway.
      slowEnded = false;
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first part '.repeat(200_000));
      finishSlow = () => {
        slowEnded = true;
        res.end('the end');
      };
      return;
    }
    if (url === '/noise') {
      produced = 0;
      res.once('close', () => {
        if (!res.writableFinished) noiseCutShort++;
      });
      res.writeHead(200, { 'content-type': 'text/plain' });
      const pump = () => {
        while (produced < STREAM_TOTAL) {
          const block = NOISE;
          produced += block.length;
          if (!res.write(block)) return void res.once('drain', pump);
        }
        res.end();
      };
      return pump();
    }
    res.writeHead(404);
    res.end();
  });
  port = await freePort();
  config = await makeConfigDir({
    'upstreams.yaml': [manifests.upstream('app', [{ addr: '127.0.0.1', port: upstream.port }])],
    'vs.yaml': [
      manifests.virtualService('app', {
        domains: ['app.test'],
        routes: [
          // A response body template: the response is held whole for it, then compressed.
          { matchers: [{ prefix: '/transformed' }], options: { transformations: { responseTransformation: { transformationTemplate: { headers: { 'content-type': { text: 'text/plain' } }, body: { text: '{% for i in range(200) %}line {{ i }} of the transformed body\n{% endfor %}' } } } } }, routeAction: { single: { upstream: { name: 'app' } } } },
          { routeAction: { single: { upstream: { name: 'app' } } } },
        ],
      }),
    ],
    'gw.yaml': gateway({ compressionLevel: 'SPEED' }),
  });
  gw = await startGatehouse('run', ['--config-dir', config.path], { timeoutMs: 30_000 });
});

afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
  await config?.cleanup();
});

describe('gzip (Gateway httpGateway.options.gzip)', () => {
  it('compresses a 20 KB JSON response; the body decompresses to what the upstream sent, with Envoy\'s header changes', async () => {
    const reply = await fetchRaw('/json', { 'accept-encoding': 'gzip' });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-encoding']).toBe('gzip');
    expect(reply.headers['content-length']).toBeUndefined();
    expect(reply.headers.vary).toBe('accept-encoding');
    // A strong ETag names the uncompressed bytes: dropped (Envoy).
    expect(reply.headers.etag).toBeUndefined();
    expect(reply.body.length).toBeLessThan(Buffer.byteLength(JSON_BODY) / 3);
    expect(gunzipSync(reply.body).toString()).toBe(JSON_BODY);
  });

  it('picks brotli or gzip by the client\'s q-values; a weak ETag and the upstream\'s Vary stay', async () => {
    const br = await fetchRaw('/weak', { 'accept-encoding': 'gzip;q=0.5, br' });
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.headers.etag).toBe('W/"v1"');
    expect(br.headers.vary).toBe('Origin, accept-encoding');
    expect(brotliDecompressSync(br.body).toString()).toBe(JSON_BODY);
    const gzip = await fetchRaw('/weak', { 'accept-encoding': 'br;q=0.1, gzip;q=0.9' });
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gzip.body).toString()).toBe(JSON_BODY);
  });

  it('leaves the body alone for a client that accepts no coding, but still says Vary', async () => {
    for (const accept of [undefined, 'identity', 'gzip;q=0, br;q=0']) {
      const reply = await fetchRaw('/json', accept ? { 'accept-encoding': accept } : {});
      expect(reply.headers['content-encoding'], accept).toBeUndefined();
      expect(reply.headers.vary).toBe('accept-encoding');
      expect(reply.body.toString()).toBe(JSON_BODY);
    }
  });

  it('does not compress HEAD, 204, 206, unlisted types, encoded bodies, no-transform or short bodies', async () => {
    const accept = { 'accept-encoding': 'gzip, br' };
    const head = await fetchRaw('/json', accept, 'HEAD');
    expect(head.headers['content-encoding']).toBeUndefined();
    expect(head.headers['content-length']).toBe(String(Buffer.byteLength(JSON_BODY)));
    expect((await fetchRaw('/empty', accept)).status).toBe(204);
    const range = await fetchRaw('/range', accept);
    expect([range.status, range.headers['content-encoding'], range.body.toString()]).toEqual([206, undefined, 'x'.repeat(100)]);
    const png = await fetchRaw('/png', accept);
    expect([png.headers['content-encoding'], png.body.length]).toEqual([undefined, 5000]);
    const pre = await fetchRaw('/pre-encoded', accept);
    expect(pre.headers['content-encoding']).toBe('gzip');
    // Compressed once, by the upstream: one gunzip gives the document.
    expect(gunzipSync(pre.body).toString()).toBe(JSON_BODY);
    const noTransform = await fetchRaw('/no-transform', accept);
    expect([noTransform.headers['content-encoding'], noTransform.body.toString()]).toEqual([undefined, JSON_BODY]);
    const small = await fetchRaw('/small', accept);
    expect([small.headers['content-encoding'], small.body.toString()]).toEqual([undefined, '0123456789']);
  });

  it('compresses a body a response transformation rewrote (held whole, then encoded)', async () => {
    const reply = await fetchRaw('/transformed', { 'accept-encoding': 'gzip' });
    expect(reply.status).toBe(200);
    expect(reply.headers['content-encoding']).toBe('gzip');
    expect(reply.headers['content-length']).toBeUndefined();
    const text = gunzipSync(reply.body).toString();
    expect(text.split('\n').filter(Boolean)).toHaveLength(200);
    expect(text).toContain('line 199 of the transformed body');
  });

  it('over HTTP/2 (h2c) too: brotli frames that decompress to the document', async () => {
    const session = connect(`http://127.0.0.1:${port}`);
    try {
      const { headers, body } = await new Promise<{ headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        const stream = session.request({ ':path': '/json', ':authority': 'app.test', 'accept-encoding': 'br' });
        let head: Record<string, unknown> = {};
        const chunks: Buffer[] = [];
        stream.on('response', (h) => (head = h));
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => resolve({ headers: head, body: Buffer.concat(chunks) }));
        stream.on('error', reject);
        stream.end();
      });
      expect(headers[':status']).toBe(200);
      expect(headers['content-encoding']).toBe('br');
      expect(brotliDecompressSync(body).toString()).toBe(JSON_BODY);
    } finally {
      session.close();
    }
  });

  it('streams: the client decompresses the start of a response before the upstream has sent its end', async () => {
    const got = await new Promise<string>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, path: '/slow', headers: { host: 'app.test', 'accept-encoding': 'gzip' }, agent: false }, (res) => {
        expect(res.headers['content-encoding']).toBe('gzip');
        const gunzip = createGunzip();
        let text = '';
        let released = false;
        res.pipe(gunzip);
        gunzip.setEncoding('utf8');
        gunzip.on('data', (s: string) => {
          text += s;
          if (!released && text.length > 0) {
            // Bytes arrived while the upstream still holds its response open.
            released = true;
            expect(slowEnded).toBe(false);
            finishSlow!();
          }
        });
        gunzip.on('end', () => resolve(text));
        gunzip.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
    expect(got).toBe(`${'first part '.repeat(200_000)}the end`);
  });

  it('keeps backpressure: a client that stops reading stops the upstream, and the body is intact when it reads again', async () => {
    const digest = createHash('sha256');
    let received = 0;
    const done = new Promise<void>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, path: '/noise', headers: { host: 'app.test', 'accept-encoding': 'gzip' }, agent: false }, async (res) => {
        try {
          expect(res.headers['content-encoding']).toBe('gzip');
          res.pause();
          // The upstream stops once every buffer between it and the paused client is full.
          let last = -1;
          let steady = 0;
          await eventually(async () => {
            steady = produced === last ? steady + 1 : 0;
            last = produced;
            return steady >= 5;
          }, 30_000, 100);
          expect(produced).toBeGreaterThan(0);
          expect(produced).toBeLessThan(STREAM_TOTAL / 2);
          const gunzip = createGunzip();
          gunzip.on('data', (c: Buffer) => {
            received += c.length;
            digest.update(c);
          });
          gunzip.on('end', resolve);
          gunzip.on('error', reject);
          res.pipe(gunzip);
          res.resume();
        } catch (error) {
          reject(error);
        }
      });
      req.on('error', reject);
      req.end();
    });
    await done;
    expect(received).toBe(STREAM_TOTAL);
    const expected = createHash('sha256');
    for (let n = 0; n < STREAM_TOTAL; n += NOISE.length) expected.update(NOISE);
    expect(digest.digest('hex')).toBe(expected.digest('hex'));
  }, 60_000);

  it('a client that leaves mid-download: the upstream response is cut too, and the gateway goes on serving', async () => {
    const before = noiseCutShort;
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, path: '/noise', headers: { host: 'app.test', 'accept-encoding': 'br' }, agent: false }, (res) => {
        let got = 0;
        res.on('data', (c: Buffer) => {
          got += c.length;
          // Some compressed bytes in: leave.
          if (got > 256 * 1024) {
            req.destroy();
            resolve();
          }
        });
        res.on('error', () => {});
      });
      req.on('error', () => {});
      req.once('error', reject);
      req.end();
    });
    await eventually(async () => noiseCutShort > before, 15_000);
    const reply = await fetchRaw('/json', { 'accept-encoding': 'gzip' });
    expect(gunzipSync(reply.body).toString()).toBe(JSON_BODY);
  });

  it('takes a changed gzip setting on reload (contentType), and the route stops compressing what is no longer listed', async () => {
    expect((await fetchRaw('/text', { 'accept-encoding': 'gzip' })).headers['content-encoding']).toBe('gzip');
    await config.write('gw.yaml', gateway({ contentType: ['application/json'] }));
    await eventually(async () => (await fetchRaw('/text', { 'accept-encoding': 'gzip' })).headers['content-encoding'] === undefined);
    expect((await fetchRaw('/json', { 'accept-encoding': 'gzip' })).headers['content-encoding']).toBe('gzip');
    await config.write('gw.yaml', gateway({ compressionLevel: 'SPEED' }));
    await eventually(async () => (await fetchRaw('/text', { 'accept-encoding': 'gzip' })).headers['content-encoding'] === 'gzip');
  });

  it('rejects a bad gzip setting with its field path, and the last good one keeps serving', async () => {
    await config.write('gw.yaml', gateway({ windowBits: 20 }));
    await eventually(async () => {
      const all = JSON.parse((await send(gw.adminUrl, { path: '/config' })).body) as { resources: { kind: string; name: string; state: string; reasons: { path?: string }[] }[] };
      const status = all.resources.find((r) => r.kind === 'Gateway' && r.name === 'gw');
      return status?.state === 'Rejected' && status.reasons.some((r) => r.path === 'spec.httpGateway.options.gzip.windowBits');
    });
    const reply = await fetchRaw('/json', { 'accept-encoding': 'gzip' });
    expect(gunzipSync(reply.body).toString()).toBe(JSON_BODY);
    await config.write('gw.yaml', gateway({ compressionLevel: 'SPEED' }));
  });
});

describe("Gloo's gzip guide (installation/advanced_configuration/gzip.md), as printed", () => {
  const GUIDE = fileURLToPath(new URL('./fixtures/compression/gloo-gzip-guide.yaml', import.meta.url));
  const HELLO = "Hello, world! It's me. I've been wondering if after all these years you'd like to meet.";

  it('a direct response is plain text before the Gateway has gzip, and gzip after', async () => {
    const [gatewayDoc, vsDoc] = parseAllDocuments(await readFile(GUIDE, 'utf8')).map((d) => d.toJS() as { spec: Record<string, unknown> });
    const guidePort = await freePort();
    // The one change: a free port in place of 8080.
    const printed = { ...gatewayDoc!, spec: { ...gatewayDoc!.spec, bindPort: guidePort } };
    const before = { ...printed, spec: { ...printed.spec, httpGateway: {} } };
    const curl = async () => {
      const reply = await new Promise<Raw>((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port: guidePort, path: '/helloworld', headers: { 'accept-encoding': 'gzip' }, agent: false }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        });
        req.on('error', reject);
        req.end();
      });
      return reply;
    };
    await config.write('guide.yaml', [before, vsDoc!]);
    const plain = await eventually(async () => {
      const r = await curl().catch(() => undefined);
      return r?.status === 200 ? r : undefined;
    });
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body.toString()).toBe(HELLO);
    await config.write('guide.yaml', [printed, vsDoc!]);
    const compressed = await eventually(async () => {
      const r = await curl();
      return r.headers['content-encoding'] === 'gzip' ? r : undefined;
    });
    expect(gunzipSync(compressed.body).toString()).toBe(HELLO);
    // The guide's Gateway loads with a warning for what it sets that Gatehouse does not apply (useProxyProto), nothing rejected.
    const all = JSON.parse((await send(gw.adminUrl, { path: '/config' })).body) as { resources: { kind: string; name: string; state: string }[] };
    expect(all.resources.find((r) => r.kind === 'Gateway' && r.name === 'gateway-proxy')?.state).not.toBe('Rejected');
    await config.remove('guide.yaml');
  });
});
