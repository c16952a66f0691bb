/**
 * TLS policy of the HTTPS listener (SPEC 3.2.1, issue 29 item 19), probed from outside with the
 * openssl CLI (Debian `openssl`, OpenSSL 3) as testssl.sh does it: which protocol versions a
 * handshake succeeds with, and which TLS 1.2 suites the listener accepts, found by offering every
 * suite the client knows, striking out the one the server picked, and repeating until the
 * handshake fails. The expectation is Mozilla's "intermediate" profile (v5.7):
 *   - TLS 1.2 and 1.3 only (no SSLv3, TLS 1.0, 1.1);
 *   - TLS 1.3: TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256;
 *   - TLS 1.2: ECDHE with AES-GCM or ChaCha20-Poly1305, for the certificate's key type (an
 *     ECDSA certificate gets the ECDHE-ECDSA-* three, an RSA one the ECDHE-RSA-* three): no CBC,
 *     no static RSA key exchange, no DHE. Mozilla lists DHE-RSA-* too, but only with operator
 *     supplied ffdhe2048 parameters; Gatehouse has no field for DH parameters (Gloo has none,
 *     and Envoy's BoringSSL has no DHE at all), so none is offered.
 * And that Gloo's `sslConfig.parameters.cipherSuites` and `ecdhCurves` narrow it per
 * VirtualService (SNI name).
 * testssl.sh (Debian `testssl.sh`) would rate the same thing, but takes minutes per host and
 * reads the same answers from openssl; probing directly takes seconds.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';
import { onPath, selfSignedCert, staticUpstream } from './support.ts';

const run = promisify(execFile);

const MOZILLA_TLS13 = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'];
const MOZILLA_TLS12 = {
  ecdsa: ['ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305'],
  rsa: ['ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-RSA-CHACHA20-POLY1305'],
};

const hasOpenssl = onPath('openssl');
if (!hasOpenssl) {
  if (process.env.CI === 'true') throw new Error('the TLS policy test needs the openssl CLI (Debian openssl)');
  console.warn('\n*** SKIPPED: TLS policy (Mozilla intermediate): openssl CLI not installed (apt-get install openssl) ***\n');
}

/** One handshake: the negotiated protocol and suite, or undefined when it failed. */
async function handshake(port: number, servername: string, args: string[]): Promise<{ protocol: string; cipher: string } | undefined> {
  const pending = run('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-servername', servername, '-brief', ...args], { timeout: 20_000 });
  // s_client sends what it reads on stdin: end it, and it closes after the handshake.
  pending.child.stdin?.end();
  const result = await pending.then(
    (r) => r.stdout + r.stderr,
    () => undefined,
  );
  if (!result) return undefined;
  const protocol = /Protocol version: (\S+)/.exec(result)?.[1];
  const cipher = /Ciphersuite: (\S+)/.exec(result)?.[1];
  return protocol && cipher ? { protocol, cipher } : undefined;
}

/** One handshake without the `-servername` handshake() adds: `args` say what SNI, if any, is sent. */
async function handshakeWith(port: number, args: string[]): Promise<{ protocol: string; cipher: string } | undefined> {
  const pending = run('openssl', ['s_client', '-connect', `127.0.0.1:${port}`, '-brief', ...args], { timeout: 20_000 });
  pending.child.stdin?.end();
  const result = await pending.then(
    (r) => r.stdout + r.stderr,
    () => undefined,
  );
  if (!result) return undefined;
  const protocol = /Protocol version: (\S+)/.exec(result)?.[1];
  const cipher = /Ciphersuite: (\S+)/.exec(result)?.[1];
  return protocol && cipher ? { protocol, cipher } : undefined;
}

/** The protocol versions the listener completes a handshake with (openssl's flags; SECLEVEL=0 lets the client offer old ones). */
async function protocols(port: number, servername: string): Promise<string[]> {
  const accepted: string[] = [];
  for (const [name, flag] of [['TLSv1', '-tls1'], ['TLSv1.1', '-tls1_1'], ['TLSv1.2', '-tls1_2'], ['TLSv1.3', '-tls1_3']] as const) {
    const args = name === 'TLSv1.3' ? [flag] : [flag, '-cipher', 'ALL:COMPLEMENTOFALL:@SECLEVEL=0'];
    if ((await handshake(port, servername, args))?.protocol === name) accepted.push(name);
  }
  return accepted;
}

/** Every TLS 1.2 suite the listener accepts: offer all the client has, strike out the chosen one, repeat. */
async function tls12Suites(port: number, servername: string, extra: string[] = []): Promise<string[]> {
  const offered = (await run('openssl', ['ciphers', '-s', '-tls1_2', 'ALL:COMPLEMENTOFALL:@SECLEVEL=0'])).stdout
    .trim()
    .split(':')
    .filter((c) => c && !c.startsWith('TLS_'));
  const accepted: string[] = [];
  for (;;) {
    const left = offered.filter((c) => !accepted.includes(c));
    const result = await handshake(port, servername, ['-tls1_2', '-cipher', `${left.join(':')}:@SECLEVEL=0`, ...extra]);
    if (!result) return accepted.sort();
    // A suite the client did not offer would be a broken handshake: stop rather than loop.
    if (!left.includes(result.cipher)) throw new Error(`the server chose ${result.cipher}, which was not offered`);
    accepted.push(result.cipher);
  }
}

