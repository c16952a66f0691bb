/**
 * Gloo's `tcpGateway` through `gatehouse run` (docs/tcp-proxy.md), with real TCP echo servers
 * and real TLS servers and clients: plain forwarding with half-close and backpressure (a large
 * transfer), SNI routing to two TLS backends with the encrypted bytes passed through (the client
 * sees each backend's own certificate), an unknown SNI closed, TLS terminated by the gateway
 * when the host has a certificate, `forwardSniClusterName`, weighted `multi`, an upstream that
 * refuses (the client is closed cleanly), the idle timeout, the connection limit, PROXY protocol
 * in front, hostile first bytes, and the metrics.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selfSignedCert } from '../conformance/support.ts';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { freePort } from '../support/ports.ts';
import { refusedPort } from '../support/upstream.ts';

/** A TCP server that answers each chunk with `<name>:<chunk>`, and `<name>:bye` after the client's FIN (then closes): half-close visible. */
async function tcpEcho(name: string): Promise<{ server: Server; port: number; peers: string[] }> {
  const peers: string[] = [];
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    peers.push(`${socket.remoteAddress}`);
    socket.on('error', () => {});
    socket.on('data', (chunk) => socket.write(`${name}:${chunk.toString('latin1')}`));
    socket.on('end', () => socket.end(`${name}:bye`));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, port: (server.address() as AddressInfo).port, peers };
}

/** A TCP server that sends back every byte it gets, unchanged (for the large transfer). */
async function mirror(): Promise<{ server: Server; port: number }> {
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('error', () => {});
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, port: (server.address() as AddressInfo).port };
}

/** A TLS server with its own certificate, answering `<name>:<chunk>`. */
async function tlsBackend(name: string, pair: { cert: string; key: string }): Promise<{ server: Server; port: number }> {
  const server = createTlsServer({ cert: pair.cert, key: pair.key }, (socket) => {
    socket.on('error', () => {});
    socket.on('data', (chunk) => socket.write(`${name}:${chunk.toString('latin1')}`));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, port: (server.address() as AddressInfo).port };
}

/** Writes `data`, half-closes, and reads until the server closes; `fin`: the close came as a FIN (not a reset). */
function talk(port: number, data: string | Buffer, options: { timeoutMs?: number; prefix?: Buffer } = {}): Promise<{ text: string; fin: boolean; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    let text = '';
    let fin = false;
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => (text += c));
    socket.on('end', () => {
      fin = true;
      socket.end();
    });
    socket.on('error', () => {});
    const timer = setTimeout(() => (socket.destroy(), resolve({ text, fin, closed: false })), options.timeoutMs ?? 5_000);
    socket.on('close', () => (clearTimeout(timer), resolve({ text, fin, closed: true })));
    socket.on('connect', () => {
      if (options.prefix) socket.write(options.prefix);
      socket.end(data);
    });
  });
}

/** A TLS client with `servername`; resolves with the peer certificate's CN and the first answer to `hello`, or the error. */
function tlsTalk(port: number, servername: string, hello = 'hi'): Promise<{ cn: string | undefined; answer: string } | { error: string }> {
  return new Promise((resolve) => {
    const socket: TLSSocket = tlsConnect({ port, host: '127.0.0.1', servername, rejectUnauthorized: false });
    const timer = setTimeout(() => (socket.destroy(), resolve({ error: 'timeout' })), 5_000);
    socket.once('error', (e) => (clearTimeout(timer), resolve({ error: e.message })));
    socket.once('close', () => (clearTimeout(timer), resolve({ error: 'closed' })));
    socket.once('secureConnect', () => {
      const cn = socket.getPeerCertificate().subject?.CN as string | undefined;
      socket.write(hello);
      socket.once('data', (d) => {
        clearTimeout(timer);
        resolve({ cn, answer: d.toString('latin1') });
        socket.end();
      });
    });
  });
}

async function metric(gh: GatehouseProcess, line: string): Promise<number> {
  const text = (await send(gh.adminUrl, { path: '/metrics' })).body;
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found ? Number(found.split(' ').pop()) : 0;
}

