// Admin API, metrics, access log (SPEC 8) and malformed downstream requests, through one
// real `gatehouse run` process.
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, rawRequest, send } from '../support/http.ts';
import { startEcho, startServer, type Echo, type TestServer } from '../support/upstream.ts';

let gw: GatehouseProcess;
let config: ConfigDir;
let echo: TestServer;
let slow: TestServer;

beforeAll(async () => {
  echo = await startEcho('ops');
  // Answers after 300 ms, streaming the body slowly: for clients that go away mid-response.
  slow = await startServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('first chunk\n');
    const timer = setTimeout(() => res.end('last chunk\n'), 300);
    res.on('close', () => clearTimeout(timer));
  });
  config = await makeConfigDir({
    'ops.yaml': [
      manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]),
      manifests.upstream('slow', [{ addr: '127.0.0.1', port: slow.port }]),
      manifests.virtualService('ops', {
        domains: ['ops.test'],
        routes: [
          { name: 'ops-slow', matchers: [{ prefix: '/slow' }], routeAction: { single: { upstream: { name: 'slow' } } } },
          { name: 'ops-route', matchers: [{ prefix: '/ops' }], routeAction: { single: { upstream: { name: 'echo' } } } },
        ],
      }),
    ],
  });
  gw = await startGatehouse('run', ['--config-dir', config.path]);
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([echo?.close(), slow?.close(), config?.cleanup()]);
});

async function metricsText(): Promise<string> {
  const reply = await send(gw.adminUrl, { path: '/metrics' });
  expect(reply.status).toBe(200);
  expect(reply.headers['content-type']).toMatch(/^text\/plain/);
  return reply.body;
}

