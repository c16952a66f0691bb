import { describe, expect, test } from 'vitest';
import { pino } from 'pino';
import { registry } from '../../admin/metrics.ts';
import type { RequestContext } from '../context.ts';
import { ChainRequest, compileChain, FilterCodes, isPending, runRequestFilters, runResponseHeaderFilters, type FilterChain } from './chain.ts';
import { FilterStage, type HttpFilter } from './http-filter.ts';

const lines: Record<string, unknown>[] = [];
const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });

function request(chain: FilterChain): ChainRequest {
  const req = { method: 'GET', url: '/', headers: {}, socket: { remoteAddress: '127.0.0.1' } };
  const res = { destroyed: false };
  const ctx: RequestContext = { requestId: 'r1', start: 0, virtualHost: 'default/vs', route: 'r', headers: {}, logger };
  return new ChainRequest(req as never, res as never, ctx, '/', chain);
}

const noRematch = () => 'no-route' as const;

async function failureCount(filter: string, hook: string): Promise<number> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === 'gatehouse_filter_failures_total');
  return (metric?.values.find((v) => v.labels.filter === filter && v.labels.hook === hook)?.value as number | undefined) ?? 0;
}

describe('the filter chain runner', () => {
  test('a route without filters has no chain at all', () => {
    expect(compileChain([])).toBeUndefined();
  });

  test('filters run in stage order whatever the factory order; synchronous verdicts stay synchronous', () => {
    const seen: string[] = [];
    const filter = (name: string, stage: number): HttpFilter => ({ name, stage, onRequest: () => void seen.push(name) });
    const chain = compileChain([filter('transformation', FilterStage.transformation), filter('fault', FilterStage.fault), filter('extauth', FilterStage.extauth), filter('cors', FilterStage.cors)])!;
    const verdict = runRequestFilters(request(chain), noRematch);
    expect(isPending(verdict)).toBe(false);
    expect(verdict).toBeUndefined();
    expect(seen).toEqual(['fault', 'cors', 'extauth', 'transformation']);
  });

  test('the first reply ends the chain; a later filter does not run', async () => {
    let later = false;
    const chain = compileChain([
      { name: 'a', stage: 1, onRequest: () => Promise.resolve(undefined) },
      { name: 'b', stage: 2, onRequest: () => Promise.resolve({ status: 429, code: 'GH_RATELIMITED' }) },
      { name: 'c', stage: 3, onRequest: () => void (later = true) },
    ])!;
    const verdict = runRequestFilters(request(chain), noRematch);
    expect(isPending(verdict)).toBe(true);
    expect(await verdict).toEqual({ status: 429, code: 'GH_RATELIMITED' });
    expect(later).toBe(false);
  });

  test('a filter that throws is answered for: 500 GH_FILTER_FAILED, a log line naming it, a count', async () => {
    const before = await failureCount('broken', 'onRequest');
    const chain = compileChain([{ name: 'broken', stage: 1, onRequest: () => { throw new Error('bug'); } }])!;
    expect(runRequestFilters(request(chain), noRematch)).toEqual({ status: 500, code: FilterCodes.FAILED, body: 'internal error' });
    expect(lines.some((l) => l.filter === 'broken' && l.code === FilterCodes.FAILED)).toBe(true);
    expect(await failureCount('broken', 'onRequest')).toBe(before + 1);
  });

  test('a filter whose promise rejects is answered for the same way, never as an unhandled rejection', async () => {
    const before = await failureCount('rejects', 'onRequest');
    const chain = compileChain([{ name: 'rejects', stage: 1, onRequest: () => Promise.reject(new Error('bug')) }])!;
    await expect(runRequestFilters(request(chain), noRematch)).resolves.toMatchObject({ status: 500, code: FilterCodes.FAILED });
    expect(await failureCount('rejects', 'onRequest')).toBe(before + 1);
  });

  test('response header hooks run in reverse stage order; one that throws becomes the reply', () => {
    const seen: string[] = [];
    const chain = compileChain([
      { name: 'early', stage: 1, onResponseHeaders: (_r, _s, h) => void seen.push(`early:${h.join(',')}`) },
      { name: 'late', stage: 2, onResponseHeaders: (_r, _s, h) => void (seen.push('late'), h.push('x-late', '1')) },
    ])!;
    const headers = ['content-type', 'text/plain'];
    expect(runResponseHeaderFilters(request(chain), 200, headers)).toBe(200);
    expect(seen).toEqual(['late', 'early:content-type,text/plain,x-late,1']);
    const broken = compileChain([{ name: 'broken-response', stage: 1, onResponseHeaders: () => { throw new Error('bug'); } }])!;
    expect(runResponseHeaderFilters(request(broken), 200, [])).toMatchObject({ status: 500, code: FilterCodes.FAILED });
  });

  test('clearRouteCache: the new route\'s later-stage filters run, an earlier-stage one does not', () => {
    const seen: string[] = [];
    const first = compileChain([{ name: 'rewrite', stage: FilterStage.transformationEarly, onRequest: (r) => void ((r.path = '/other'), r.clearRouteCache()) }])!;
    const second = compileChain([
      { name: 'cors-of-new-route', stage: FilterStage.cors, onRequest: () => void seen.push('cors') },
      { name: 'auth-of-new-route', stage: FilterStage.extauth, onRequest: () => void seen.push('auth') },
    ])!;
    const r = request(first);
    expect(runRequestFilters(r, () => second)).toBeUndefined();
    expect(seen).toEqual(['auth']);
    expect(r.chain).toBe(second);
    expect(runRequestFilters(request(first), noRematch)).toMatchObject({ status: 404 });
  });
});

