/**
 * HTTPS listener with SNI (SPEC 3.2.1, issue 12 item 1) through a real `gatehouse run`:
 * certificates made by the openssl CLI, a kubernetes.io/tls Secret and sslFiles, client
 * certificate verification, rotation without restart, and curl as a real client.
 */
import { execFile, execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { Agent, request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseManifests } from '../../core/src/config/manifest.ts';
import { ConfigStore } from '../../core/src/config/store.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';

let work: string;
const f = (name: string) => join(work, name);
const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });

/** A CA, and `issue(name, sans)` for leaf certificates it signs (server or client). */
async function makeCa() {
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'), '-subj', '/CN=gatehouse-test-ca', '-days', '2']);
  let serial = 1;
  return async (name: string, cn: string, sans: string[]) => {
    openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${cn}`]);
    await writeFile(f(`${name}.ext`), sans.length ? `subjectAltName=${sans.join(',')}\n` : 'basicConstraints=CA:FALSE\n');
    openssl(['x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-set_serial', String(serial++), '-out', f(`${name}.pem`), '-days', '2', '-extfile', f(`${name}.ext`)]);
    return { cert: await readFile(f(`${name}.pem`), 'utf8'), key: await readFile(f(`${name}.key`), 'utf8') };
  };
}

const b64 = (text: string) => Buffer.from(text).toString('base64');
const tlsSecret = (name: string, pair: { cert: string; key: string }, ca?: string) => ({
  apiVersion: 'v1',
  kind: 'Secret',
  type: 'kubernetes.io/tls',
  metadata: { name },
  data: { 'tls.crt': b64(pair.cert), 'tls.key': b64(pair.key), ...(ca ? { 'ca.crt': b64(ca) } : {}) },
});
const vs = (name: string, domains: string[], upstream: string, sslConfig?: object) => ({
  apiVersion: 'gateway.solo.io/v1',
  kind: 'VirtualService',
  metadata: { name },
  spec: { ...(sslConfig ? { sslConfig } : {}), virtualHost: { domains, routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: upstream } } } }] } },
});

let issue: Awaited<ReturnType<typeof makeCa>>;
let ca: string;
let tlsEcho: TestServer;
let plainEcho: TestServer;
let dir: ConfigDir;
let gatehouse: GatehouseProcess;
let httpsPort: number;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'gatehouse-tls-'));
  issue = await makeCa();
  ca = await readFile(f('ca.pem'), 'utf8');
  const shop = await issue('shop', 'shop.test', ['DNS:shop.test', 'DNS:www.shop.test']);
  await issue('api', 'api.test', ['DNS:api.test']);
  const secure = await issue('secure', 'secure.test', ['DNS:secure.test']);
  tlsEcho = await startEcho('tls-echo');
  plainEcho = await startEcho('plain-echo');
  const upstream = (name: string, port: number) => ({ apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } } });
  dir = await makeConfigDir({
    'secrets.yaml': [tlsSecret('shop-tls', shop), tlsSecret('secure-tls', secure, ca)],
    'upstreams.yaml': [upstream('tls-echo', tlsEcho.port), upstream('plain-echo', plainEcho.port)],
    'vs.yaml': [
      vs('shop-https', ['shop.test', 'www.shop.test'], 'tls-echo', { secretRef: { name: 'shop-tls', namespace: 'default' }, sniDomains: ['shop.test', 'www.shop.test'] }),
      // The same domain on plain HTTP: another VirtualService (Gloo's HTTP and HTTPS gateways).
      vs('shop-http', ['shop.test'], 'plain-echo'),
      vs('api-https', ['api.test'], 'tls-echo', { sslFiles: { tlsCert: f('api.pem'), tlsKey: f('api.key') }, sniDomains: ['api.test'], parameters: { minimumProtocolVersion: 'TLSv1_3' } }),
      vs('secure-https', ['secure.test'], 'tls-echo', { secretRef: { name: 'secure-tls' }, sniDomains: ['secure.test'] }),
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
  httpsPort = gatehouse.listening.httpsPort as number;
});

afterAll(async () => {
  await gatehouse?.stop();
  await tlsEcho?.close();
  await plainEcho?.close();
  await dir?.cleanup();
  if (work) await rm(work, { recursive: true, force: true });
});

/** GET over TLS with SNI `servername` (a new connection, or one of `agent`'s); resolves with status, body and the server's certificate, or rejects on a failed handshake. */
function get(servername: string, options: { path?: string; cert?: string; key?: string; minVersion?: 'TLSv1.2'; maxVersion?: 'TLSv1.2'; agent?: Agent } = {}): Promise<{ status: number; body: string; peer: PeerCertificate }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: '127.0.0.1', port: httpsPort, path: options.path ?? '/', servername, headers: { host: servername }, ca, agent: options.agent ?? false, ...(options.cert ? { cert: options.cert, key: options.key } : {}), ...(options.maxVersion ? { maxVersion: options.maxVersion } : {}) },
      (res) => {
        const peer = (res.socket as TLSSocket).getPeerCertificate();
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c)).on('end', () => resolve({ status: res.statusCode!, body, peer }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('HTTPS listener (SPEC 3.2.1)', () => {
  it('SNI picks the certificate: a kubernetes.io/tls Secret for shop.test, files for api.test; the upstream learns the request came over HTTPS', async () => {
    const shop = await get('shop.test');
    expect(shop.status).toBe(200);
    expect(shop.peer.subject.CN).toBe('shop.test');
    const echo = JSON.parse(shop.body) as Echo;
    expect(echo.upstream).toBe('tls-echo');
    expect(echo.headers['x-forwarded-proto']).toBe('https');
    expect((await get('www.shop.test')).peer.subject.CN).toBe('shop.test');
    const api = await get('api.test');
    expect(api.status).toBe(200);
    expect(api.peer.subject.CN).toBe('api.test');
  });

  it('curl completes the handshake and gets the answer, verifying against the CA', async () => {
    const { stdout } = await promisify(execFile)('curl', ['-sS', '--cacert', f('ca.pem'), '--resolve', `shop.test:${httpsPort}:127.0.0.1`, `https://shop.test:${httpsPort}/curl`]);
    expect((JSON.parse(stdout) as Echo).url).toBe('/curl');
  });

  it('a name no VirtualService serves fails the handshake (no default certificate); TLSv1_3 minimum is enforced', async () => {
    await expect(get('unknown.test')).rejects.toThrow();
    await expect(get('api.test', { maxVersion: 'TLSv1.2' })).rejects.toThrow();
    expect((await get('shop.test', { maxVersion: 'TLSv1.2' })).status).toBe(200);
  });

  it('VirtualServices with sslConfig are served on HTTPS only; the plain one for the same domain on HTTP', async () => {
    // curl --resolve sends the real Host (fetch cannot set it).
    const { stdout } = await promisify(execFile)('curl', ['-sS', '--resolve', `shop.test:${new URL(gatehouse.url).port}:127.0.0.1`, `http://shop.test:${new URL(gatehouse.url).port}/`]);
    expect((JSON.parse(stdout) as Echo).upstream).toBe('plain-echo');
    const { stdout: api } = await promisify(execFile)('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code}', '--resolve', `api.test:${new URL(gatehouse.url).port}:127.0.0.1`, `http://api.test:${new URL(gatehouse.url).port}/`]);
    expect(api).toBe('404');
  });

  it('a root CA in the Secret requires a client certificate signed by it', async () => {
    await expect(get('secure.test')).rejects.toThrow();
    const client = await issue('client', 'client-1', []);
    const ok = await get('secure.test', client);
    expect(ok.status).toBe(200);
  });

  it('a rotated Secret is served on the next handshake without a restart; a broken one is rejected and the previous certificate keeps serving', async () => {
    const before = (await get('shop.test')).peer.serialNumber;
    const rotated = await issue('shop2', 'shop.test', ['DNS:shop.test', 'DNS:www.shop.test']);
    const pid = gatehouse.child.pid;
    await dir.write('secrets.yaml', [tlsSecret('shop-tls', rotated), tlsSecret('secure-tls', { cert: await readFile(f('secure.pem'), 'utf8'), key: await readFile(f('secure.key'), 'utf8') }, ca)]);
    let serial = before;
    for (let i = 0; i < 100 && serial === before; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      serial = (await get('shop.test')).peer.serialNumber;
    }
    expect(serial).not.toBe(before);
    expect(gatehouse.child.pid).toBe(pid);
    // A key that does not match its certificate.
    const wrongKey = await issue('other', 'other.test', []);
    await dir.write('secrets.yaml', [tlsSecret('shop-tls', { cert: rotated.cert, key: wrongKey.key }), tlsSecret('secure-tls', { cert: await readFile(f('secure.pem'), 'utf8'), key: await readFile(f('secure.key'), 'utf8') }, ca)]);
    // The Secret is rejected (its last good version keeps serving); the admin API says why.
    let status: { state?: string; reasons?: { code?: string }[] } | undefined;
    for (let i = 0; i < 100 && status?.state !== 'Rejected'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const config = (await (await fetch(`${gatehouse.adminUrl}/config`)).json()) as { resources?: { kind: string; name: string; state?: string; reasons?: { code?: string }[] }[] };
      status = config.resources?.find((r) => r.kind === 'Secret' && r.name === 'shop-tls');
    }
    expect(status?.state).toBe('Rejected');
    expect(status?.reasons?.[0]?.code).toBe('GH_CONFIG_BAD_TLS');
    const after = await get('shop.test');
    expect(after.status).toBe(200);
    expect(after.peer.serialNumber).toBe(serial);
  });

  it('connections opened while a Secret is rotated again and again are all answered (none is dropped because its handshake straddled the swap), and a kept-alive one made before keeps being served', async () => {
    const secure = { cert: await readFile(f('secure.pem'), 'utf8'), key: await readFile(f('secure.key'), 'utf8') };
    const rotations: { cert: string; key: string }[] = [];
    for (let i = 0; i < 8; i++) rotations.push(await issue(`rotation${i}`, 'shop.test', ['DNS:shop.test', 'DNS:www.shop.test']));
    let hammering = true;
    let served = 0;
    const seen = new Set<string>();
    const failures: string[] = [];
    // A few clients opening one connection per request, back to back, for as long as the rotations last.
    const client = async () => {
      while (hammering) {
        try {
          const { status, peer } = await get('shop.test');
          if (status === 200) served++;
          else failures.push(`status ${status}`);
          seen.add(peer.serialNumber);
        } catch (error) {
          failures.push((error as Error).message);
        }
      }
    };
    // One more client keeps a single connection alive across every rotation: still served, not turned away (421).
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    const keptSerials = new Set<string>();
    let keptServed = 0;
    const keptClient = async () => {
      while (hammering) {
        try {
          const { status, peer } = await get('shop.test', { agent: keepAlive });
          if (status === 200) keptServed++;
          else failures.push(`kept-alive: status ${status}`);
          keptSerials.add(peer.serialNumber);
        } catch (error) {
          failures.push(`kept-alive: ${(error as Error).message}`);
        }
      }
    };
    const clients = [...Array.from({ length: 4 }, client), keptClient()];
    try {
      for (const pair of rotations) {
        await dir.write('secrets.yaml', [tlsSecret('shop-tls', pair), tlsSecret('secure-tls', secure, ca)]);
        // The next rotation only once a client has been served this certificate.
        const serial = new X509Certificate(pair.cert).serialNumber;
        await vi.waitFor(() => expect(seen).toContain(serial), { timeout: 20_000, interval: 20 });
      }
    } finally {
      hammering = false;
      await Promise.all(clients);
      keepAlive.destroy();
    }
    expect(failures).toEqual([]);
    expect(served).toBeGreaterThan(rotations.length);
    expect(keptServed).toBeGreaterThan(rotations.length);
    // The kept-alive connection was one connection throughout: made under the certificate before the first rotation.
    expect(keptSerials.size).toBe(1);
  });
});