/** The value of one sample line, e.g. `name{a="b"}`; undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('admin API', () => {
  it('/healthz and /readyz answer 200 once the configuration is loaded', async () => {
    const health = await send(gw.adminUrl, { path: '/healthz' });
    expect(health.status).toBe(200);
    const ready = await send(gw.adminUrl, { path: '/readyz' });
    expect(ready.status).toBe(200);
    expect((await send(gw.adminUrl, { path: '/nope' })).status).toBe(404);
  });

  it('/metrics counts requests by virtual host, route and status', async () => {
    const series = 'gatehouse_requests_total{virtual_host="default/ops",route="ops-route",status="200"}';
    const before = sample(await metricsText(), series) ?? 0;
    for (let i = 0; i < 3; i++) expect((await send(gw.url, { path: '/ops/count', headers: { host: 'ops.test' } })).status).toBe(200);
    expect((await send(gw.url, { path: '/none', headers: { host: 'ops.test' } })).status).toBe(404);
    // The counter is bumped when the response closes, just after the client has it.
    const text = await eventually(async () => {
      const t = await metricsText();
      return sample(t, series) === before + 3 && t;
    });
    expect(sample(text, 'gatehouse_requests_total{virtual_host="default/ops",route="",status="404"}')).toBeGreaterThanOrEqual(1);
  });

  it('/metrics has an upstream latency histogram and config reload counters', async () => {
    await send(gw.url, { path: '/ops/latency', headers: { host: 'ops.test' } });
    const text = await metricsText();
    expect(text).toContain('# TYPE gatehouse_upstream_latency_seconds histogram');
    expect(sample(text, 'gatehouse_upstream_latency_seconds_count{upstream="default/echo"}')).toBeGreaterThanOrEqual(1);
    expect(text).toMatch(/gatehouse_upstream_latency_seconds_bucket\{le="0\.005",upstream="default\/echo"\} \d+/);
    expect(sample(text, 'gatehouse_config_reloads_total{result="ok"}')).toBeGreaterThanOrEqual(1);
    expect(text).toContain('gatehouse_config_rejected_resources');
  });

  it('/config lists resources with their status and the effective routes', async () => {
    const reply = await send(gw.adminUrl, { path: '/config' });
    expect(reply.status).toBe(200);
    const body = JSON.parse(reply.body) as {
      generation: number;
      resources: { kind: string; namespace: string; name: string; state: string; serving: string; file: string; line: number }[];
      routes: { virtualService: string; domains: string[]; routes: { name: string; destination: { upstream: string; hosts: string[] } }[] }[];
    };
    expect(body.generation).toBeGreaterThanOrEqual(1);
    const vs = body.resources.find((r) => r.kind === 'VirtualService' && r.name === 'ops')!;
    expect(vs).toMatchObject({ namespace: 'default', state: 'Accepted', serving: 'current' });
    expect(vs.file).toMatch(/ops\.yaml$/);
    expect(body.resources.filter((r) => r.kind === 'Upstream').map((r) => r.name).sort()).toEqual(['echo', 'slow']);
    const routes = body.routes.find((r) => r.virtualService === 'default/ops')!;
    expect(routes.domains).toEqual(['ops.test']);
    expect(routes.routes.map((r) => r.name)).toEqual(['ops-slow', 'ops-route']);
    expect(routes.routes[1]!.destination).toEqual({ upstream: 'default/echo', hosts: [`http://127.0.0.1:${echo.port}`] });
  });
});

describe('access log', () => {
  it('writes one JSON line per request with method, path, status, duration, route and upstream', async () => {
    await send(gw.url, { method: 'DELETE', path: '/ops/logged?x=1', headers: { host: 'ops.test', 'x-request-id': 'log-me' } });
    const line = await gw.waitForLog((l) => l.msg === 'access' && l.reqId === 'log-me');
    expect(line).toMatchObject({ method: 'DELETE', path: '/ops/logged?x=1', status: 200, route: 'ops-route', virtualHost: 'default/ops', upstream: `http://127.0.0.1:${echo.port}` });
    expect(typeof line.durationMs).toBe('number');
    expect(line.durationMs as number).toBeGreaterThan(0);
    expect(gw.logs.filter((l) => l.msg === 'access' && l.reqId === 'log-me')).toHaveLength(1);
  });

  it('logs requests the gateway answers itself', async () => {
    await send(gw.url, { path: '/unrouted-for-log', headers: { host: 'nobody.test' } });
    const line = await gw.waitForLog((l) => l.msg === 'access' && l.path === '/unrouted-for-log');
    expect(line).toMatchObject({ method: 'GET', status: 404 });
    expect(line.route).toBeUndefined();
  });
});

describe('malformed requests', () => {
  const ok = 'GET /ops/alive HTTP/1.1\r\nHost: ops.test\r\nConnection: close\r\n\r\n';
  const cases: [string, string, RegExp][] = [
    ['garbage request line', 'GARBAGE\r\n\r\n', /^HTTP\/1\.1 400 /],
    ['space inside the target', 'GET /a b HTTP/1.1\r\nHost: ops.test\r\n\r\n', /^HTTP\/1\.1 400 /],
    ['unknown HTTP version', 'GET / HTTP/9.9\r\nHost: ops.test\r\n\r\n', /^HTTP\/1\.1 4\d\d /],
    ['space in a header name', 'GET /ops HTTP/1.1\r\nHost: ops.test\r\nBad Header: v\r\n\r\n', /^HTTP\/1\.1 400 /],
    ['control character in a header value', 'GET /ops HTTP/1.1\r\nHost: ops.test\r\nX-Val: a\x01b\r\n\r\n', /^HTTP\/1\.1 400 /],
    ['header line without a colon', 'GET /ops HTTP/1.1\r\nHost: ops.test\r\nnocolon\r\n\r\n', /^HTTP\/1\.1 400 /],
    ['oversized headers', `GET /ops HTTP/1.1\r\nHost: ops.test\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, /^HTTP\/1\.1 431 /],
    ['non-numeric Content-Length', 'POST /ops HTTP/1.1\r\nHost: ops.test\r\nContent-Length: abc\r\n\r\n', /^HTTP\/1\.1 400 /],
    ['Content-Length with Transfer-Encoding', 'POST /ops HTTP/1.1\r\nHost: ops.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', /^HTTP\/1\.1 400 /],
    ['bad chunk size', 'POST /ops HTTP/1.1\r\nHost: ops.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', /^HTTP\/1\.1 400 /],
    ['HTTP/1.1 without Host', 'GET /ops HTTP/1.1\r\nConnection: close\r\n\r\n', /^HTTP\/1\.1 400 /],
    ['two Host headers', 'GET /ops HTTP/1.1\r\nHost: ops.test\r\nHost: other.test\r\nConnection: close\r\n\r\n', /^HTTP\/1\.1 400 [^]*x-gatehouse-error: GH_BAD_REQUEST/],
    ['a target that is not a path', 'GET ops HTTP/1.1\r\nHost: ops.test\r\nConnection: close\r\n\r\n', /^HTTP\/1\.1 400 /],
    ['asterisk-form', 'OPTIONS * HTTP/1.1\r\nHost: ops.test\r\nConnection: close\r\n\r\n', /^HTTP\/1\.1 400 [^]*x-gatehouse-error: GH_BAD_REQUEST/],
    ['absolute-form with userinfo', 'GET http://user@ops.test/ops HTTP/1.1\r\nHost: ops.test\r\nConnection: close\r\n\r\n', /^HTTP\/1\.1 400 /],
    ['CONNECT', 'CONNECT ops.test:443 HTTP/1.1\r\nHost: ops.test:443\r\n\r\n', /^HTTP\/1\.1 405 [^]*x-gatehouse-error: GH_BAD_REQUEST/],
  ];

  it.each(cases)('%s gets a 4xx', async (_name, text, expected) => {
    const answer = await rawRequest(gw.port, text);
    expect(answer).toMatch(expected);
    // The gateway is still there and serving.
    expect(await rawRequest(gw.port, ok)).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('absolute-form targets route by their authority, which replaces Host', async () => {
    const answer = await rawRequest(gw.port, 'GET http://OPS.test:8080/ops/abs?q=1 HTTP/1.1\r\nHost: elsewhere.test\r\nConnection: close\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    const seen = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as Echo;
    expect(seen.url).toBe('/ops/abs?q=1');
    expect(seen.headers.host).toBe('ops.test:8080');
  });

  it('clients that disconnect mid-upload or mid-response do not hurt the gateway', async () => {
    // Mid-upload: promise 1 MB, send a little, hang up.
    await rawRequest(gw.port, 'POST /ops/upload HTTP/1.1\r\nHost: ops.test\r\nContent-Length: 1000000\r\n\r\npartial', 200);
    // Mid-response: read the first chunk, then hang up.
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest({ port: gw.port, host: '127.0.0.1', path: '/slow', headers: { host: 'ops.test' }, agent: false }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (error) => (error.message.includes('socket hang up') || error.message.includes('aborted') ? undefined : reject(error)));
      req.end();
    });
    const line = await gw.waitForLog((l) => l.msg === 'access' && l.path === '/slow');
    // The client left before the end: the access log still has the request, with its status.
    expect(line.status).toBe(200);
    expect(gw.child.exitCode).toBeNull();
    expect((await send(gw.url, { path: '/ops/after', headers: { host: 'ops.test' } })).status).toBe(200);
  });
});
