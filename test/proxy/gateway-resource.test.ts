// Gloo's Gateway resource through `gatehouse run` (docs/gateway.md): listeners from Gateways,
// VirtualService selection per listener, Envoy access-log formats (string and JSON) checked
// line by line, a bad format rejected with its field path while the last good one keeps
// logging, a rebind on reload that finishes the request in flight, and `gatehouse validate`.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { freePort } from '../support/ports.ts';
import { startEcho, startServer, type TestServer } from '../support/upstream.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));

let gw: GatehouseProcess;
let config: ConfigDir;
let a: TestServer;
let b: TestServer;
let slow: TestServer;
let portA: number;
let portB: number;
/** Requests the slow upstream has received. */
let slowSeen = 0;

const STRING_FORMAT = '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %BYTES_SENT% %DURATION% "%REQ(USER-AGENT):8%" "%UPSTREAM_HOST%" %RESP(X-UPSTREAM)% %REQUEST_DURATION% 100%%\n';
/** One line of {@link STRING_FORMAT}. */
const LINE = /^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)\] "(\S+) (\S+) (\S+)" (\d+) (\S+) (\d+) "([^"]*)" "([^"]*)" (\S+) - 100%$/;

function vs(name: string, labels: Record<string, string>, domain: string, upstream: string) {
  const m = manifests.virtualService(name, { domains: [domain], routes: [{ name: 'all', matchers: [{ prefix: '/slow' }], routeAction: { single: { upstream: { name: 'slow' } } } }, { name: 'main', routeAction: { single: { upstream: { name: upstream } } } }] });
  return { ...m, metadata: { ...m.metadata, labels } };
}

function gateway(name: string, spec: object) {
  return { apiVersion: 'gateway.solo.io/v1', kind: 'Gateway', metadata: { name, namespace: 'default' }, spec };
}

function gatewayA(format: string, port = portA) {
  return gateway('gw-a', {
    bindAddress: '127.0.0.1',
    bindPort: port,
    httpGateway: { virtualServiceSelector: { team: 'a' } },
    options: { accessLoggingService: { accessLog: [{ fileSink: { path: join(config.path, '..', `${logName}-a.log`), stringFormat: format } }] } },
  });
}

function gatewayB(port: number, maxHeaders = 20) {
  return gateway('gw-b', {
    bind_address: '127.0.0.1',
    bind_port: port,
    http_gateway: { virtual_services: [{ name: 'vb' }], options: { http_connection_manager_settings: { max_headers_count: maxHeaders, server_name: 'gw-b', xff_num_trusted_hops: 1 } } },
    options: { access_logging_service: { access_log: [{ file_sink: { path: join(config.path, '..', `${logName}-b.log`), json_format: { method: '%REQ(:METHOD)%', status: '%RESPONSE_CODE%', upstream: '%UPSTREAM_HOST%', nested: { path: '%REQ(:PATH)%', missing: '%REQ(X-NOPE)%' }, fixed: 7 } } }] } },
  });
}

const logName = `gatehouse-gw-${process.pid}-${Date.now()}`;
const logLines = async (which: 'a' | 'b') => (await readFile(join(config.path, '..', `${logName}-${which}.log`), 'utf8').catch(() => '')).split('\n').filter(Boolean);

async function statusOf(kind: string, name: string): Promise<{ state: string; serving: string; reasons: { code: string; path?: string; message: string; severity: string }[] }> {
  const all = (JSON.parse((await send(gw.adminUrl, { path: '/config' })).body) as { resources: { kind: string; name: string; state: string; serving: string; reasons: never[] }[] }).resources;
  return all.find((r) => r.kind === kind && r.name === name)!;
}

beforeAll(async () => {
  [a, b] = await Promise.all([startEcho('a'), startEcho('b')]);
  slow = await startServer((req, res) => {
    slowSeen++;
    req.resume();
    setTimeout(() => res.end('slow done'), 1_000);
  });
  [portA, portB] = await Promise.all([freePort(), freePort()]);
  config = await makeConfigDir({
    'upstreams.yaml': [
      manifests.upstream('a', [{ addr: '127.0.0.1', port: a.port }]),
      manifests.upstream('b', [{ addr: '127.0.0.1', port: b.port }]),
      manifests.upstream('slow', [{ addr: '127.0.0.1', port: slow.port }]),
    ],
    'vs.yaml': [vs('va', { team: 'a' }, 'a.test', 'a'), vs('vb', { team: 'b' }, 'b.test', 'b')],
  });
  await config.write('gw-a.yaml', gatewayA(STRING_FORMAT));
  await config.write('gw-b.yaml', gatewayB(portB));
  gw = await startGatehouse('run', ['--config-dir', config.path], { timeoutMs: 30_000 });
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([a?.close(), b?.close(), slow?.close()]);
  await Promise.all(['a', 'b'].map((w) => import('node:fs/promises').then((fs) => fs.rm(join(config.path, '..', `${logName}-${w}.log`), { force: true }))));
  await config?.cleanup();
});

describe('Gateway resources', () => {
  it('bind one listener each, in place of --port, and report them in the listening line', async () => {
    const listeners = gw.listening.listeners as { gateway: string; port: number }[];
    expect(listeners.map((l) => [l.gateway, l.port]).sort()).toEqual([['default/gw-a', portA], ['default/gw-b', portB]]);
    // The --port 0 listener is not bound while Gateways define the listeners.
    expect(gw.port).toBe(portA);
  });

  it('serve only the VirtualServices each Gateway selects (labels on one, a reference list on the other)', async () => {
    const on = (port: number, host: string) => send(`http://127.0.0.1:${port}`, { headers: { host } });
    expect((await on(portA, 'a.test')).headers['x-upstream']).toBe('a');
    expect((await on(portA, 'b.test')).status).toBe(404);
    expect((await on(portB, 'b.test')).headers['x-upstream']).toBe('b');
    expect((await on(portB, 'a.test')).status).toBe(404);
  });

  it('honours httpConnectionManagerSettings it has a knob for, and warns about the rest by name', async () => {
    const many = Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`x-h${i}`, 'v']));
    expect((await send(`http://127.0.0.1:${portB}`, { headers: { host: 'b.test', ...many } })).status).toBe(431);
    expect((await send(`http://127.0.0.1:${portA}`, { headers: { host: 'a.test', ...many } })).status).toBe(200);
    // server_name (a proto name) is honoured on its own listener only.
    expect((await send(`http://127.0.0.1:${portB}`, { headers: { host: 'b.test' } })).headers.server).toBe('gw-b');
    expect((await send(`http://127.0.0.1:${portA}`, { headers: { host: 'a.test' } })).headers.server).toBeUndefined();
    const status = await statusOf('Gateway', 'gw-b');
    expect(status.state).toBe('Warning');
    // gw-b is written with proto names: the warning is at the JSON-name path (config/proto-names.ts renames them), naming the field.
    const reason = status.reasons.find((r) => r.path === 'spec.httpGateway.options.httpConnectionManagerSettings.xffNumTrustedHops');
    expect(reason?.code).toBe('GH_CONFIG_IGNORED');
    expect(reason?.message).toMatch(/^xffNumTrustedHops is not applied: /);
    expect(status.reasons.some((r) => r.path?.endsWith('.serverName'))).toBe(false);
  });

  it('writes the custom string format line by line, and warns about the Envoy operator it has no value for', async () => {
    const before = (await logLines('a')).length;
    const reply = await send(`http://127.0.0.1:${portA}`, { path: '/p?q=1', headers: { host: 'a.test', 'user-agent': 'curl/8.5.0-long-agent' } });
    expect(reply.status).toBe(200);
    // Lines are written in batches: wait for this request's line (every line must parse).
    const line = await eventually(async () => (await logLines('a')).slice(before).find((l) => l.includes(' /p?q=1 ')));
    for (const l of await logLines('a')) expect(l).toMatch(LINE);
    const m = LINE.exec(line);
    expect(m, line).not.toBeNull();
    const [, start, method, path, protocol, code, bytes, , agent, upstream, respHeader] = m!;
    expect(Math.abs(Date.parse(start!) - Date.now())).toBeLessThan(60_000);
    expect([method, path, protocol, code]).toEqual(['GET', '/p?q=1', 'HTTP/1.1', '200']);
    expect(bytes).toBe(String(Buffer.byteLength(reply.body)));
    expect(agent).toBe('curl/8.5');
    expect(upstream).toBe(`127.0.0.1:${a.port}`);
    expect(respHeader).toBe('a');
    const status = await statusOf('Gateway', 'gw-a');
    expect(status.reasons.some((r) => r.code === 'GH_CONFIG_IGNORED' && r.message.includes('%REQUEST_DURATION%'))).toBe(true);
  });

  it('writes JSON formats with typed values, nested objects and null for missing values', async () => {
    await send(`http://127.0.0.1:${portB}`, { path: '/j', headers: { host: 'b.test' } });
    const line = await eventually(async () => (await logLines('b')).find((l) => l.includes('"/j"')));
    expect(JSON.parse(line)).toEqual({ method: 'GET', status: 200, upstream: `127.0.0.1:${b.port}`, nested: { path: '/j', missing: null }, fixed: 7 });
  });

  it('rejects an unknown format operator with its field path; the last good format keeps logging', async () => {
    await config.write('gw-a.yaml', gatewayA('%REQ(:METHOD)% %NOT_AN_OPERATOR%\n'));
    const status = await eventually(async () => {
      const s = await statusOf('Gateway', 'gw-a');
      return s.state === 'Rejected' && s;
    });
    expect(status.serving).toBe('last-accepted');
    const reason = status.reasons.find((r) => r.code === 'GH_CONFIG_BAD_ACCESS_LOG_FORMAT')!;
    expect(reason.path).toBe('spec.options.accessLoggingService.accessLog[0].fileSink.stringFormat');
    expect(reason.message).toContain('%NOT_AN_OPERATOR%');
    await send(`http://127.0.0.1:${portA}`, { path: '/after-bad', headers: { host: 'a.test' } });
    const line = await eventually(async () => (await logLines('a')).find((l) => l.includes('/after-bad')));
    expect(line).toMatch(LINE);
    expect(line).toContain('"GET /after-bad HTTP/1.1" 200');
  });

  it('a new format is swapped in on reload', async () => {
    await config.write('gw-a.yaml', gatewayA('%REQ(:METHOD)% %REQ(:PATH)% %RESPONSE_CODE%'));
    await eventually(async () => (await statusOf('Gateway', 'gw-a')).state !== 'Rejected');
    // Requests until one is logged in the new format (the reload reaches the listener a moment after the status).
    await eventually(async () => {
      await send(`http://127.0.0.1:${portA}`, { path: '/new-format', headers: { host: 'a.test' } });
      return (await logLines('a')).includes('GET /new-format 200');
    });
  });

  it('a changed connection setting on the same port rebinds beside the old socket: no request lost, the one in flight finishes', async () => {
    const inFlight = send(`http://127.0.0.1:${portB}`, { path: '/slow', headers: { host: 'b.test' } });
    let stop = false;
    const failures: string[] = [];
    let served = 0;
    const loop = (async () => {
      while (!stop) {
        await send(`http://127.0.0.1:${portB}`, { headers: { host: 'b.test' } }).then(
          (r) => (r.status === 200 ? served++ : failures.push(`status ${r.status}`)),
          (error: Error) => failures.push(error.message),
        );
      }
    })();
    const binds = gw.logs.filter((l) => l.msg === 'Gateway listener bound').length;
    await config.write('gw-b.yaml', gatewayB(portB, 10));
    await gw.waitForLog((l) => l.msg === 'Gateway listener bound' && l.port === portB && gw.logs.filter((x) => x.msg === 'Gateway listener bound').length > binds, 15_000);
    const reply = await inFlight;
    stop = true;
    await loop;
    expect([reply.status, reply.body]).toEqual([200, 'slow done']);
    expect(failures).toEqual([]);
    expect(served).toBeGreaterThan(0);
    const fifteen = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`x-h${i}`, 'v']));
    await eventually(async () => (await send(`http://127.0.0.1:${portB}`, { headers: { host: 'b.test', ...fifteen } })).status === 431);
  });

  it('a Gateway moved to another port binds it, finishes the request in flight on the old one, then closes it', async () => {
    const next = await freePort();
    const inFlight = send(`http://127.0.0.1:${portB}`, { path: '/slow', headers: { host: 'b.test' } });
    const seen = slowSeen;
    await eventually(async () => slowSeen > seen);
    await config.write('gw-b.yaml', gatewayB(next));
    await gw.waitForLog((l) => l.msg === 'Gateway listener bound' && l.port === next, 15_000);
    expect((await send(`http://127.0.0.1:${next}`, { headers: { host: 'b.test' } })).headers['x-upstream']).toBe('b');
    const reply = await inFlight;
    expect([reply.status, reply.body]).toEqual([200, 'slow done']);
    await eventually(async () => send(`http://127.0.0.1:${portB}`, { headers: { host: 'b.test' }, timeoutMs: 2_000 }).then(() => false, (error: Error) => /ECONNREFUSED/.test(error.message)));
    portB = next;
  });

  it('without Gateways the --port listener serves again', async () => {
    await config.remove('gw-a.yaml');
    await config.remove('gw-b.yaml');
    // Started with Gateways, the --port 0 listener never bound: it binds now and says where.
    const bound = await gw.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('the --port listener bound'), 15_000);
    await eventually(async () => (await send(`http://127.0.0.1:${bound.port}`, { headers: { host: 'b.test' } })).headers['x-upstream'] === 'b');
    expect(gw.logs.filter((x) => x.msg === 'Gateway listener closed').length).toBeGreaterThanOrEqual(2);
  });
});

