import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough, type Transform } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { metrics } from '../../admin/metrics.ts';
import { MAX_SHADOWS_IN_FLIGHT, SHADOW_BODY_LIMIT, shadowAuthority, shadowsInFlight, startShadow, type CompiledShadow, type ShadowRequest } from './shadow.ts';
import { UpstreamCluster } from '../upstream/upstream-cluster.ts';

/** What the shadow server saw. */
interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

let server: Server;
let cluster: UpstreamCluster;
const seen: Seen[] = [];
/** Requests the server holds unanswered (path /hang). */
const held: ServerResponse[] = [];

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks) });
      if (req.url === '/hang') held.push(res);
      // The shadow's status never matters: it answers 500.
      else res.writeHead(500).end('shadow says no');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cluster = new UpstreamCluster('test/shadow', [{ addr: '127.0.0.1', port: (server.address() as AddressInfo).port }]);
});

afterAll(async () => {
  for (const res of held) res.destroy();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await Promise.all(cluster.hosts.map((h) => h.dispatcher.close().catch(() => {})));
});

const shadow = (fraction = 1): CompiledShadow => ({ cluster, fraction });
const request = (path: string, timeoutMs = 5_000): ShadowRequest => ({
  method: 'POST',
  path,
  headers: () => ['host', 'app.example:8080', 'x-test', path],
  timeoutMs,
  logger: { debug: () => {} },
  requestId: 'r1',
});

async function counted(result: string): Promise<number> {
  const values = (await metrics.shadowRequests.get()).values;
  return values.find((v) => v.labels.upstream === 'test/shadow' && v.labels.result === result)?.value ?? 0;
}

async function until(probe: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A request body stream as the gateway has it, and what the primary reads through the tee. */
function bodyThrough(tee: Transform): Promise<Buffer> {
  const chunks: Buffer[] = [];
  tee.on('data', (c: Buffer) => chunks.push(c));
  return new Promise((resolve, reject) => tee.once('end', () => resolve(Buffer.concat(chunks))).once('error', reject));
}

describe('shadowAuthority (Envoy: -shadow before a port)', () => {
  test.each([
    ['foo.bar.com', 'foo.bar.com-shadow'],
    ['foo.bar.com:8080', 'foo.bar.com-shadow:8080'],
    ['[::1]:8080', '[::1]-shadow:8080'],
    ['[::1]', '[::1]-shadow'],
    ['10.0.0.1', '10.0.0.1-shadow'],
  ])('%s → %s', (given, expected) => expect(shadowAuthority(given)).toBe(expected));
});

describe('startShadow against a real server', () => {
  test('a request without a body is copied at once with the -shadow Host; the shadow\'s 500 is only counted', async () => {
    const ok = await counted('ok');
    expect(startShadow(shadow(), new PassThrough() as unknown as IncomingMessage, false, request('/plain?q=1'))).toBeUndefined();
    await until(() => seen.some((s) => s.url === '/plain?q=1'));
    const copy = seen.find((s) => s.url === '/plain?q=1')!;
    expect(copy).toMatchObject({ method: 'POST', headers: { host: 'app.example-shadow:8080', 'x-test': '/plain?q=1' } });
    await until(async () => (await counted('ok')) === ok + 1);
    expect(shadowsInFlight()).toBe(0);
  });

  test('percentage 0 copies nothing', () => {
    const before = seen.length;
    for (let i = 0; i < 50; i++) expect(startShadow(shadow(0), new PassThrough() as unknown as IncomingMessage, false, request('/never'))).toBeUndefined();
    expect(seen.length).toBe(before);
    expect(shadowsInFlight()).toBe(0);
  });

  test('a body passes through to the primary unchanged and the shadow gets the same bytes once it is whole', async () => {
    const req = new PassThrough();
    const tee = startShadow(shadow(), req as unknown as IncomingMessage, true, request('/body'))!;
    const primary = bodyThrough(tee);
    const parts = Array.from({ length: 20 }, (_, i) => Buffer.alloc(10_000, i));
    for (const part of parts) req.write(part);
    req.end();
    expect((await primary).equals(Buffer.concat(parts))).toBe(true);
    await until(() => seen.some((s) => s.url === '/body'));
    expect(seen.find((s) => s.url === '/body')!.body.equals(Buffer.concat(parts))).toBe(true);
  });

  test(`a body above ${SHADOW_BODY_LIMIT} bytes reaches the primary whole and is not shadowed (counted body_too_large)`, async () => {
    const before = await counted('body_too_large');
    const req = new PassThrough();
    const tee = startShadow(shadow(), req as unknown as IncomingMessage, true, request('/too-large'))!;
    const primary = bodyThrough(tee);
    const big = Buffer.alloc(SHADOW_BODY_LIMIT + 100_000, 7);
    req.end(big);
    expect((await primary).length).toBe(big.length);
    expect(await counted('body_too_large')).toBe(before + 1);
    expect(shadowsInFlight()).toBe(0);
    expect(seen.some((s) => s.url === '/too-large')).toBe(false);
  });

  test('the primary stopping mid-body (client gone) sends no copy and frees the slot (counted abandoned)', async () => {
    const before = await counted('abandoned');
    const req = new PassThrough();
    const tee = startShadow(shadow(), req as unknown as IncomingMessage, true, request('/abandoned'))!;
    tee.resume();
    req.write(Buffer.alloc(1000));
    expect(shadowsInFlight()).toBe(1);
    req.emit('aborted');
    await until(() => tee.destroyed);
    expect(await counted('abandoned')).toBe(before + 1);
    expect(shadowsInFlight()).toBe(0);
  });

  test(`shadows that hang: at most ${MAX_SHADOWS_IN_FLIGHT} in flight (more are counted overloaded), each cut at its timeout`, { timeout: 30_000 }, async () => {
    const overloaded = await counted('overloaded');
    const failed = await counted('failed');
    const hangsBefore = held.length;
    for (let i = 0; i < MAX_SHADOWS_IN_FLIGHT + 3; i++) startShadow(shadow(), new PassThrough() as unknown as IncomingMessage, false, request('/hang', 1_500));
    expect(shadowsInFlight()).toBe(MAX_SHADOWS_IN_FLIGHT);
    expect(await counted('overloaded')).toBe(overloaded + 3);
    // The server holds them all (the copies were sent, nothing answered)...
    await until(() => held.length - hangsBefore === MAX_SHADOWS_IN_FLIGHT);
    // ...and each is given up at its deadline: the slots come back, counted failed.
    await until(() => shadowsInFlight() === 0);
    expect(await counted('failed')).toBe(failed + MAX_SHADOWS_IN_FLIGHT);
  });

  test('a shadow whose server resets the connection is counted failed', async () => {
    const resetting = createServer((req) => req.socket.destroy());
    await new Promise<void>((resolve) => resetting.listen(0, '127.0.0.1', resolve));
    const other = new UpstreamCluster('test/shadow', [{ addr: '127.0.0.1', port: (resetting.address() as AddressInfo).port }]);
    const failed = await counted('failed');
    startShadow({ cluster: other, fraction: 1 }, new PassThrough() as unknown as IncomingMessage, false, request('/reset'));
    await until(async () => (await counted('failed')) === failed + 1);
    expect(shadowsInFlight()).toBe(0);
    await other.hosts[0]!.dispatcher.close();
    await new Promise((resolve) => resetting.close(resolve));
  });
});