let work: string;
let a: Awaited<ReturnType<typeof tcpEcho>>;
let b: Awaited<ReturnType<typeof tcpEcho>>;
let big: Awaited<ReturnType<typeof mirror>>;
let tlsA: Awaited<ReturnType<typeof tlsBackend>>;
let tlsB: Awaited<ReturnType<typeof tlsBackend>>;
let config: ConfigDir;
let gh: GatehouseProcess;
const port: Record<string, number> = {};
let clientPair: { cert: string; key: string };
let strangerPair: { cert: string; key: string };

const gateway = (name: string, bindPort: number, tcpGateway: object, extra: object = {}) => ({ apiVersion: 'gateway.solo.io/v1', kind: 'Gateway', metadata: { name, namespace: 'default' }, spec: { bindAddress: '127.0.0.1', bindPort, tcpGateway, ...extra } });
const to = (upstream: string) => ({ single: { upstream: { name: upstream } } });

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'gatehouse-l4-tcp-'));
  const [pairA, pairB, pairTerm, client] = await Promise.all([selfSignedCert(work, 'a', ['a.test']), selfSignedCert(work, 'b', ['b.test', '*.b.test']), selfSignedCert(work, 'term', ['term.test', 'mtls.test']), selfSignedCert(work, 'client', ['client.test'])]);
  clientPair = client;
  strangerPair = await selfSignedCert(work, 'stranger', ['client.test']);
  [a, b, big, tlsA, tlsB] = await Promise.all([tcpEcho('A'), tcpEcho('B'), mirror(), tlsBackend('TLS-A', pairA), tlsBackend('TLS-B', pairB)]);
  for (const name of ['plain', 'sni', 'multi', 'refused', 'idle', 'limit', 'proxied', 'proxiedsni', 'kube']) port[name] = await freePort();
  const refused = await refusedPort();
  config = await makeConfigDir({
    'upstreams.yaml': [
      manifests.upstream('tcp-a', [{ addr: '127.0.0.1', port: a.port }]),
      manifests.upstream('tcp-b', [{ addr: '127.0.0.1', port: b.port }]),
      manifests.upstream('mirror', [{ addr: '127.0.0.1', port: big.port }]),
      manifests.upstream('tls-a', [{ addr: '127.0.0.1', port: tlsA.port }]),
      manifests.upstream('tls-b', [{ addr: '127.0.0.1', port: tlsB.port }]),
      manifests.upstream('nothing', [{ addr: '127.0.0.1', port: refused }]),
    ],
    'secret.yaml': { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name: 'term-tls', namespace: 'default' }, data: { 'tls.crt': Buffer.from(pairTerm.cert).toString('base64'), 'tls.key': Buffer.from(pairTerm.key).toString('base64') } },
    'gateways.yaml': [
      // Gloo's TCP proxy guide, with a free port and the echo upstream.
      gateway('plain', port.plain!, { tcpHosts: [{ name: 'one', destination: { single: { upstream: { name: 'mirror', namespace: 'default' } } } }] }, { useProxyProto: false }),
      gateway('sni', port.sni!, {
        tcpHosts: [
          { name: 'a', sslConfig: { sniDomains: ['a.test'] }, destination: to('tls-a') },
          { name: 'b', sslConfig: { sniDomains: ['b.test', '*.b.test'] }, destination: to('tls-b') },
          { name: 'term', sslConfig: { sniDomains: ['term.test'], sslFiles: { tlsCert: pairTerm.certFile, tlsKey: pairTerm.keyFile } }, destination: to('tcp-a') },
          { name: 'by-cluster', sslConfig: { sniDomains: ['tls-b_default'] }, destination: { forwardSniClusterName: {} } },
          { name: 'by-secret', sslConfig: { sniDomains: ['secret.test'], secretRef: { name: 'term-tls', namespace: 'default' } }, destination: to('tcp-b') },
          { name: 'mtls', sslConfig: { sniDomains: ['mtls.test'], sslFiles: { tlsCert: pairTerm.certFile, tlsKey: pairTerm.keyFile, rootCa: client.certFile } }, destination: to('tcp-b') },
        ],
      }),
      gateway('multi', port.multi!, { tcpHosts: [{ name: 'split', destination: { multi: { destinations: [{ weight: 1, destination: { upstream: { name: 'tcp-a' } } }, { weight: 1, destination: { upstream: { name: 'tcp-b' } } }, { weight: 0, destination: { upstream: { name: 'nothing' } } }] } } }] }),
      gateway('refused', port.refused!, { tcpHosts: [{ name: 'down', destination: to('nothing') }], options: { tcpProxySettings: { maxConnectAttempts: 2 } } }),
      gateway('idle', port.idle!, { tcpHosts: [{ name: 'slow', destination: to('tcp-a') }], options: { tcpProxySettings: { idleTimeout: '1s' } } }),
      gateway('limit', port.limit!, { tcpHosts: [{ name: 'few', destination: to('tcp-a') }], options: { connectionLimit: { maxActiveConnections: 2 } } }),
      gateway('proxied', port.proxied!, { tcpHosts: [{ name: 'pp', destination: to('tcp-b') }] }, { useProxyProto: true }),
      gateway('kube', port.kube!, { tcpHosts: [{ name: 'svc', destination: { single: { kube: { ref: { name: 'tcp-echo', namespace: 'apps' }, port: a.port } } } }] }),
      gateway('proxiedsni', port.proxiedsni!, { tcpHosts: [{ name: 'a', sslConfig: { sniDomains: ['a.test'] }, destination: to('tls-a') }] }, { options: { proxyProtocol: {} } }),
    ],
  });
  gh = await startGatehouse('run', ['--config-dir', config.path, '--request-headers-timeout', '1s', '--resolve', 'tcp-echo.apps.svc.cluster.local=127.0.0.1']);
  for (const name of Object.keys(port)) await gh.waitForLog((l) => l.msg === 'Gateway listener bound' && l.gateway === `default/${name}`);
});