/** What a server saw of one request: readBody's answer, then what the request stream still yields (as a destination reads it), and the whole-body send. */
interface BodySeen {
  read: Buffer | string;
  streamed: string;
  whole: string | undefined;
}

/**
 * A real HTTP server whose handler runs `readBody(max)` as a filter would, then `commitBody`
 * for an upstream destination (or, with `stream`, reads the request stream as a destination
 * that takes it would); `write` sends raw bytes to it.
 */
async function bodyServer(max: number, stream: boolean): Promise<{ seen: Promise<BodySeen>; reading: Promise<void>; write(bytes: string): void; close(): void }> {
  const { createServer } = await import('node:http');
  const { connect } = await import('node:net');
  let started!: () => void;
  const reading = new Promise<void>((r) => (started = r));
  let done!: (seen: BodySeen) => void;
  const seen = new Promise<BodySeen>((r) => (done = r));
  const server = createServer((req, res) => {
    const ctx: RequestContext = { requestId: 'r1', start: 0, virtualHost: 'default/vs', route: 'r', headers: req.headers, logger };
    const r = new ChainRequest(req, res, ctx, '/', compileChain([{ name: 'x', stage: 1 }])!);
    const pending = r.readBody(max);
    started();
    void pending.then((read) => {
      if (typeof read === 'string' || stream) {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          done({ read: typeof read === 'string' ? read : Buffer.from(read), streamed: Buffer.concat(chunks).toString(), whole: undefined });
          res.end('ok');
        });
        return;
      }
      expect(r.commitBody(true)).toBe(true);
      const rest: Buffer[] = [];
      req.on('data', (c: Buffer) => rest.push(c));
      req.on('end', () => {
        done({ read: Buffer.from(read), streamed: Buffer.concat(rest).toString(), whole: r.wholeBody?.toString() });
        res.end('ok');
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const socket = connect((server.address() as { port: number }).port, '127.0.0.1');
  socket.on('error', () => {});
  return { seen, reading, write: (bytes) => void socket.write(bytes), close: () => (socket.destroy(), server.close()) };
}

describe('ChainRequest.readBody and commitBody on a real request', () => {
  const head = (length: number | 'chunked') => `POST / HTTP/1.1\r\nhost: t\r\n${length === 'chunked' ? 'transfer-encoding: chunked' : `content-length: ${length}`}\r\n\r\n`;

  test('a body in the same write as the head: read at once, put back for a destination that streams it', async () => {
    const s = await bodyServer(1024, true);
    try {
      s.write(`${head(11)}hello world`);
      expect(await s.seen).toEqual({ read: Buffer.from('hello world'), streamed: 'hello world', whole: undefined });
    } finally {
      s.close();
    }
  });

  test('a body held whole goes to an upstream destination as one buffer, and the request stream ends empty', async () => {
    const s = await bodyServer(1024, false);
    try {
      s.write(`${head(11)}hello world`);
      expect(await s.seen).toEqual({ read: Buffer.from('hello world'), streamed: '', whole: 'hello world' });
    } finally {
      s.close();
    }
  });

  test('a body that arrives after the head, in pieces, is waited for; a chunked one too', async () => {
    for (const chunked of [false, true]) {
      const s = await bodyServer(1024, true);
      try {
        s.write(head(chunked ? 'chunked' : 11));
        await s.reading;
        s.write(chunked ? '5\r\nhello\r\n' : 'hello');
        s.write(chunked ? '6\r\n world\r\n0\r\n\r\n' : ' world');
        expect(await s.seen, `chunked=${chunked}`).toEqual({ read: Buffer.from('hello world'), streamed: 'hello world', whole: undefined });
      } finally {
        s.close();
      }
    }
  });

  test('a declared body over the limit is too large, whether or not its bytes are there', async () => {
    const s = await bodyServer(4, true);
    try {
      s.write(`${head(11)}hello world`);
      expect((await s.seen).read).toBe('too-large');
    } finally {
      s.close();
    }
  });
});
