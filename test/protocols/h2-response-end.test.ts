/**
 * How an HTTP/2 client's response ends when the upstream speaks HTTP/1.1 (core/src/proxy/request/
 * forward.ts `sendHead`): a chunked body may carry trailers, which reach the client as an HTTP/2
 * trailer block; a body with a Content-Length cannot, so the stream ends with its last DATA frame
 * instead of waiting for trailers (the wait cost a JavaScript round trip and one more, empty,
 * DATA frame per response). Real `gatehouse run`, a real Node HTTP/1.1 upstream, node:http2 client.
 */
import { connect, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';

let upstream: TestServer;
let config: ConfigDir;
let gatehouse: GatehouseProcess;
let session: ClientHttp2Session;

beforeAll(async () => {
  upstream = await startServer((req, res) => {
    req.resume().on('end', () => {
      if (req.url === '/chunked') {
        res.writeHead(200, { 'content-type': 'text/plain', trailer: 'x-checksum' });
        res.write('part one, ');
        res.addTrailers({ 'x-checksum': 'c0ffee' });
        res.end('part two');
      } else if (req.url === '/empty') {
        res.writeHead(204).end();
      } else {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '11' }).end('hello world');
      }
    });
  });
  config = await makeConfigDir({
    'app.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      manifests.virtualService('app', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'up' } } } }] }),
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', config.path]);
  session = connect(gatehouse.url);
}, 60_000);

afterAll(async () => {
  session?.close();
  await gatehouse?.stop();
  await upstream?.close();
  await config?.cleanup();
});

/** One request on the h2c session: status, body, and the trailer block if one came. */
function get(path: string): Promise<{ status: number; body: string; trailers: IncomingHttpHeaders | undefined }> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':path': path, te: 'trailers' });
    let status = 0;
    let body = '';
    let trailers: IncomingHttpHeaders | undefined;
    stream.on('response', (headers) => (status = Number(headers[':status'])));
    stream.on('trailers', (headers) => (trailers = headers));
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => (body += chunk));
    stream.on('end', () => resolve({ status, body, trailers }));
    stream.on('error', reject);
  });
}

describe('HTTP/2 responses from an HTTP/1.1 upstream', () => {
  it('a Content-Length body ends the stream whole, with no trailer block', async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, () => get('/fixed')));
    for (const answer of answers) expect(answer).toEqual({ status: 200, body: 'hello world', trailers: undefined });
  });

  it('a chunked body keeps its trailers: they reach the client as an HTTP/2 trailer block', async () => {
    const answer = await get('/chunked');
    expect(answer.status).toBe(200);
    expect(answer.body).toBe('part one, part two');
    expect(answer.trailers?.['x-checksum']).toBe('c0ffee');
  });

  it('a response without a body still ends its stream', async () => {
    expect(await get('/empty')).toEqual({ status: 204, body: '', trailers: undefined });
  });
});