afterAll(async () => {
  await gh?.stop();
  await config?.cleanup();
  for (const s of [a, b, big, tlsA, tlsB]) s?.server.close();
  await rm(work, { recursive: true, force: true });
});

describe('tcpGateway', () => {
  it('loads Gloo-shaped Gateways without warnings and lists them as TCP listeners', async () => {
    const all = (JSON.parse((await send(gh.adminUrl, { path: '/config' })).body) as { resources: { kind: string; name: string; state: string; reasons: unknown[] }[] }).resources.filter((r) => r.kind === 'Gateway');
    expect(all.map((r) => [r.name, r.state, r.reasons]).sort()).toEqual(Object.keys(port).sort().map((n) => [n, 'Accepted', []]));
  });

  it('forwards bytes both ways, passes a FIN on, and the answer after it still arrives (half-close)', async () => {
    const echo = await tcpEcho('H');
    const gwPort = await freePort();
    await config.write('half.yaml', [manifests.upstream('half', [{ addr: '127.0.0.1', port: echo.port }]), gateway('half', gwPort, { tcpHosts: [{ name: 'h', destination: to('half') }] })]);
    await gh.waitForLog((l) => l.msg === 'Gateway listener bound' && l.gateway === 'default/half');
    const reply = await talk(gwPort, 'ping');
    expect(reply).toEqual({ text: 'H:pingH:bye', fin: true, closed: true });
    await config.remove('half.yaml');
    echo.server.close();
  });

  it('moves 32 MiB each way with backpressure, byte for byte', async () => {
    const size = 32 * 1024 * 1024;
    const data = Buffer.alloc(size);
    for (let i = 0; i < size; i += 4) data.writeUInt32LE((i * 2654435761) >>> 0, i);
    const want = createHash('sha256').update(data).digest('hex');
    const got = await new Promise<{ hash: string; bytes: number }>((resolve, reject) => {
      const socket = connect({ port: port.plain!, host: '127.0.0.1', allowHalfOpen: true });
      const hash = createHash('sha256');
      let bytes = 0;
      socket.on('data', (c: Buffer) => {
        hash.update(c);
        bytes += c.length;
      });
      socket.on('end', () => resolve({ hash: hash.digest('hex'), bytes }));
      socket.on('error', reject);
      socket.on('connect', () => socket.end(data));
    });
    expect(got).toEqual({ hash: want, bytes: size });
    await eventually(async () => (await metric(gh, 'gatehouse_tcp_bytes_total{gateway="default/plain",host="one",direction="received"}')) >= size);
    expect(await metric(gh, 'gatehouse_tcp_bytes_total{gateway="default/plain",host="one",direction="sent"}')).toBeGreaterThanOrEqual(size);
  });

  it('a client that does not read holds the upstream back (backpressure), then gets every byte', async () => {
    // An upstream that writes 256 MiB as fast as the connection takes it.
    const total = 256 * 1024 * 1024;
    const chunk = Buffer.alloc(1024 * 1024, 9);
    let written = 0;
    const producer = createServer((socket) => {
      socket.on('error', () => {});
      const pump = (): void => {
        while (written < total) {
          written += chunk.length;
          if (!socket.write(chunk)) return void socket.once('drain', pump);
        }
        socket.end();
      };
      pump();
    });
    await new Promise<void>((resolve) => producer.listen(0, '127.0.0.1', () => resolve()));
    const gwPort = await freePort();
    await config.write('producer.yaml', [manifests.upstream('producer', [{ addr: '127.0.0.1', port: (producer.address() as AddressInfo).port }]), gateway('producer', gwPort, { tcpHosts: [{ name: 'p', destination: to('producer') }] })]);
    await gh.waitForLog((l) => l.msg === 'Gateway listener bound' && l.gateway === 'default/producer');
    const client = connect(gwPort, '127.0.0.1');
    client.pause();
    await new Promise((resolve) => client.once('connect', resolve));
    // The upstream stalls once the buffers between it and the client are full: it is not drained into the gateway's memory.
    let last = -1;
    await eventually(async () => {
      const stable = written > 0 && written === last;
      last = written;
      return stable;
    }, 20_000, 500);
    expect(written).toBeLessThan(64 * 1024 * 1024);
    // Reading now: every byte arrives.
    let read = 0;
    await new Promise<void>((resolve) => {
      client.on('data', (c: Buffer) => (read += c.length));
      client.on('end', () => resolve());
      client.resume();
    });
    expect(read).toBe(total);
    producer.close();
    await config.remove('producer.yaml');
  });

  it('routes TLS by SNI to two backends without terminating it: the client sees each backend certificate', async () => {
    expect(await tlsTalk(port.sni!, 'a.test')).toEqual({ cn: 'a.test', answer: 'TLS-A:hi' });
    expect(await tlsTalk(port.sni!, 'b.test')).toEqual({ cn: 'b.test', answer: 'TLS-B:hi' });
    expect(await tlsTalk(port.sni!, 'x.B.test')).toEqual({ cn: 'b.test', answer: 'TLS-B:hi' });
  });

  it('closes an unknown SNI, a hello without SNI, and plain bytes (no catch-all host)', async () => {
    const before = await metric(gh, 'gatehouse_tcp_connections_total{gateway="default/sni",host="-",result="no_route"}');
    expect(await tlsTalk(port.sni!, 'c.test')).toHaveProperty('error');
    expect(await talk(port.sni!, 'GET / HTTP/1.1\r\n\r\n')).toMatchObject({ text: '', closed: true });
    expect(await metric(gh, 'gatehouse_tcp_connections_total{gateway="default/sni",host="-",result="no_route"}')).toBe(before + 2);
  });

  it('terminates TLS for a host with a certificate and forwards the plaintext', async () => {
    expect(await tlsTalk(port.sni!, 'term.test', 'plain please')).toEqual({ cn: 'term.test', answer: 'A:plain please' });
    // The certificate from a kubernetes.io/tls Secret, as a VirtualService's sslConfig takes it.
    expect(await tlsTalk(port.sni!, 'secret.test', 'from secret')).toEqual({ cn: 'term.test', answer: 'B:from secret' });
  });

  it('termination with a root CA requires a client certificate signed by it; a failed handshake is counted', async () => {
    const withCert = await new Promise<string>((resolve, reject) => {
      const socket = tlsConnect({ port: port.sni!, host: '127.0.0.1', servername: 'mtls.test', rejectUnauthorized: false, cert: clientPair.cert, key: clientPair.key });
      socket.once('error', reject);
      socket.once('secureConnect', () => socket.once('data', (d) => (resolve(d.toString()), socket.end())).write('with cert'));
    });
    expect(withCert).toBe('B:with cert');
    const metricLine = 'gatehouse_tcp_connections_total{gateway="default/sni",host="mtls",result="tls_handshake"}';
    const before = await metric(gh, metricLine);
    // No certificate, and one the root CA did not sign: closed, nothing reaches the upstream.
    expect(await tlsTalk(port.sni!, 'mtls.test')).toHaveProperty('error');
    const stranger = await new Promise<string>((resolve) => {
      const socket = tlsConnect({ port: port.sni!, host: '127.0.0.1', servername: 'mtls.test', rejectUnauthorized: false, cert: strangerPair.cert, key: strangerPair.key });
      let got = '';
      socket.on('data', (d) => (got += d.toString()));
      socket.on('error', () => {});
      socket.once('secureConnect', () => socket.write('no'));
      socket.once('close', () => resolve(got));
    });
    expect(stranger).toBe('');
    await eventually(async () => (await metric(gh, metricLine)) === before + 2);
    // A TLS record of garbage after the ClientHello's first bytes: the handshake fails, nothing else does.
    const garbage = Buffer.concat([Buffer.from([0x16, 0x03, 0x01, 0x00, 0x30, 0x01, 0x00, 0x00, 0x2c, 0x03, 0x03]), Buffer.alloc(42, 7)]);
    expect(await talk(port.sni!, garbage)).toMatchObject({ text: '', closed: true });
    expect(await metric(gh, 'gatehouse_unhandled_errors_total')).toBe(0);
  });

  it('forwardSniClusterName: the SNI names the Upstream (`name_namespace`)', async () => {
    expect(await tlsTalk(port.sni!, 'tls-b_default')).toEqual({ cn: 'b.test', answer: 'TLS-B:hi' });
  });

  it('a kube destination is the service name under the cluster domain (here --resolve to the echo server)', async () => {
    expect(await talk(port.kube!, 'k8s')).toEqual({ text: 'A:k8sA:bye', fin: true, closed: true });
  });

  it('multi: connections are spread by weight (weight 0 never chosen)', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 24 && seen.size < 2; i++) seen.add((await talk(port.multi!, 'x')).text.slice(0, 1));
    expect([...seen].sort()).toEqual(['A', 'B']);
  });

  it('an upstream that refuses: every attempt fails, and the client is closed cleanly (FIN, no data)', async () => {
    const before = await metric(gh, 'gatehouse_tcp_connections_total{gateway="default/refused",host="down",result="connect_failure"}');
    expect(await talk(port.refused!, 'hello')).toEqual({ text: '', fin: true, closed: true });
    expect(await metric(gh, 'gatehouse_tcp_connections_total{gateway="default/refused",host="down",result="connect_failure"}')).toBe(before + 1);
  });

  it('closes both sides after the idle timeout', async () => {
    const result = await new Promise<{ text: string; closed: boolean }>((resolve) => {
      const socket = connect(port.idle!, '127.0.0.1');
      let text = '';
      socket.setEncoding('latin1');
      socket.on('data', (c: string) => (text += c));
      socket.on('error', () => {});
      const timer = setTimeout(() => (socket.destroy(), resolve({ text, closed: false })), 10_000);
      socket.on('close', () => (clearTimeout(timer), resolve({ text, closed: true })));
      socket.on('connect', () => socket.write('once'));
    });
    expect(result).toEqual({ text: 'A:once', closed: true });
  });

  it('refuses connections over maxActiveConnections while the first ones stay served', async () => {
    const open: Socket[] = [];
    for (let i = 0; i < 2; i++) {
      const s = connect(port.limit!, '127.0.0.1');
      s.on('error', () => {});
      await new Promise<void>((resolve) => s.once('data', () => resolve()).write(`k${i}`));
      open.push(s);
    }
    const before = await metric(gh, 'gatehouse_tcp_connections_total{gateway="default/limit",host="-",result="connection_limit"}');
    expect(await talk(port.limit!, 'third')).toMatchObject({ text: '', closed: true });
    expect(await metric(gh, 'gatehouse_tcp_connections_total{gateway="default/limit",host="-",result="connection_limit"}')).toBe(before + 1);
    const stillServed = await new Promise<string>((resolve) => open[0]!.once('data', (d) => resolve(d.toString())).write('again'));
    expect(stillServed).toBe('A:again');
    for (const s of open) s.destroy();
    // Freed: a new connection is served again.
    await eventually(async () => (await talk(port.limit!, 'fourth')).text === 'A:fourthA:bye');
  });

  it('useProxyProto: the PROXY header is read and not forwarded; one without a header is refused', async () => {
    const prefix = Buffer.from('PROXY TCP4 192.0.2.1 10.0.0.1 1000 2000\r\n');
    expect(await talk(port.proxied!, 'data', { prefix })).toEqual({ text: 'B:dataB:bye', fin: true, closed: true });
    expect(await talk(port.proxied!, 'data')).toMatchObject({ text: '', closed: true });
  });

  it('PROXY header, then a ClientHello routed by SNI (options.proxyProtocol)', async () => {
    const raw = connect(port.proxiedsni!, '127.0.0.1');
    await new Promise((resolve) => raw.once('connect', resolve));
    raw.write('PROXY TCP4 192.0.2.1 10.0.0.1 1000 2000\r\n');
    const tls = tlsConnect({ socket: raw, servername: 'a.test', rejectUnauthorized: false });
    await new Promise((resolve, reject) => (tls.once('secureConnect', resolve), tls.once('error', reject)));
    expect(tls.getPeerCertificate().subject?.CN).toBe('a.test');
    const answer = await new Promise<string>((resolve) => tls.once('data', (d) => resolve(d.toString())).write('over pp'));
    expect(answer).toBe('TLS-A:over pp');
    tls.destroy();
  });

  it('hostile first bytes on the SNI listener: a broken ClientHello, an oversized one, silence; the process serves on', async () => {
    const pid = gh.child.pid;
    const broken = Buffer.from([0x16, 0x03, 0x01, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00]);
    expect(await talk(port.sni!, broken)).toMatchObject({ text: '', closed: true });
    const huge = Buffer.concat([Buffer.from([0x16, 0x03, 0x01, 0x40, 0x00, 0x01, 0xff, 0xff, 0xff]), Buffer.alloc(100)]);
    expect(await talk(port.sni!, huge)).toMatchObject({ text: '', closed: true });
    const silent: Socket[] = [];
    const closed = new Set<Socket>();
    for (let i = 0; i < 100; i++) {
      const s = connect(port.sni!, '127.0.0.1');
      s.on('error', () => {});
      s.on('close', () => closed.add(s));
      silent.push(s);
    }
    await eventually(async () => closed.size === silent.length, 15_000);
    expect(await metric(gh, 'gatehouse_tcp_connections_total{gateway="default/sni",host="-",result="hello_timeout"}')).toBeGreaterThanOrEqual(100);
    expect(await tlsTalk(port.sni!, 'a.test')).toEqual({ cn: 'a.test', answer: 'TLS-A:hi' });
    expect(gh.child.pid).toBe(pid);
    expect(await metric(gh, 'gatehouse_unhandled_errors_total')).toBe(0);
    await eventually(async () => (await metric(gh, 'gatehouse_tcp_active_connections{gateway="default/sni"}')) === 0);
  });

  it('a changed destination is swapped in place; a removed Gateway stops listening', async () => {
    const gwPort = await freePort();
    const half = (upstream: string) => gateway('swap', gwPort, { tcpHosts: [{ name: 's', destination: to(upstream) }] });
    await config.write('swap.yaml', half('tcp-a'));
    await gh.waitForLog((l) => l.msg === 'Gateway listener bound' && l.gateway === 'default/swap');
    expect((await talk(gwPort, 'x')).text).toBe('A:xA:bye');
    await config.write('swap.yaml', half('tcp-b'));
    await eventually(async () => (await talk(gwPort, 'y')).text === 'B:yB:bye');
    expect(gh.logs.filter((l) => l.msg === 'Gateway listener bound' && l.gateway === 'default/swap')).toHaveLength(1);
    await config.remove('swap.yaml');
    await gh.waitForLog((l) => l.msg === 'Gateway listener closed' && l.gateway === 'default/swap');
    await eventually(async () => (await talk(gwPort, 'z', { timeoutMs: 1_000 })).text === '');
  });
});