describe('gatehouse validate with Gateways', () => {
  it('prints the bad format with file, line and field path, and exits 1', async () => {
    const dir = await makeConfigDir({ 'gw.yaml': gateway('bad', { bindPort: 8080, options: { accessLoggingService: { accessLog: [{ fileSink: { path: '/dev/stdout', stringFormat: 'ok %DURATION% then 50% off' } }] } } }) });
    try {
      const result = await promisify(execFile)(process.execPath, [...NODE_FLAGS, CLI, 'validate', dir.path]).then(
        (r) => ({ code: 0, stdout: r.stdout }),
        (e: { code: number; stdout: string }) => ({ code: e.code, stdout: e.stdout }),
      );
      expect(result.code).toBe(1);
      expect(result.stdout).toContain('Gateway default/bad: spec.options.accessLoggingService.accessLog[0].fileSink.stringFormat');
      expect(result.stdout).toContain('GH_CONFIG_BAD_ACCESS_LOG_FORMAT');
    } finally {
      await dir.cleanup();
    }
  });
});

describe('Gateway listeners with --workers 2', () => {
  it('every worker binds the Gateway listener itself and serves on it', async () => {
    const port = await freePort();
    const echo = await startEcho('w');
    const dir = await makeConfigDir({
      'all.yaml': [manifests.upstream('w', [{ addr: '127.0.0.1', port: echo.port }]), manifests.virtualService('vw', { domains: ['*'], routes: [{ name: 'main', routeAction: { single: { upstream: { name: 'w' } } } }] }), gateway('gw', { bindAddress: '127.0.0.1', bindPort: port })],
    });
    const two = await startGatehouse('run', ['--config-dir', dir.path, '--workers', '2'], { timeoutMs: 30_000 });
    try {
      expect((two.listening.listeners as { port: number }[]).map((l) => l.port)).toEqual([port]);
      // New connections until both workers have answered (the kernel spreads them over the two sockets).
      const pids = await eventually(async () => {
        await Promise.all(Array.from({ length: 10 }, () => send(`http://127.0.0.1:${port}`, { path: '/spread' }).then((r) => expect(r.headers['x-upstream']).toBe('w'))));
        const seen = new Set(two.logs.filter((l) => l.msg === 'access' && l.path === '/spread').map((l) => l.pid));
        return seen.size === 2 && seen;
      }, 20_000);
      expect(pids.has(two.listening.pid)).toBe(false);
    } finally {
      await two.stop();
      await echo.close();
      await dir.cleanup();
    }
  }, 60_000);
});

