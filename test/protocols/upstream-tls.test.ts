/**
 * Upstream TLS (SPEC 3.2.1, issue 12 item 5) through a real `gatehouse run`: a real HTTPS
 * upstream with a private CA made by the openssl CLI, a client certificate for mutual TLS,
 * SNI, and a verification failure answered 503 with a clear error.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resource } from '../../core/src/config/resource.ts';
import { upstreamTls } from '../../core/src/proxy/upstream/upstream-cluster.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';

let work: string;
const f = (name: string) => join(work, name);
const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
async function leaf(name: string, cn: string, ext: string) {
  openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${cn}`]);
  await writeFile(f(`${name}.ext`), ext);
  openssl(['x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f(`${name}.pem`), '-days', '2', '-extfile', f(`${name}.ext`)]);
}

/** An HTTPS upstream answering with what it saw of the TLS session. */
async function startBackend(requireClientCert: boolean): Promise<{ port: number; server: Server }> {
  const server = createServer({ cert: await readFile(f('backend.pem')), key: await readFile(f('backend.key')), ca: await readFile(f('ca.pem')), requestCert: requireClientCert, rejectUnauthorized: requireClientCert }, (req, res) => {
    const socket = req.socket as TLSSocket;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ servername: (socket as TLSSocket & { servername?: string }).servername || null, client: socket.getPeerCertificate()?.subject?.CN ?? null }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, server };
}

let plain: Awaited<ReturnType<typeof startBackend>>;
let mutual: Awaited<ReturnType<typeof startBackend>>;
let dir: ConfigDir;
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'gatehouse-upstream-tls-'));
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'), '-subj', '/CN=gatehouse-upstream-ca', '-days', '2']);
  await leaf('backend', 'backend.test', 'subjectAltName=DNS:backend.test,IP:127.0.0.1\n');
  await leaf('client', 'gatehouse-client', 'basicConstraints=CA:FALSE\n');
  plain = await startBackend(false);
  mutual = await startBackend(true);
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  const upstream = (name: string, port: number, extra: object) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] }, ...extra } });
  const route = (prefix: string, name: string) => ({ matchers: [{ prefix }], routeAction: { single: { upstream: { name } } } });
  dir = await makeConfigDir({
    'config.yaml': [
      { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name: 'client-cert' }, data: { 'tls.crt': b64(await readFile(f('client.pem'), 'utf8')), 'tls.key': b64(await readFile(f('client.key'), 'utf8')), 'ca.crt': b64(await readFile(f('ca.pem'), 'utf8')) } },
      upstream('verified', plain.port, { sslConfig: { sslFiles: { rootCa: f('ca.pem') } } }),
      upstream('with-sni', plain.port, { sslConfig: { sslFiles: { rootCa: f('ca.pem') }, sni: 'backend.test' } }),
      upstream('system-cas', plain.port, { static: { hosts: [{ addr: '127.0.0.1', port: plain.port }], useTls: true } }),
      upstream('mutual', mutual.port, { sslConfig: { secretRef: { name: 'client-cert' } } }),
      upstream('mutual-no-cert', mutual.port, { sslConfig: { sslFiles: { rootCa: f('ca.pem') } } }),
      {
        apiVersion: 'gateway.solo.io/v1',
        kind: 'VirtualService',
        metadata: { name: 'api' },
        spec: { virtualHost: { domains: ['*'], routes: [route('/verified', 'verified'), route('/sni', 'with-sni'), route('/system', 'system-cas'), route('/mutual-no-cert', 'mutual-no-cert'), route('/mutual', 'mutual')] } },
      },
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
});

afterAll(async () => {
  await gatehouse?.stop();
  plain?.server.close();
  mutual?.server.close();
  await dir?.cleanup();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('upstream TLS through gatehouse run', () => {
  it('sslConfig.rootCa verifies the upstream (an IP host: no SNI, the IP SAN is checked); sni is sent when set', async () => {
    const verified = await fetch(`${gatehouse.url}/verified`);
    expect(verified.status).toBe(200);
    expect(await verified.json()).toEqual({ servername: null, client: null });
    expect(await (await fetch(`${gatehouse.url}/sni`)).json()).toEqual({ servername: 'backend.test', client: null });
  });

  it('a certificate the CAs do not vouch for is a 503 with a clear error, not a silent plain-text retry', async () => {
    const failed = await fetch(`${gatehouse.url}/system`);
    expect(failed.status).toBe(503);
    expect(failed.headers.get('x-gatehouse-error')).toBe('GH_UPSTREAM_UNAVAILABLE');
    expect(await failed.text()).toMatch(/upstream TLS certificate verification failed \((UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN)\)/);
  });

  it('a client certificate from a kubernetes.io/tls Secret reaches an upstream that requires one; without it the upstream refuses', async () => {
    expect(await (await fetch(`${gatehouse.url}/mutual`)).json()).toEqual({ servername: null, client: 'gatehouse-client' });
    expect((await fetch(`${gatehouse.url}/mutual-no-cert`)).status).toBe(503);
  });
});

describe('upstreamTls', () => {
  const upstream = (spec: object) => ({ kind: 'Upstream', namespace: 'default', name: 'u', source: { file: '' }, spec }) as unknown as Resource<'Upstream'>;
  it('port 443 dials TLS unless useTls is false (Gloo); other ports only when asked', () => {
    expect(upstreamTls(upstream({ static: { hosts: [{ addr: 'api.example.com', port: 443 }] } }), () => undefined)).toEqual({});
    expect(upstreamTls(upstream({ static: { hosts: [{ addr: 'api.example.com', port: 443 }], useTls: false } }), () => undefined)).toBeUndefined();
    expect(upstreamTls(upstream({ static: { hosts: [{ addr: 'api.example.com', port: 8080 }] } }), () => undefined)).toBeUndefined();
  });
});
