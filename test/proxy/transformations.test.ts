/**
 * Gloo's transformations through a real `gatehouse run` and a real upstream (issue 31 item 1,
 * docs/transformations.md): the guide shapes that core/src/transform/guides.test.ts checks on the
 * engine, here end to end: a header from a JSON body, a body template, response transformations
 * (header-only, streamed; and body + status, held), the early stage before the regular one,
 * clearRouteCache re-routing, and the failures (400 for a body that is not JSON, 413 over the
 * buffer limit).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { Agent } from 'node:http';
import { rawRequest, send } from '../support/http.ts';
import { startEcho, startServer, type Echo, type TestServer } from '../support/upstream.ts';

let echo: TestServer;
let other: TestServer;
/** Answers 2 MiB of JSON-ish text: bigger than a transformation holds. */
let big: TestServer;
const BIG = 2 * 1024 * 1024;
let config: ConfigDir;
let gatehouse: GatehouseProcess;

const template = (t: object) => ({ transformationTemplate: t });

beforeAll(async () => {
  echo = await startEcho('echo');
  other = await startEcho('other');
  big = await startServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(BIG) });
    res.end(Buffer.alloc(BIG, 0x61));
  });
  const to = (name: string) => ({ single: { upstream: { name } } });
  config = await makeConfigDir({
    'transformations.yaml': [
      manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]),
      manifests.upstream('other', [{ addr: '127.0.0.1', port: other.port }]),
      manifests.upstream('big', [{ addr: '127.0.0.1', port: big.port }]),
      manifests.virtualService('t', {
        domains: ['*'],
        // The virtual host's transformation, inherited by routes without their own.
        options: { transformations: { requestTransformation: template({ headers: { 'x-from-host': { text: 'yes' } } }) } },
        routes: [
          {
            // _index.md "headers": color from the JSON body, foo from the bar header.
            matchers: [{ prefix: '/body-to-header' }],
            routeAction: to('echo'),
            options: { transformations: { requestTransformation: template({ headers: { color: { text: '{{ Favorites.Color }}' }, foo: { text: '{{ header("bar") }}' } } }) } },
          },
          {
            // A new request body from a template and an extractor on the path (extract_query_params).
            matchers: [{ prefix: '/body-template' }],
            routeAction: to('echo'),
            options: {
              transformations: {
                requestTransformation: template({
                  extractors: { id: { header: ':path', regex: '.*id=([0-9]+).*', subgroup: 1 } },
                  body: { text: '{"id": {{ id }}, "user": "{{ header("x-user") }}"}' },
                }),
              },
            },
          },
          {
            // inject_response_header: header only, the body streams.
            matchers: [{ prefix: '/response-header' }],
            routeAction: to('echo'),
            options: { transformations: { responseTransformation: template({ headers: { 'x-solo-resp-hdr1': { text: '{{ request_header("x-solo-hdr1") }}' } } }) } },
          },
          {
            // change_response_status + a body built from the upstream's JSON answer.
            matchers: [{ prefix: '/response-body' }],
            routeAction: to('echo'),
            options: {
              transformations: {
                responseTransformation: template({
                  headers: { ':status': { text: '{% if method == "POST" %}201{% else %}{{ header(":status") }}{% endif %}' } },
                  body: { text: '{"upstream": "{{ upstream }}", "method": "{{ method }}", "sent": {{ bodyBytes }}}' },
                }),
              },
            },
          },
          {
            // Early runs first; the regular stage sees what it set (and so would auth, between them).
            matchers: [{ prefix: '/staged' }],
            routeAction: to('echo'),
            options: {
              stagedTransformations: {
                early: { requestTransforms: [{ requestTransformation: template({ headers: { 'x-early': { text: 'early-{{ header("x-in") }}' } } }) }] },
                regular: { requestTransforms: [{ matcher: { prefix: '/staged/match' }, requestTransformation: template({ headers: { 'x-regular': { text: 'saw-{{ header("x-early") }}' } } }) }] },
              },
            },
          },
          {
            // clearRouteCache: the new path is routed again, to another upstream.
            matchers: [{ prefix: '/reroute' }],
            routeAction: to('echo'),
            options: { stagedTransformations: { early: { requestTransforms: [{ clearRouteCache: true, requestTransformation: template({ headers: { ':path': { text: '/moved{{ header(":path") }}' } } }) }] } } },
          },
          { matchers: [{ prefix: '/moved' }], routeAction: to('other'), options: { transformations: {} } },
          { matchers: [{ prefix: '/big-header' }], routeAction: to('big'), options: { transformations: { responseTransformation: template({ headers: { 'x-seen': { text: 'yes' } } }) } } },
          { matchers: [{ prefix: '/big-body' }], routeAction: to('big'), options: { transformations: { responseTransformation: template({ body: { text: '{{ length(body()) }}' } }) } } },
          { matchers: [{ prefix: '/' }], routeAction: to('echo') },
        ],
      }),
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', config.path], { timeoutMs: 60_000 });
}, 90_000);

