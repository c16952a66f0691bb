import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UpstreamCluster } from '../../proxy/upstream/upstream-cluster.ts';
import type { Problem } from '../compile/errors.ts';
import { DEFAULT_LIMITS, OperationBudget } from '../limits/limits.ts';
import { compileRest, MAX_RESPONSE_BYTES, restResolver } from './rest.ts';
import type { OperationContext } from './types.ts';

// The REST resolver's upstream call (an undici dispatch handler) against a real in-process server.
let server: Server;
let cluster: UpstreamCluster;
const connections: { closed: boolean }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = req.url ?? '/';
    if (url === '/ok') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"1"}');
    if (url === '/empty') return void res.writeHead(200).end();
    if (url === '/text') return void res.writeHead(200).end('not json');
    if (url === '/missing') return void res.writeHead(404).end('{"error":"no such user"}');
    if (url === '/failing-big') {
      // A large error page: read up to a bound, then the connection is dropped rather than drained.
      res.writeHead(500, { 'content-type': 'text/html' });
      const chunk = 'x'.repeat(64 * 1024);
      let sent = 0;
      const more = () => {
        while (sent < 8 * 1024 * 1024 && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      return more();
    }
    if (url === '/huge') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('"');
      const chunk = 'y'.repeat(1024 * 1024);
      let sent = 0;
      const more = () => {
        while (sent <= MAX_RESPONSE_BYTES && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end('"');
      };
      return more();
    }
    if (url === '/slow') return; // never answers
    res.writeHead(500).end();
  });
  server.on('connection', (socket) => {
    const entry = { closed: false };
    connections.push(entry);
    socket.on('close', () => (entry.closed = true));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cluster = new UpstreamCluster('rest', [{ addr: '127.0.0.1', port: (server.address() as AddressInfo).port }]);
});

afterAll(async () => {
  await cluster?.close?.();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
});

const metrics = { ok: () => {}, error: () => {} };
function resolver(path: string, timeout = '2s') {
  const problems: Problem[] = [];
  const rest = compileRest({ upstreamRef: { name: 'rest' }, request: { headers: { ':path': path } }, timeout }, [], problems);
  expect(problems).toEqual([]);
  return restResolver(rest!, cluster, metrics);
}
function context(limits = DEFAULT_LIMITS): OperationContext {
  return { headers: {}, calls: new Map(), resolvers: {}, budget: new OperationBudget(limits) };
}
const failure = async (promise: unknown) => {
  try {
    await promise;
  } catch (error) {
    return error as { message: string; extensions: { code: string; http?: { status: number } } };
  }
  throw new Error('the call did not fail');
};

describe('restResolver upstream calls', () => {
  it('parses a 2xx JSON answer; an empty body is null', async () => {
    expect(await resolver('/ok')(null, {}, context())).toEqual({ id: '1' });
    expect(await resolver('/empty')(null, {}, context())).toBeNull();
  });

  it('a non-2xx answer is UPSTREAM_ERROR with its status, and its small body keeps the connection reusable', async () => {
    const before = connections.filter((c) => !c.closed).length;
    for (let i = 0; i < 3; i++) {
      const error = await failure(resolver('/missing')(null, {}, context()));
      expect(error.extensions).toMatchObject({ code: 'UPSTREAM_ERROR', http: { status: 404 } });
      expect(error.message).toContain('with HTTP 404');
    }
    expect(await resolver('/ok')(null, {}, context())).toEqual({ id: '1' });
    // Calls one after the other reuse one kept-alive connection.
    expect(connections.filter((c) => !c.closed).length).toBeLessThanOrEqual(Math.max(before, 1));
  });

  it('a large non-2xx body is not read to its end: the call fails with the status and that connection is closed', async () => {
    const error = await failure(resolver('/failing-big', '10s')(null, {}, context()));
    expect(error.extensions).toMatchObject({ code: 'UPSTREAM_ERROR', http: { status: 500 } });
    await expect.poll(() => connections.some((c) => c.closed)).toBe(true);
    expect(await resolver('/ok')(null, {}, context())).toEqual({ id: '1' });
  });

  it('an answer that is not JSON is BAD_UPSTREAM_RESPONSE; one over 10 MiB is cut off', async () => {
    expect((await failure(resolver('/text')(null, {}, context()))).extensions.code).toBe('BAD_UPSTREAM_RESPONSE');
    const huge = await failure(resolver('/huge', '30s')(null, {}, context()));
    expect(huge.extensions.code).toBe('BAD_UPSTREAM_RESPONSE');
    expect(huge.message).toContain(`more than ${MAX_RESPONSE_BYTES} bytes`);
  });

  it('the operation\'s buffered-bytes budget stops an answer that does not fit', async () => {
    const error = await failure(resolver('/huge', '30s')(null, {}, context({ ...DEFAULT_LIMITS, maxBufferedBytes: 64 * 1024 })));
    expect(error.extensions.code).toBe('GRAPHQL_LIMIT_BUFFERED_BYTES');
  });

  it('an upstream that does not answer is UPSTREAM_TIMEOUT after the resolver timeout', async () => {
    const error = await failure(resolver('/slow', '150ms')(null, {}, context()));
    expect(error.extensions.code).toBe('UPSTREAM_TIMEOUT');
    expect(error.message).toContain('within 150ms');
  });

  it('a refused connection is UPSTREAM_ERROR naming the cause', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const problems: Problem[] = [];
    const rest = compileRest({ upstreamRef: { name: 'gone' }, request: { headers: { ':path': '/ok' } } }, [], problems);
    const gone = new UpstreamCluster('gone', [{ addr: '127.0.0.1', port }]);
    const error = await failure(restResolver(rest!, gone, metrics)(null, {}, context()));
    expect(error.extensions.code).toBe('UPSTREAM_ERROR');
    expect(error.message).toContain('ECONNREFUSED');
  });
});