describe('sslConfig at load time', () => {
  const diagnostics = (docs: object[]) => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    return store.load(parseManifests('tls.yaml', docs.map((d) => stringify(d)).join('---\n')).documents).diagnostics.map((d) => `${d.resource} ${d.path}: ${d.message} [${d.code}]`);
  };
  const upstream = { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'tls-echo' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 1 }] } } };

  it('an unreadable file or a key that does not match the certificate rejects the VirtualService with GH_CONFIG_BAD_TLS', async () => {
    expect(diagnostics([upstream, vs('x', ['x.test'], 'tls-echo', { sslFiles: { tlsCert: f('nope.pem'), tlsKey: f('api.key') } })])).toEqual([
      expect.stringMatching(/^VirtualService default\/x spec\.sslConfig\.sslFiles: the certificate cannot be used: sslFiles\.tlsCert: cannot read .*nope\.pem: ENOENT \[GH_CONFIG_BAD_TLS\]$/),
    ]);
    expect(diagnostics([upstream, vs('x', ['x.test'], 'tls-echo', { sslFiles: { tlsCert: f('api.pem'), tlsKey: f('shop.key') } })])).toEqual([
      expect.stringMatching(/^VirtualService default\/x spec\.sslConfig\.sslFiles: the certificate cannot be used: .*\[GH_CONFIG_BAD_TLS\]$/),
    ]);
  });

  it('sslConfig.parameters: Gloo cipherSuites (with [A|B] groups) and ecdhCurves load; an unknown suite or curve, or min above max, is rejected with its field path (issue 29 finding 19)', () => {
    const files = { tlsCert: f('api.pem'), tlsKey: f('api.key') };
    const good = { cipherSuites: ['[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]', 'ECDHE-RSA-AES256-GCM-SHA384'], ecdhCurves: ['X25519', 'P-256'], minimumProtocolVersion: 'TLSv1_2', maximumProtocolVersion: 'TLSv1_3' };
    expect(diagnostics([upstream, vs('x', ['x.test'], 'tls-echo', { sslFiles: files, parameters: good })])).toEqual([]);
    expect(diagnostics([upstream, vs('x', ['x.test'], 'tls-echo', { sslFiles: files, parameters: { cipherSuites: ['ECDHE-RSA-AES128-GCM-SHA256', 'NOT-A-SUITE'], ecdhCurves: ['X25519', 'P-999'] } })])).toEqual([
      'VirtualService default/x spec.sslConfig.parameters.cipherSuites: unknown cipher suite "NOT-A-SUITE" (OpenSSL names, e.g. ECDHE-RSA-AES128-GCM-SHA256) [GH_CONFIG_BAD_TLS]',
      'VirtualService default/x spec.sslConfig.parameters.ecdhCurves[1]: unknown curve "P-999" (e.g. X25519, P-256, P-384) [GH_CONFIG_BAD_TLS]',
    ]);
    expect(diagnostics([upstream, vs('x', ['x.test'], 'tls-echo', { sslFiles: files, parameters: { minimumProtocolVersion: 'TLSv1_3', maximumProtocolVersion: 'TLSv1_2' } })])).toEqual([
      'VirtualService default/x spec.sslConfig.parameters: minimumProtocolVersion TLSv1_3 is above maximumProtocolVersion TLSv1_2 [GH_CONFIG_BAD_TLS]',
    ]);
  });

  it('a kubernetes.io/tls Secret without a key is rejected; a missing Secret is a missing reference', () => {
    const broken = { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name: 'half' }, stringData: { 'tls.crt': 'x' } };
    expect(diagnostics([broken])).toEqual(['Secret default/half data: a kubernetes.io/tls Secret needs tls.key [GH_CONFIG_BAD_TLS]']);
    expect(diagnostics([upstream, vs('x', ['x.test'], 'tls-echo', { secretRef: { name: 'ghost' } })])).toEqual([expect.stringMatching(/spec\.sslConfig\.secretRef: references Secret default\/ghost, which does not exist/)]);
  });
});