afterAll(async () => {
  await gatehouse?.stop();
  await echo?.close();
  await other?.close();
  await big?.close();
  await config?.cleanup();
});

const echoed = (body: string) => JSON.parse(body) as Echo;

describe('transformations through gatehouse run', () => {
  it('a header from the JSON body and one from another header reach the upstream; the body is sent unchanged', async () => {
    const body = JSON.stringify({ Name: 'Gloo', Favorites: { Color: 'Blue' } });
    const reply = await send(gatehouse.url, { method: 'POST', path: '/body-to-header', headers: { 'content-type': 'application/json', bar: 'from-bar' }, body });
    expect(reply.status).toBe(200);
    const seen = echoed(reply.body);
    expect(seen.headers.color).toBe('Blue');
    expect(seen.headers.foo).toBe('from-bar');
    expect(seen.body).toBe(body);
    // The route has its own transformation: the virtual host's is not inherited.
    expect(seen.headers['x-from-host']).toBeUndefined();
  });

  it('a route without its own transformation inherits the virtual host\'s', async () => {
    const reply = await send(gatehouse.url, { path: '/plain' });
    expect(echoed(reply.body).headers['x-from-host']).toBe('yes');
  });

  it('a body template replaces the request body, with a content-length to match (chunked uploads too)', async () => {
    for (const chunked of [false, true]) {
      const headers: Record<string, string> = { 'x-user': 'ada', ...(chunked ? { 'transfer-encoding': 'chunked' } : {}) };
      const reply = await send(gatehouse.url, { method: 'POST', path: '/body-template?id=42', headers, body: 'ignored original body' });
      expect(reply.status, `chunked=${chunked}`).toBe(200);
      const seen = echoed(reply.body);
      expect(JSON.parse(seen.body)).toEqual({ id: 42, user: 'ada' });
      expect(seen.headers['content-length']).toBe(String(Buffer.byteLength(seen.body)));
    }
  });

  it('buffered bodies on one keep-alive connection, and pipelined: every request gets its own body upstream, none stalls', async () => {
    // The buffered body goes upstream as one buffer and the client's stream is emptied (proxy/filters/chain.ts commitBody): the next request on the connection must still be read.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < 12; i++) {
        const kind = i % 3;
        const body = JSON.stringify({ Favorites: { Color: `c${i}` }, pad: 'x'.repeat(i * 100) });
        if (kind === 0) {
          const seen = echoed((await send(gatehouse.url, { method: 'POST', path: `/body-template?id=${i}`, headers: { 'x-user': `u${i}` }, body, agent })).body);
          expect(JSON.parse(seen.body)).toEqual({ id: i, user: `u${i}` });
        } else if (kind === 1) {
          const seen = echoed((await send(gatehouse.url, { method: 'POST', path: '/body-to-header', headers: { 'content-type': 'application/json' }, body, agent })).body);
          expect(seen.headers.color).toBe(`c${i}`);
          expect(seen.body).toBe(body);
        } else {
          const seen = echoed((await send(gatehouse.url, { method: 'POST', path: '/plain', body, agent })).body);
          expect(seen.body).toBe(body);
        }
      }
    } finally {
      agent.destroy();
    }
    const post = (id: number, last: boolean) => `POST /body-template?id=${id} HTTP/1.1\r\nhost: t\r\nx-user: p${id}\r\ncontent-length: 5\r\n${last ? 'connection: close\r\n' : ''}\r\nhello`;
    const raw = await rawRequest(gatehouse.port, post(1, false) + post(2, true), 10_000);
    const replies = raw.split(/(?=HTTP\/1\.1 )/).filter(Boolean);
    expect(replies.map((r) => r.slice(9, 12))).toEqual(['200', '200']);
    const bodies = replies.map((r) => JSON.parse(echoed(r.slice(r.indexOf('\r\n\r\n') + 4)).body) as unknown);
    expect(bodies).toEqual([
      { id: 1, user: 'p1' },
      { id: 2, user: 'p2' },
    ]);
  });

  it('a header-only response transformation sets the header and keeps the body', async () => {
    const reply = await send(gatehouse.url, { path: '/response-header', headers: { 'x-solo-hdr1': 'val1' } });
    expect(reply.status).toBe(200);
    expect(reply.headers['x-solo-resp-hdr1']).toBe('val1');
    expect(echoed(reply.body).url).toBe('/response-header');
  });

  it('a response transformation rewrites the status and builds the body from the upstream\'s JSON', async () => {
    const post = await send(gatehouse.url, { method: 'POST', path: '/response-body', body: 'abc' });
    expect(post.status).toBe(201);
    expect(JSON.parse(post.body)).toEqual({ upstream: 'echo', method: 'POST', sent: 3 });
    expect(post.headers['content-length']).toBe(String(Buffer.byteLength(post.body)));
    const get = await send(gatehouse.url, { path: '/response-body' });
    expect(get.status).toBe(200);
    expect(JSON.parse(get.body)).toEqual({ upstream: 'echo', method: 'GET', sent: 0 });
  });

  it('the early stage runs before the regular one, which sees its result; a regular matcher that does not match skips it', async () => {
    const matched = echoed((await send(gatehouse.url, { path: '/staged/match', headers: { 'x-in': 'a' } })).body);
    expect(matched.headers['x-early']).toBe('early-a');
    expect(matched.headers['x-regular']).toBe('saw-early-a');
    const other = echoed((await send(gatehouse.url, { path: '/staged/else', headers: { 'x-in': 'b' } })).body);
    expect(other.headers['x-early']).toBe('early-b');
    expect(other.headers['x-regular']).toBeUndefined();
  });

  it('clearRouteCache: the transformed path is routed again (another upstream)', async () => {
    const reply = await send(gatehouse.url, { path: '/reroute/x?q=1' });
    expect(reply.status).toBe(200);
    const seen = echoed(reply.body);
    expect(seen.upstream).toBe('other');
    expect(seen.url).toBe('/moved/reroute/x?q=1');
  });

  it('a body that is not JSON for a template reading JSON: 400, nothing upstream', async () => {
    const reply = await send(gatehouse.url, { method: 'POST', path: '/body-to-header', headers: { 'content-type': 'application/json' }, body: 'not json{' });
    expect(reply.status).toBe(400);
    expect(reply.headers['x-gatehouse-error']).toBe('GH_TRANSFORM_BAD_JSON');
    expect(reply.body).toBe('bad request\n');
  });

  it('a body over the buffer limit (1 MiB): 413, declared or chunked', async () => {
    const big = Buffer.alloc(1024 * 1024 + 1, 0x61);
    for (const chunked of [false, true]) {
      const reply = await send(gatehouse.url, { method: 'POST', path: '/body-to-header', headers: chunked ? { 'transfer-encoding': 'chunked' } : {}, body: big });
      expect(reply.status, `chunked=${chunked}`).toBe(413);
      expect(reply.headers['x-gatehouse-error']).toBe('GH_TRANSFORM_BODY_TOO_LARGE');
    }
  });

  it('a 2 MiB response streams through a header-only response transformation, whole', async () => {
    const reply = await send(gatehouse.url, { path: '/big-header' });
    expect(reply.status).toBe(200);
    expect(reply.headers['x-seen']).toBe('yes');
    expect(reply.body.length).toBe(BIG);
  });

  it('a response over the 1 MiB a body transformation holds: 500 GH_FILTER_RESPONSE_TOO_LARGE, and the gateway keeps serving', async () => {
    const reply = await send(gatehouse.url, { path: '/big-body' });
    expect(reply.status).toBe(500);
    expect(reply.headers['x-gatehouse-error']).toBe('GH_FILTER_RESPONSE_TOO_LARGE');
    expect((await send(gatehouse.url, { path: '/plain' })).status).toBe(200);
  });
});