describe('an access log file that cannot be opened', () => {
  it('is logged, and the listener serves without access lines', async () => {
    const port = await freePort();
    const echo = await startEcho('n');
    const dir = await makeConfigDir({
      'all.yaml': [
        manifests.upstream('n', [{ addr: '127.0.0.1', port: echo.port }]),
        manifests.virtualService('vn', { domains: ['*'], routes: [{ name: 'main', routeAction: { single: { upstream: { name: 'n' } } } }] }),
        gateway('gw', { bindAddress: '127.0.0.1', bindPort: port, options: { accessLoggingService: { accessLog: [{ fileSink: { path: '/nonexistent-gatehouse-dir/access.log', stringFormat: '%RESPONSE_CODE%' } }] } } }),
      ],
    });
    const one = await startGatehouse('run', ['--config-dir', dir.path], { timeoutMs: 30_000 });
    try {
      expect((await send(`http://127.0.0.1:${port}`, { path: '/x' })).headers['x-upstream']).toBe('n');
      const error = await one.waitForLog((l) => l.code === 'GH_ACCESS_LOG_OPEN');
      expect(error.paths).toEqual(['/nonexistent-gatehouse-dir/access.log']);
      expect(one.logs.some((l) => l.msg === 'access')).toBe(false);
    } finally {
      await one.stop();
      await echo.close();
      await dir.cleanup();
    }
  }, 60_000);
});

