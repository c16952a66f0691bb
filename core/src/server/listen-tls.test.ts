import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { AnyResource } from '../config/resource.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import { closeGracefully, listenTls } from './listen.ts';
import { TlsContexts, type TlsHost } from './tls-contexts.ts';

/** A self-signed P-256 certificate for `name` (openssl CLI). */
function certificate(dir: string, name: string): { cert: string; key: string } {
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', join(dir, `${name}.key`), '-out', join(dir, `${name}.pem`), '-subj', `/CN=${name}`, '-days', '2', '-addext', `subjectAltName=DNS:${name}`], { stdio: 'ignore' });
  return { cert: readFileSync(join(dir, `${name}.pem`), 'utf8'), key: readFileSync(join(dir, `${name}.key`), 'utf8') };
}

/** A snapshot of TLS VirtualServices, one per name, each with its certificate in a Secret. */
function snapshot(hosts: Record<string, { cert: string; key: string }>): ConfigSnapshot {
  const resources = new Map<string, AnyResource>();
  const base = (kind: string, name: string) => ({ kind, apiVersion: 'v1', name, namespace: 'default', key: `${kind}/default/${name}`, version: name, labels: {}, source: { file: '/dev/null', line: 1, index: 0 } });
  for (const [name, pair] of Object.entries(hosts)) {
    const secret = { ...base('Secret', name), spec: { type: 'kubernetes.io/tls', data: { 'tls.crt': pair.cert, 'tls.key': pair.key } } };
    const vs = { ...base('VirtualService', name), spec: { sslConfig: { secretRef: { name }, sniDomains: [name] }, virtualHost: { domains: [name], routes: [] } } };
    resources.set(secret.key, secret as unknown as AnyResource);
    resources.set(vs.key, vs as unknown as AnyResource);
  }
  return { generation: 1, resources, statuses: [], diagnostics: [] };
}

/** Answers `/slow` after `ms` (calling `started` when it arrives), everything else at once. */
const handler = (ms: number, started?: () => void) => (req: IncomingMessage, res: ServerResponse) => {
  if (req.url === '/slow') {
    started?.();
    setTimeout(() => res.end('slow'), ms);
  } else res.end('fast');
};

/** An HTTP/1.1 GET over TLS; resolves with the body, or '' when the connection failed or was closed. */
function get(port: number, path: string, options: ConnectionOptions): Promise<string> {
  return new Promise((resolve) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ALPNProtocols: ['http/1.1'], rejectUnauthorized: false, ...options }, () => socket.write(`GET ${path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`));
    let data = '';
    socket.on('data', (c: Buffer) => (data += c.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => resolve(data.slice(data.indexOf('\r\n\r\n') + 4)));
  });
}

