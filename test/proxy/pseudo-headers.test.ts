/**
 * Header matchers on the pseudo-headers `:authority`, `:method`, `:path` and `:scheme` (issue 31,
 * SPEC 3.2.0) match as Envoy's router matches them, identically over HTTP/1.1, h2c, and TLS with
 * HTTP/1.1 or HTTP/2; any other `:` name rejects the VirtualService with the field path.
 */
import { execFileSync } from 'node:child_process';
import { request as httpsRequest } from 'node:https';
import { connect, constants } from 'node:http2';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { eventually, send } from '../support/http.ts';

const direct = (body: string) => ({ directResponseAction: { status: 200, body } });
const routes = [
  { matchers: [{ prefix: '/', headers: [{ name: ':authority', value: 'echo.solo.io' }] }], ...direct('authority') },
  { matchers: [{ headers: [{ name: ':method', value: 'GET' }, { name: ':path', value: '/p' }] }], ...direct('get /p') },
  { matchers: [{ prefix: '/q', headers: [{ name: ':path', value: '/q\\?id=[0-9]+', regex: true }] }], ...direct('path with query') },
  { matchers: [{ prefix: '/s', headers: [{ name: ':scheme', value: 'https' }] }], ...direct('https') },
  { matchers: [{ prefix: '/s', headers: [{ name: ':scheme', value: 'http' }] }], ...direct('http') },
  { matchers: [{ prefix: '/' }], ...direct('catch-all') },
];

let work: string;
let dir: ConfigDir;
let gw: GatehouseProcess;
let httpsPort: number;
let ca: string;
let opensslMissing = false;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'gatehouse-pseudo-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=secure.test', '-addext', 'subjectAltName=DNS:secure.test', '-keyout', join(work, 'key.pem'), '-out', join(work, 'cert.pem')], { stdio: 'ignore' });
    ca = await readFile(join(work, 'cert.pem'), 'utf8');
  } catch {
    if (process.env.CI === 'true') throw new Error('the pseudo-header TLS cases need the openssl CLI (Debian openssl)');
    console.warn('\n*** SKIPPED: pseudo-header matching over TLS: openssl not installed ***\n');
    opensslMissing = true;
  }
  const plain = { apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService', metadata: { name: 'plain', namespace: 'gloo-system' }, spec: { virtualHost: { domains: ['*'], routes } } };
  const secure = { apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService', metadata: { name: 'secure', namespace: 'gloo-system' }, spec: { sslConfig: { sslFiles: { tlsCert: join(work, 'cert.pem'), tlsKey: join(work, 'key.pem') } }, virtualHost: { domains: ['secure.test'], routes } } };
  dir = await makeConfigDir({ 'vs.yaml': opensslMissing ? [plain] : [plain, secure] });
  gw = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
  httpsPort = gw.listening.httpsPort as number;
});

afterAll(async () => {
  await gw?.stop();
  await dir?.cleanup();
  if (work) await rm(work, { recursive: true, force: true });
});

type Ask = (path: string, options?: { method?: string; authority?: string }) => Promise<string>;

const http1: Ask = async (path, { method = 'GET', authority = 'plain.test' } = {}) => (await send(gw.url, { path, method, headers: { host: authority } })).body;

/** One HTTP/2 request on a new session (h2c prior knowledge, or TLS with ALPN h2). */
function http2(base: () => string, tls: boolean): Ask {
  return (path, { method = 'GET', authority = tls ? 'secure.test' : 'plain.test' } = {}) =>
    new Promise((resolve, reject) => {
      const session = connect(base(), tls ? { ca, servername: 'secure.test' } : {});
      session.on('error', reject);
      const stream = session.request({ [constants.HTTP2_HEADER_METHOD]: method, [constants.HTTP2_HEADER_PATH]: path, [constants.HTTP2_HEADER_AUTHORITY]: authority, [constants.HTTP2_HEADER_SCHEME]: tls ? 'https' : 'http' });
      let body = '';
      stream.setEncoding('utf8').on('data', (c: string) => (body += c));
      stream.on('end', () => (session.close(), resolve(body)));
      stream.on('error', reject);
      stream.end();
    });
}

const https1: Ask = (path, { method = 'GET', authority = 'secure.test' } = {}) =>
  new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port: httpsPort, path, method, servername: 'secure.test', ca, headers: { host: authority } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });

const transports: [string, () => Ask, boolean][] = [
  ['HTTP/1.1', () => http1, false],
  ['h2c', () => http2(() => gw.url, false), false],
  ['HTTPS HTTP/1.1', () => https1, true],
  ['HTTPS HTTP/2', () => http2(() => `https://127.0.0.1:${httpsPort}`, true), true],
];

describe.each(transports)('pseudo-header matchers over %s', (_name, transport, tls) => {
  it(':authority is the Host routed on, :method and :path are Envoy\'s, :scheme the connection\'s', async (context) => {
    if (tls && opensslMissing) return context.skip();
    const ask = transport();
    const host = tls ? 'secure.test' : 'plain.test';
    // Over TLS the SNI binds the virtual host: `:authority` there is the TLS host itself.
    if (!tls) {
      expect(await ask('/', { authority: 'echo.solo.io' })).toBe('authority');
      expect(await ask('/x', { authority: 'echo.solo.io' })).toBe('authority');
    }
    expect(await ask('/', { authority: host })).toBe('catch-all');
    expect(await ask('/p')).toBe('get /p');
    expect(await ask('/p', { method: 'POST' })).toBe('catch-all');
    expect(await ask('/')).toBe('catch-all');
    expect(await ask('/p?x=1')).toBe('catch-all');
    expect(await ask('/q?id=42')).toBe('path with query');
    expect(await ask('/q?id=x')).toBe('catch-all');
    // The normalised path is matched: `/a/../p` is `/p`.
    expect(await ask('/a/../p')).toBe('get /p');
    expect(await ask('/s')).toBe(tls ? 'https' : 'http');
  });
});

describe('pseudo-header names Envoy\'s router does not have', () => {
  it('reject the VirtualService with the field path, and the last accepted version keeps serving', async () => {
    const bad = { apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService', metadata: { name: 'plain', namespace: 'gloo-system' }, spec: { virtualHost: { domains: ['*'], routes: [{ matchers: [{ headers: [{ name: ':status', value: '200' }] }], ...direct('never') }] } } };
    const before = await http1('/p');
    await dir.write('vs.yaml', [bad]);
    const status = await eventually(async () => {
      const r = await send(gw.adminUrl, { path: '/config' });
      const found = (JSON.parse(r.body) as { resources?: { name: string; kind: string; state: string; reasons: { path?: string; message: string }[] }[] }).resources?.find((s) => s.kind === 'VirtualService' && s.name === 'plain');
      return found?.state === 'Rejected' ? found : undefined;
    });
    expect(status.reasons[0]).toMatchObject({ path: 'spec.virtualHost.routes[0].matchers[0].headers[0].name' });
    expect(status.reasons[0]!.message).toContain('":status" is not a request pseudo-header');
    expect(await http1('/p')).toBe(before);
  });
});