/** The TLS 1.3 suites the listener accepts, one handshake per suite openssl knows. */
async function tls13Suites(port: number, servername: string): Promise<string[]> {
  const accepted: string[] = [];
  for (const suite of [...MOZILLA_TLS13, 'TLS_AES_128_CCM_SHA256', 'TLS_AES_128_CCM_8_SHA256']) {
    if ((await handshake(port, servername, ['-tls1_3', '-ciphersuites', suite]))?.cipher === suite) accepted.push(suite);
  }
  return accepted.sort();
}

describe.skipIf(!hasOpenssl)('TLS policy: Mozilla intermediate by default, narrowed by sslConfig.parameters', () => {
  let work: string;
  let echo: TestServer;
  let dir: ConfigDir;
  let gatehouse: GatehouseProcess;
  let port: number;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'gatehouse-tls-policy-'));
    const ec = await selfSignedCert(work, 'ec', ['ec.test']);
    const rsa = await selfSignedCert(work, 'rsa', ['rsa.test'], { rsa: true });
    const narrow = await selfSignedCert(work, 'narrow', ['narrow.test'], { rsa: true });
    const fallback = await selfSignedCert(work, 'fallback', ['fallback.test']);
    echo = await startEcho();
    const vs = (name: string, sslConfig: object) => ({
      apiVersion: 'gateway.solo.io/v1',
      kind: 'VirtualService',
      metadata: { name },
      spec: { sslConfig: { sniDomains: [`${name}.test`], ...sslConfig }, virtualHost: { domains: [`${name}.test`], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }] } },
    });
    dir = await makeConfigDir({
      'upstream.yaml': staticUpstream('echo', echo.port),
      'ec.yaml': vs('ec', { sslFiles: { tlsCert: ec.certFile, tlsKey: ec.keyFile } }),
      'rsa.yaml': vs('rsa', { sslFiles: { tlsCert: rsa.certFile, tlsKey: rsa.keyFile } }),
      // Its own file: a gateway that rejects these fields rejects this VirtualService only.
      'narrow.yaml': vs('narrow', { sslFiles: { tlsCert: narrow.certFile, tlsKey: narrow.keyFile }, parameters: { cipherSuites: ['ECDHE-RSA-AES256-GCM-SHA384'], ecdhCurves: ['P-256'] } }),
      // No sniDomains: the default for clients without SNI and for names nobody claims.
      'fallback.yaml': (() => {
        const d = vs('fallback', { sslFiles: { tlsCert: fallback.certFile, tlsKey: fallback.keyFile }, parameters: { cipherSuites: ['ECDHE-ECDSA-AES256-GCM-SHA384'], ecdhCurves: ['P-384'], maximumProtocolVersion: 'TLSv1_2' } });
        delete (d.spec.sslConfig as { sniDomains?: unknown }).sniDomains;
        return d;
      })(),
    });
    gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
    port = gatehouse.listening.httpsPort as number;
  });

  afterAll(async () => {
    await gatehouse?.stop();
    await echo?.close();
    await dir?.cleanup();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('offers TLS 1.2 and 1.3 only', async () => {
    expect(await protocols(port, 'ec.test')).toEqual(['TLSv1.2', 'TLSv1.3']);
    expect(await protocols(port, 'rsa.test')).toEqual(['TLSv1.2', 'TLSv1.3']);
  });

  it('TLS 1.3: the three Mozilla suites', async () => {
    expect(await tls13Suites(port, 'ec.test')).toEqual([...MOZILLA_TLS13].sort());
  });

  it('TLS 1.2 with an ECDSA certificate: exactly ECDHE-ECDSA with AES-GCM or ChaCha20 (no CBC, no static RSA, no DHE)', async () => {
    expect(await tls12Suites(port, 'ec.test')).toEqual([...MOZILLA_TLS12.ecdsa].sort());
  });

  it('TLS 1.2 with an RSA certificate: exactly ECDHE-RSA with AES-GCM or ChaCha20 (no CBC, no static RSA, no DHE)', async () => {
    expect(await tls12Suites(port, 'rsa.test')).toEqual([...MOZILLA_TLS12.rsa].sort());
  });

  it('sslConfig.parameters.cipherSuites narrows TLS 1.2 to the listed suites, and ecdhCurves the key exchange groups', async () => {
    expect(await tls12Suites(port, 'narrow.test')).toEqual(['ECDHE-RSA-AES256-GCM-SHA384']);
    expect(await handshake(port, 'narrow.test', ['-tls1_2', '-groups', 'P-256'])).toBeDefined();
    expect(await handshake(port, 'narrow.test', ['-tls1_2', '-groups', 'X25519'])).toBeUndefined();
  });

  it('the default VirtualService (no sniDomains) negotiates its own policy with clients that send no SNI or a name nobody claims', async () => {
    for (const args of [['-noservername'], ['-servername', 'nobody.test']]) {
      // handshake() names a server; these replace it (openssl takes the last -servername, and -noservername drops it).
      const result = await handshakeWith(port, args);
      expect(result, args.join(' ')).toEqual({ protocol: 'TLSv1.2', cipher: 'ECDHE-ECDSA-AES256-GCM-SHA384' });
      expect(await handshakeWith(port, [...args, '-groups', 'X25519']), args.join(' ')).toBeUndefined();
      expect(await handshakeWith(port, [...args, '-tls1_3']), args.join(' ')).toBeUndefined();
    }
  });
});
