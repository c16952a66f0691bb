// The JWT filter row (issue 28 item 2): a route whose virtual host verifies RS256 tokens against
// a remote JWKS (served by this process, fetched once: the cache is warm before measuring),
// against the JWT plugin row and the route without auth of the same run.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BenchContext, BenchModule, BenchScenario, RunningTarget } from '../scenario.ts';
import { benchManifests } from '../tools.ts';
import { BENCH_JWKS, benchJwt } from '../bench-jwt.ts';

const ROW = 'gatehouse run, JWT filter RS256 route (remote JWKS, warm)';
const request = { headers: { authorization: `Bearer ${benchJwt('RS256')}` } };

/** The bench manifests with `jwt` providers on the virtual host instead of an AuthConfig. */
function manifests(ctx: BenchContext, jwksUrl: string): object[] {
  return benchManifests(ctx.upstreamPort).map((doc) => {
    const d = doc as { kind: string; spec: { virtualHost?: Record<string, unknown> } };
    if (d.kind !== 'VirtualService') return doc;
    return { ...d, spec: { ...d.spec, virtualHost: { ...d.spec.virtualHost, options: { jwt: { providers: { bench: { jwks: { remote: { url: jwksUrl, cacheDuration: '3600s' } } } } } } } } };
  });
}

async function start(ctx: BenchContext): Promise<RunningTarget> {
  const jwks = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(BENCH_JWKS)));
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
  const closeJwks = () => new Promise<void>((resolve) => (jwks.closeAllConnections(), jwks.close(() => resolve())));
  try {
    const target = await ctx.gatehouse({ 'bench.yaml': manifests(ctx, url) }, ['--access-log', 'false']);
    // Warm the JWKS cache and fail the row (instead of measuring 401s) unless the token verifies.
    const response = await fetch(target.url, request);
    await response.arrayBuffer();
    if (response.status !== 200) {
      await target.stop();
      throw new Error(`the JWT filter route answered ${response.status}, not 200: the jwt filter is not wired into this gatehouse command`);
    }
    return {
      ...target,
      stop: async () => {
        await target.stop();
        await closeJwks();
      },
    };
  } catch (error) {
    await closeJwks();
    throw error;
  }
}

export const scenarios: BenchScenario[] = [{ group: 'extauth', name: ROW, request, start }];

// Issue 28's goal: ≥ 0.9× of the JWT plugin route (and, per docs/jwt.md "Cost", near the native verify bound).
export const goals: BenchModule['goals'] = [{ row: ROW, against: 'gatehouse run, JWT RS256 route (crypto.subtle, no cache)', minThroughputRatio: 0.9 }];