describe('a Gateway port another process listens on', () => {
  it('is not shared (SO_REUSEPORT): the bind fails with GH_GATEWAY_LISTEN and the other Gateways serve', async () => {
    const { createServer } = await import('node:net');
    const holder = createServer((socket) => socket.end('HTTP/1.1 418 Teapot\r\ncontent-length: 0\r\n\r\n'));
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
    const taken = (holder.address() as { port: number }).port;
    const free = await freePort();
    const echo = await startEcho('t');
    const dir = await makeConfigDir({
      'all.yaml': [
        manifests.upstream('t', [{ addr: '127.0.0.1', port: echo.port }]),
        manifests.virtualService('vt', { domains: ['*'], routes: [{ name: 'main', routeAction: { single: { upstream: { name: 't' } } } }] }),
        gateway('taken', { bindAddress: '127.0.0.1', bindPort: taken }),
        gateway('free', { bindAddress: '127.0.0.1', bindPort: free }),
      ],
    });
    const one = await startGatehouse('run', ['--config-dir', dir.path], { timeoutMs: 30_000 });
    try {
      const error = await one.waitForLog((l) => l.code === 'GH_GATEWAY_LISTEN');
      expect([error.gateway, error.port]).toEqual(['default/taken', taken]);
      expect((await send(`http://127.0.0.1:${free}`)).headers['x-upstream']).toBe('t');
      // Every connection to the taken port still reaches its owner.
      for (let i = 0; i < 5; i++) expect((await send(`http://127.0.0.1:${taken}`)).status).toBe(418);
    } finally {
      await one.stop();
      await echo.close();
      await dir.cleanup();
      holder.close();
    }
  }, 60_000);
});