/** An HTTP/1.1 GET over TLS with SNI `servername`: the body, and the fingerprint of the certificate the server presented ('' when the connection failed). */
function getWithCertificate(port: number, servername: string): Promise<{ body: string; fingerprint: string }> {
  return new Promise((resolve) => {
    let fingerprint = '';
    const socket = tlsConnect({ host: '127.0.0.1', port, servername, ALPNProtocols: ['http/1.1'], rejectUnauthorized: false }, () => {
      fingerprint = socket.getPeerX509Certificate()?.fingerprint256 ?? '';
      socket.write('GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
    });
    let data = '';
    socket.on('data', (c: Buffer) => (data += c.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => resolve({ body: data.slice(data.indexOf('\r\n\r\n') + 4), fingerprint }));
  });
}

const closed = (socket: Socket) => new Promise<void>((resolve) => (socket.destroyed ? resolve() : socket.once('close', () => resolve())));

describe('listenTls', () => {
  let dir: string;
  let a: { cert: string; key: string };
  let b: { cert: string; key: string };
  /** Another certificate for a.test (a rotation). */
  let a2: { cert: string; key: string };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-listen-tls-'));
    a = certificate(dir, 'a.test');
    a2 = certificate(dir, 'a.test');
    b = certificate(dir, 'b.test');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('a graceful close lets an HTTPS request in flight finish, and a connection stuck in its ClientHello does not hold it past the headers timeout', async () => {
    const contexts = new TlsContexts();
    contexts.update(snapshot({ 'a.test': a }));
    let started!: () => void;
    const inFlight = new Promise<void>((resolve) => (started = resolve));
    const { server, port } = await listenTls(handler(300, started), 0, '127.0.0.1', contexts, { requestHeadersTimeoutMs: 1_000 });
    const stuck = netConnect(port, '127.0.0.1', () => stuck.write(Buffer.from([22, 3, 1, 0, 200, 1])));
    stuck.on('error', () => {});
    const slow = get(port, '/slow', { servername: 'a.test' });
    await inFlight;
    await closeGracefully(server, 10_000);
    expect(await slow).toBe('slow');
    await closed(stuck);
  });

  test('one client address holds at most maxConnectionsPerClient sockets on the TLS listener too, refused before any TLS is read', async () => {
    const contexts = new TlsContexts();
    contexts.update(snapshot({ 'a.test': a }));
    const { server, port } = await listenTls(handler(0), 0, '127.0.0.1', contexts, { maxConnectionsPerClient: 2, requestHeadersTimeoutMs: 5_000 });
    const held = await Promise.all([0, 1].map(() => new Promise<Socket>((resolve) => { const s = netConnect(port, '127.0.0.1', () => resolve(s)); s.on('error', () => {}); })));
    try {
      expect(await get(port, '/', { servername: 'a.test' })).toBe('');
      expect(await get(port, '/', { servername: 'a.test', localAddress: '127.0.0.2' } as ConnectionOptions)).toBe('fast');
    } finally {
      for (const s of held) s.destroy();
      await closeGracefully(server, 1_000);
    }
  });

  test('a handshake whose SNI OpenSSL reads differently from the ClientHello reader is not served under either policy', async () => {
    const contexts = new TlsContexts();
    contexts.update(snapshot({ 'a.test': a, 'b.test': b }));
    const table = contexts.current;
    const hostB = table.hostFor('b.test')!;
    // The reader's lookup (the first per connection) is made to pick b.test's policy; later lookups answer truthfully.
    let lookups = 0;
    const real = table.hostFor.bind(table);
    table.hostFor = (name: string | undefined): TlsHost | undefined => (lookups++ === 0 ? hostB : real(name));
    const { server, port } = await listenTls(handler(0), 0, '127.0.0.1', contexts, {});
    try {
      // SNI a.test: OpenSSL's SNI callback disagrees with the reader, and the handshake fails.
      expect(await get(port, '/', { servername: 'a.test' })).toBe('');
      lookups = 0;
      // No SNI at all: the binding after the handshake disagrees (no default host), and the connection is closed.
      expect(await get(port, '/', { servername: '' })).toBe('');
      lookups = 0;
      table.hostFor = real;
      expect(await get(port, '/', { servername: 'a.test' })).toBe('fast');
    } finally {
      await closeGracefully(server, 1_000);
    }
  });

  test('a snapshot applied during a handshake (a rotated certificate) does not cut the connection: it is served under the certificate its ClientHello chose, the next one gets the new certificate', async () => {
    const contexts = new TlsContexts();
    contexts.update(snapshot({ 'a.test': a }));
    const rotated = snapshot({ 'a.test': a2 });
    // The rotation lands right after the ClientHello reader's lookup, before OpenSSL's SNI callback and the handshake's end.
    const table = contexts.current;
    const real = table.hostFor.bind(table);
    let rotate = true;
    table.hostFor = (name: string | undefined): TlsHost | undefined => {
      const host = real(name);
      if (rotate) (rotate = false), contexts.update(rotated);
      return host;
    };
    const { server, port } = await listenTls(handler(0), 0, '127.0.0.1', contexts, {});
    try {
      expect(await getWithCertificate(port, 'a.test')).toEqual({ body: 'fast', fingerprint: new X509Certificate(a.cert).fingerprint256 });
      expect(rotate).toBe(false);
      expect(await getWithCertificate(port, 'a.test')).toEqual({ body: 'fast', fingerprint: new X509Certificate(a2.cert).fingerprint256 });
    } finally {
      await closeGracefully(server, 1_000);
    }
  });
});
