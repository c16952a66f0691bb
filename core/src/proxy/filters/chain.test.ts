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