describe('an ssl Gateway', () => {
  it('terminates TLS for the selected VirtualServices with sslConfig; the plain Gateway does not serve them', async () => {
    const { execFileSync } = await import('node:child_process');
    const { mkdtemp, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { request: httpsRequest } = await import('node:https');
    const certs = await mkdtemp(join(tmpdir(), 'gatehouse-gw-tls-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', join(certs, 'tls.key'), '-out', join(certs, 'tls.crt'), '-subj', '/CN=secure.test', '-addext', 'subjectAltName=DNS:secure.test', '-days', '2'], { stdio: 'ignore' });
    const [tlsPort, plainPort] = await Promise.all([freePort(), freePort()]);
    const echo = await startEcho('s');
    const secure = manifests.virtualService('secure', { domains: ['secure.test'], routes: [{ name: 'main', routeAction: { single: { upstream: { name: 's' } } } }] });
    const dir = await makeConfigDir({
      'all.yaml': [
        manifests.upstream('s', [{ addr: '127.0.0.1', port: echo.port }]),
        { ...secure, spec: { ...secure.spec, sslConfig: { sslFiles: { tlsCert: join(certs, 'tls.crt'), tlsKey: join(certs, 'tls.key') }, sniDomains: ['secure.test'] } } },
        gateway('tls', { bindAddress: '127.0.0.1', bindPort: tlsPort, ssl: true }),
        gateway('plain', { bindAddress: '127.0.0.1', bindPort: plainPort }),
      ],
    });
    const one = await startGatehouse('run', ['--config-dir', dir.path], { timeoutMs: 30_000 });
    try {
      const ca = await readFile(join(certs, 'tls.crt'));
      const reply = await new Promise<{ status: number; upstream: unknown; protocol: string }>((resolve, reject) => {
        const req = httpsRequest({ host: '127.0.0.1', port: tlsPort, servername: 'secure.test', ca, headers: { host: 'secure.test' }, path: '/' }, (res) => {
          const protocol = (res.socket as import('node:tls').TLSSocket).getProtocol() ?? '';
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode!, upstream: res.headers['x-upstream'], protocol }));
        });
        req.on('error', reject);
        req.end();
      });
      expect(reply.status).toBe(200);
      expect(reply.upstream).toBe('s');
      expect(reply.protocol).toMatch(/^TLSv1\.[23]$/);
      expect((await send(`http://127.0.0.1:${plainPort}`, { headers: { host: 'secure.test' } })).status).toBe(404);
    } finally {
      await one.stop();
      await echo.close();
      await dir.cleanup();
      await rm(certs, { recursive: true, force: true });
    }
  }, 60_000);
});
