import { execFileSync } from 'node:child_process';
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

const closed = (socket: Socket) => new Promise<void>((resolve) => (socket.destroyed ? resolve() : socket.once('close', () => resolve())));

describe('listenTls', () => {
  let dir: string;
  let a: { cert: string; key: string };
  let b: { cert: string; key: string };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-listen-tls-'));
    a = certificate(dir, 'a.test');
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
    const hostB = contexts.hostFor('b.test')!;
    // The reader's lookup (the first per connection) is made to pick b.test's policy; later lookups answer truthfully.
    let lookups = 0;
    const real = contexts.hostFor.bind(contexts);
    contexts.hostFor = (name: string | undefined): TlsHost | undefined => (lookups++ === 0 ? hostB : real(name));
    const { server, port } = await listenTls(handler(0), 0, '127.0.0.1', contexts, {});
    try {
      // SNI a.test: OpenSSL's SNI callback disagrees with the reader, and the handshake fails.
      expect(await get(port, '/', { servername: 'a.test' })).toBe('');
      lookups = 0;
      // No SNI at all: the binding after the handshake disagrees (no default host), and the connection is closed.
      expect(await get(port, '/', { servername: '' })).toBe('');
      lookups = 0;
      contexts.hostFor = real;
      expect(await get(port, '/', { servername: 'a.test' })).toBe('fast');
    } finally {
      await closeGracefully(server, 1_000);
    }
  });
});
