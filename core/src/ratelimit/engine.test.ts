import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests } from '../config/manifest.ts';
import { ConfigStore } from '../config/store.ts';
import type { CounterBackend } from './backend.ts';
import type { Resource } from '../config/resource.ts';
import { checkRateLimitConfig, rateLimitConfigActions, rateLimitTablesOf } from './checks.ts';
import { RateLimitCodes } from './codes.ts';
import { RateLimitEngine, type RequestDescriptor } from './engine.ts';
import { MemoryCounters } from './memory-backend.ts';

const SET = { key: 'generic_key', value: 'solo.setDescriptor.uniqueValue' };

/** Loads manifests through the real ConfigStore (schema, checks) and returns the snapshot. */
function load(objects: object[]) {
  const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev', checks: { RateLimitConfig: checkRateLimitConfig } });
  const { documents, diagnostics } = parseManifests('rl.yaml', objects.map((o) => stringify(o)).join('---\n'));
  return store.load(documents, diagnostics);
}

const rlc = (name: string, raw: object, apiVersion = 'ratelimit.solo.io/v1alpha1') => ({ apiVersion, kind: 'RateLimitConfig', metadata: { name, namespace: 'gloo-system' }, spec: { raw } });

/** An engine over the given configs, on a fixed clock that the test moves. */
function engineFor(objects: object[], options: { failOpen?: boolean; backend?: CounterBackend } = {}) {
  const snapshot = load(objects);
  const rejected = snapshot.statuses.filter((s) => s.state === 'Rejected');
  expect(rejected.map((s) => s.reasons.map((r) => r.message))).toEqual([]);
  const clock = { now: Date.UTC(2026, 0, 1, 12, 0, 10) };
  const engine = new RateLimitEngine({ backend: options.backend ?? new MemoryCounters({ now: () => clock.now }), now: () => clock.now, ...(options.failOpen !== undefined ? { failOpen: options.failOpen } : {}) });
  engine.update(rateLimitTablesOf(snapshot));
  return { engine, clock };
}

const d = (...pairs: [string, string][]): RequestDescriptor => ({ entries: pairs.map(([key, value]) => ({ key, value })) });
const inConfig = (config: string, ...pairs: [string, string][]) => d(['generic_key', `gloo-system.${config}`], ...pairs);

async function codes(engine: RateLimitEngine, n: number, descriptors: RequestDescriptor[]) {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push((await engine.shouldRateLimit('crd', descriptors)).overallCode);
  return out;
}

describe('RateLimitConfig: raw descriptors (the RateLimitConfigs guide)', () => {
  const globalLimit = rlc('global-limit', {
    descriptors: [{ key: 'generic_key', value: 'count', rateLimit: { requestsPerUnit: 4, unit: 'MINUTE' } }],
    rateLimits: [{ actions: [{ genericKey: { descriptorValue: 'count' } }] }],
  });
  const perUpstream = rlc('per-upstream-counter', {
    descriptors: [{ key: 'destination_cluster', rateLimit: { requestsPerUnit: 3, unit: 'MINUTE' } }],
    rateLimits: [{ actions: [{ destinationCluster: {} }] }],
  });

  test('a counter allows requestsPerUnit requests in its window, then OVER_LIMIT with the limit headers', async () => {
    const { engine } = engineFor([globalLimit]);
    const first = await engine.shouldRateLimit('crd', [inConfig('global-limit', ['generic_key', 'count'])]);
    expect(first.overallCode).toBe('OK');
    expect(first.statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 3, currentLimit: { requestsPerUnit: 4, unit: 'MINUTE' }, durationUntilResetMs: 50_000 });
    expect(first.headers).toEqual({ 'x-ratelimit-limit': '4, 4;w=60;name="crd|generic_key^gloo-system.global-limit|generic_key^count"', 'x-ratelimit-remaining': '3', 'x-ratelimit-reset': '50' });
    expect(await codes(engine, 4, [inConfig('global-limit', ['generic_key', 'count'])])).toEqual(['OK', 'OK', 'OK', 'OVER_LIMIT']);
    const over = await engine.shouldRateLimit('crd', [inConfig('global-limit', ['generic_key', 'count'])]);
    expect(over.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limitRemaining: 0 });
    expect(over.headers).toMatchObject({ 'x-envoy-ratelimited': 'true', 'retry-after': '50', 'x-ratelimit-remaining': '0' });
  });

  test('a new window starts at the next multiple of the unit since the epoch', async () => {
    const { engine, clock } = engineFor([globalLimit]);
    expect(await codes(engine, 5, [inConfig('global-limit', ['generic_key', 'count'])])).toEqual(['OK', 'OK', 'OK', 'OK', 'OVER_LIMIT']);
    clock.now += 49_999; // 12:00:59.999, same minute
    expect(await codes(engine, 1, [inConfig('global-limit', ['generic_key', 'count'])])).toEqual(['OVER_LIMIT']);
    clock.now += 1; // 12:01:00
    expect(await codes(engine, 1, [inConfig('global-limit', ['generic_key', 'count'])])).toEqual(['OK']);
  });

  test('a key without value counts each value apart; configs never share counters', async () => {
    const { engine } = engineFor([globalLimit, perUpstream]);
    const echo1 = [inConfig('global-limit', ['generic_key', 'count']), inConfig('per-upstream-counter', ['destination_cluster', 'echo-1'])];
    const echo2 = [inConfig('global-limit', ['generic_key', 'count']), inConfig('per-upstream-counter', ['destination_cluster', 'echo-2'])];
    // The guide: echo-1 three times is fine, the fourth is over its own limit of 3.
    expect(await codes(engine, 4, echo1)).toEqual(['OK', 'OK', 'OK', 'OVER_LIMIT']);
    // The global counter has now seen 4 hits: echo-2's first is already over 4.
    expect(await codes(engine, 1, echo2)).toEqual(['OVER_LIMIT']);
  });

  test('the guide sequence after a reset: 2 on echo-1, then echo-2 is limited on its third by the global limit', async () => {
    const { engine } = engineFor([globalLimit, perUpstream]);
    const echo = (n: string) => [inConfig('global-limit', ['generic_key', 'count']), inConfig('per-upstream-counter', ['destination_cluster', n])];
    expect(await codes(engine, 2, echo('echo-1'))).toEqual(['OK', 'OK']);
    expect(await codes(engine, 3, echo('echo-2'))).toEqual(['OK', 'OK', 'OVER_LIMIT']);
  });

  test('unknown domain, unknown config, or a descriptor that stops above a limit: OK with no limit', async () => {
    const nested = rlc('nested', { descriptors: [{ key: 'account', descriptors: [{ key: 'plan', value: 'BASIC', rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' } }] }] });
    const { engine } = engineFor([nested]);
    for (const [domain, descriptor] of [
      ['other', inConfig('nested', ['account', 'a'], ['plan', 'BASIC'])],
      ['crd', inConfig('missing', ['account', 'a'], ['plan', 'BASIC'])],
      ['crd', inConfig('nested', ['account', 'a'])],
      ['crd', inConfig('nested', ['account', 'a'], ['plan', 'PLUS'])],
      ['crd', inConfig('nested', ['account', 'a'], ['plan', 'BASIC'], ['extra', 'x'])],
      ['crd', d(['account', 'a'], ['plan', 'BASIC'])],
    ] as const) {
      const decision = await engine.shouldRateLimit(domain, [descriptor]);
      expect(decision).toEqual({ overallCode: 'OK', statuses: [{ code: 'OK', limitRemaining: 0 }], headers: {} });
    }
    expect(await codes(engine, 2, [inConfig('nested', ['account', 'a'], ['plan', 'BASIC'])])).toEqual(['OK', 'OVER_LIMIT']);
    // Another account has its own counter (account has no value: one counter per value).
    expect(await codes(engine, 1, [inConfig('nested', ['account', 'b'], ['plan', 'BASIC'])])).toEqual(['OK']);
  });

  test('an exact value wins over the key alone', async () => {
    const config = rlc('exact', {
      descriptors: [
        { key: 'plan', rateLimit: { requestsPerUnit: 5, unit: 'MINUTE' } },
        { key: 'plan', value: 'FREE', rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' } },
      ],
    });
    const { engine } = engineFor([config]);
    expect(await codes(engine, 2, [inConfig('exact', ['plan', 'FREE'])])).toEqual(['OK', 'OVER_LIMIT']);
    expect(await codes(engine, 2, [inConfig('exact', ['plan', 'PAID'])])).toEqual(['OK', 'OK']);
  });

  test('rule priority: only the highest matched weight counts, plus alwaysApply (the rule priority guide)', async () => {
    const config = rlc('prio', {
      descriptors: [
        { key: 'type', value: 'Messenger', rateLimit: { requestsPerUnit: 2, unit: 'MINUTE' } },
        {
          key: 'type',
          value: 'Whatsapp',
          rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' },
          descriptors: [{ key: 'number', value: '411', rateLimit: { requestsPerUnit: 100, unit: 'MINUTE' }, weight: 1 }],
        },
        { key: 'number', value: '311', rateLimit: { requestsPerUnit: 5, unit: 'MINUTE' }, alwaysApply: true },
      ],
    });
    const { engine } = engineFor([config]);
    const req = (type: string, number: string) => [inConfig('prio', ['type', type]), inConfig('prio', ['type', type], ['number', number]), inConfig('prio', ['number', number])];
    expect(await codes(engine, 3, req('Messenger', '311'))).toEqual(['OK', 'OK', 'OVER_LIMIT']);
    expect(await codes(engine, 2, req('Whatsapp', '312'))).toEqual(['OK', 'OVER_LIMIT']);
    // 411 matches the weight-1 rule: the weight-0 Whatsapp rule (1/min) is skipped and not counted.
    expect(await codes(engine, 5, req('Whatsapp', '411'))).toEqual(['OK', 'OK', 'OK', 'OK', 'OK']);
  });

  test('shadow mode counts and reports but answers OK', async () => {
    const config = rlc('shadow', { descriptors: [{ key: 'k', rateLimit: { requestsPerUnit: 1, unit: 'SECOND' }, shadowMode: true }] });
    const { engine } = engineFor([config]);
    const [, second] = [await engine.shouldRateLimit('crd', [inConfig('shadow', ['k', 'v'])]), await engine.shouldRateLimit('crd', [inConfig('shadow', ['k', 'v'])])];
    expect(second.overallCode).toBe('OK');
    expect(second.statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 0, currentLimit: { requestsPerUnit: 1, unit: 'SECOND' } });
  });

  test('hitsAddend adds that many hits (0 counts as 1); Envoy limit overrides replace the table', async () => {
    const { engine } = engineFor([globalLimit]);
    const one = [inConfig('global-limit', ['generic_key', 'count'])];
    expect((await engine.shouldRateLimit('crd', one, 3)).statuses[0]!.limitRemaining).toBe(1);
    expect((await engine.shouldRateLimit('crd', one, 0)).statuses[0]!.limitRemaining).toBe(0);
    expect((await engine.shouldRateLimit('crd', one, 1)).overallCode).toBe('OVER_LIMIT');
    const override: RequestDescriptor = { entries: [{ key: 'anything', value: 'x' }], limit: { requestsPerUnit: 1, unit: 'HOUR' } };
    expect(await codes(engine, 2, [override])).toEqual(['OK', 'OVER_LIMIT']);
  });

  test('proto names (snake_case) and enum numbers load like the JSON names', async () => {
    const config = rlc('snake', { descriptors: [{ key: 'k', rate_limit: { requests_per_unit: '2', unit: 2 } }], rate_limits: [{ set_actions: [{ request_headers: { header_name: 'x-k', descriptor_key: 'k' } }] }] });
    const { engine } = engineFor([config]);
    expect(await codes(engine, 3, [inConfig('snake', ['k', 'v'])])).toEqual(['OK', 'OK', 'OVER_LIMIT']);
  });

  test('the Gatehouse API group loads the same resource', async () => {
    const config = rlc('ours', { descriptors: [{ key: 'k', rateLimit: { requestsPerUnit: 1, unit: 'DAY' } }] }, 'ratelimit.gatehouse.dev/v1alpha1');
    const { engine } = engineFor([config]);
    expect(await codes(engine, 2, [inConfig('ours', ['k', 'v'])])).toEqual(['OK', 'OVER_LIMIT']);
  });
});

describe('RateLimitConfig: set-style descriptors (the Set-Style API guide)', () => {
  const setConfig = (setDescriptors: object[]) => rlc('set', { setDescriptors, rateLimits: [{ setActions: [{ requestHeaders: { descriptorKey: 'type', headerName: 'x-type' } }] }] });
  const req = (...pairs: [string, string][]) => [inConfig('set', [SET.key, SET.value], ...pairs)];

  test('a rule matches its simpleDescriptors as a subset, in any order, whatever else is present', async () => {
    const { engine } = engineFor([setConfig([{ simpleDescriptors: [{ key: 'type', value: 'a' }, { key: 'number', value: 'one' }], rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' } }])]);
    expect(await codes(engine, 2, req(['number', 'one'], ['type', 'a']))).toEqual(['OK', 'OVER_LIMIT']);
    expect(await codes(engine, 1, req(['color', 'blue'], ['type', 'a'], ['number', 'one']))).toEqual(['OVER_LIMIT']);
    expect(await codes(engine, 2, req(['type', 'a']))).toEqual(['OK', 'OK']);
    // Without the set marker the same entries are a raw descriptor: no rule.
    expect(await codes(engine, 2, [inConfig('set', ['type', 'a'], ['number', 'one'])])).toEqual(['OK', 'OK']);
  });

  test('rules apply in order, the first match wins; alwaysApply rules always count', async () => {
    const rules = (alwaysApply: boolean) => [
      { simpleDescriptors: [{ key: 'type' }, { key: 'number' }], rateLimit: { requestsPerUnit: 10, unit: 'MINUTE' } },
      { simpleDescriptors: [{ key: 'type' }], rateLimit: { requestsPerUnit: 5, unit: 'MINUTE' }, alwaysApply },
    ];
    const plain = engineFor([setConfig(rules(false))]).engine;
    expect((await codes(plain, 11, req(['type', 't'], ['number', '1']))).filter((c) => c === 'OK')).toHaveLength(10);
    expect((await codes(plain, 6, req(['type', 't']))).filter((c) => c === 'OK')).toHaveLength(5);
    const always = engineFor([setConfig(rules(true))]).engine;
    expect((await codes(always, 11, req(['type', 't'], ['number', '1']))).filter((c) => c === 'OK')).toHaveLength(5);
  });

  test("a set rule's name is Gloo's: the domain, then its sorted entries (as Gloo's server writes x-ratelimit-limit)", async () => {
    const config = { ...rlc('boost-api', { setDescriptors: [{ simpleDescriptors: [{ key: 'account_id' }], rateLimit: { requestsPerUnit: 10, unit: 'SECOND' } }] }), metadata: { name: 'boost-api', namespace: 'vcp-boost' } };
    const { engine } = engineFor([config]);
    const decision = await engine.shouldRateLimit('crd', [d(['generic_key', 'vcp-boost.boost-api'], [SET.key, SET.value], ['account_id', '42'])]);
    expect(decision.headers['x-ratelimit-limit']).toBe('10, 10;w=1;name="crd|account_id|generic_key^solo.setDescriptor.uniqueValue|generic_key^vcp-boost.boost-api"');
  });

  test('a rule without simpleDescriptors matches every set-style request', async () => {
    const { engine } = engineFor([setConfig([{ rateLimit: { requestsPerUnit: 2, unit: 'MINUTE' } }])]);
    expect(await codes(engine, 3, req(['anything', 'x']))).toEqual(['OK', 'OK', 'OVER_LIMIT']);
  });
});

describe('RateLimitConfig: what is rejected at load', () => {
  const rejection = (raw: object) => {
    const snapshot = load([rlc('bad', raw)]);
    const status = snapshot.statuses.find((s) => s.name === 'bad')!;
    expect(status.state).toBe('Rejected');
    return status.reasons.map((r) => `${r.path ?? ''} ${r.message}`).join('\n');
  };

  test('unknown fields, both spellings of one field, bad units, reserved keys, duplicates, unusable actions', () => {
    expect(rejection({ descriptors: [{ key: 'k', rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' }, color: 'red' }] })).toMatch(/color/);
    expect(rejection({ descriptors: [{ key: 'k', rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' }, rate_limit: { requestsPerUnit: 1, unit: 'MINUTE' } }] })).toMatch(/^spec\.raw\.descriptors\[0\]\.rate_limit "rate_limit" and "rateLimit" are the same field/);
    expect(rejection({ descriptors: [{ key: 'k', rateLimit: { requestsPerUnit: 1, unit: 'FORTNIGHT' } }] })).toMatch(/unit/);
    expect(rejection({ descriptors: [{ key: 'k', rateLimit: { requestsPerUnit: 1, unit: 'UNKNOWN' } }] })).toMatch(/unit/);
    expect(rejection({ descriptors: [{ key: 'k', rateLimit: { requestsPerUnit: -1, unit: 'MINUTE' } }] })).toMatch(/requestsPerUnit/);
    expect(rejection({ descriptors: [{ key: 'k', rateLimit: { requestsPerUnit: '9999999999', unit: 'MINUTE' } }] })).toMatch(/requestsPerUnit.*larger than a uint32/);
    expect(rejection({ descriptors: [{ key: 'k', weight: '9999999999', rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' } }] })).toMatch(/weight.*larger than a uint32/);
    expect(rejection({ descriptors: [{ key: 'k', value: 'v' }, { key: 'k', value: 'v' }] })).toMatch(/listed twice/);
    expect(rejection({ setDescriptors: [{ simpleDescriptors: [{ key: 'generic_key', value: 'solo.setDescriptor.uniqueValue' }], rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' } }] })).toMatch(/reserved/);
    expect(rejection({ setDescriptors: [{ simpleDescriptors: [{ key: 'a' }, { key: 'a' }], rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' } }] })).toMatch(/twice/);
    expect(rejection({ setDescriptors: [{ simpleDescriptors: [{ key: 'a' }] }] })).toMatch(/rateLimit/);
    expect(rejection({ rateLimits: [{ actions: [{ requestHeaders: { headerName: 'x' } }] }] })).toMatch(/descriptorKey/);
    expect(rejection({ rateLimits: [{ actions: [{ genericKey: { descriptorValue: 'a' }, remoteAddress: {} }] }] })).toMatch(/exactly one specifier/);
    expect(rejection({ rateLimits: [{}] })).toMatch(/neither actions nor setActions/);
    expect(rejection({ rateLimits: [{ actions: [{ headerValueMatch: { descriptorValue: 'v', headers: [{ name: 'h', regexMatch: '(?=x)' }] } }] }] })).toMatch(/regexMatch/);
    expect(rejection({ rateLimits: [{ actions: [{ headerValueMatch: { descriptorValue: 'v', headers: [{ name: 'h', exactMatch: 'a', prefixMatch: 'b' }] } }] }] })).toMatch(/at most one of/);
    expect(rejection({ descriptors: [{ key: '', rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' } }] })).toMatch(/key/);
  });

  test('descriptor trees deeper than 8 levels are rejected by the schema, not walked', () => {
    let node: Record<string, unknown> = { key: 'leaf', rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' } };
    for (let i = 0; i < 9; i++) node = { key: `k${i}`, descriptors: [node] };
    expect(rejection({ descriptors: [node] })).toMatch(/descriptors/);
  });
});

describe('RateLimitEngine: hostile requests and failing counters', () => {
  const config = rlc('c', { descriptors: [{ key: 'k', rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' } }] });

  test('malformed requests are refused with GH_RATELIMIT_BAD_REQUEST, never counted', async () => {
    const { engine } = engineFor([config]);
    const refused = (domain: string, descriptors: RequestDescriptor[], hits = 1) => engine.shouldRateLimit(domain, descriptors, hits).then(() => 'accepted', (e: { code?: string }) => e.code);
    expect(await refused('', [inConfig('c', ['k', 'v'])])).toBe(RateLimitCodes.BAD_REQUEST);
    expect(await refused('crd', [])).toBe(RateLimitCodes.BAD_REQUEST);
    expect(await refused('crd', [{ entries: [] }])).toBe(RateLimitCodes.BAD_REQUEST);
    expect(await refused('crd', [d(['', 'v'])])).toBe(RateLimitCodes.BAD_REQUEST);
    expect(await refused('crd', [inConfig('c', ['k', 'v'.repeat(5000)])])).toBe(RateLimitCodes.BAD_REQUEST);
    expect(await refused('crd', Array.from({ length: 65 }, () => inConfig('c', ['k', 'v'])))).toBe(RateLimitCodes.BAD_REQUEST);
    expect(await refused('crd', [inConfig('c', ['k', 'v'])], -1)).toBe(RateLimitCodes.BAD_REQUEST);
    expect(await codes(engine, 1, [inConfig('c', ['k', 'v'])])).toEqual(['OK']);
  });

  test('entries that would collide in a key_value string get separate counters', async () => {
    const collide = rlc('x', { descriptors: [{ key: 'a_b', rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' } }, { key: 'a', rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' } }] });
    const { engine } = engineFor([collide]);
    expect(await codes(engine, 1, [inConfig('x', ['a_b', 'c'])])).toEqual(['OK']);
    expect(await codes(engine, 1, [inConfig('x', ['a', 'b_c'])])).toEqual(['OK']);
  });

  test('failing counters: fail open allows, fail closed denies, both report the error', async () => {
    const broken: CounterBackend = { kind: 'redis', increment: () => Promise.reject(new Error('connection refused')), close: () => Promise.resolve() };
    const open = engineFor([config], { backend: broken }).engine;
    const allowed = await open.shouldRateLimit('crd', [inConfig('c', ['k', 'v'])]);
    expect(allowed).toMatchObject({ overallCode: 'OK', error: { code: RateLimitCodes.BACKEND_UNAVAILABLE, message: 'connection refused' } });
    const closed = engineFor([config], { backend: broken, failOpen: false }).engine;
    const denied = await closed.shouldRateLimit('crd', [inConfig('c', ['k', 'v']), inConfig('c', ['other', 'v'])]);
    expect(denied).toMatchObject({ overallCode: 'OVER_LIMIT', statuses: [{ code: 'OVER_LIMIT' }, { code: 'OK' }], error: { code: RateLimitCodes.BACKEND_UNAVAILABLE } });
    // A request no rule limits never needs the counters.
    expect((await closed.shouldRateLimit('crd', [inConfig('c', ['other', 'v'])])).overallCode).toBe('OK');
  });
});

describe('rate-limit actions (compiled with the RateLimitConfig)', () => {
  test("a config's actions build the descriptors its descriptors match, prefixed with the config's entry", async () => {
    const snapshot = load([rlc('acts', { descriptors: [{ key: 'account', rateLimit: { requestsPerUnit: 1, unit: 'MINUTE' } }], rateLimits: [{ actions: [{ requestHeaders: { headerName: 'X-Account', descriptorKey: 'account' } }] }, { actions: [{ metadata: { descriptorKey: 'tier', metadataKey: { key: 'io.gatehouse', path: [{ key: 'tier' }] }, source: 'ROUTE_ENTRY' } }] }] })]);
    const resource = [...snapshot.resources.values()].find((r) => r.kind === 'RateLimitConfig') as Resource<'RateLimitConfig'>;
    const actions = rateLimitConfigActions(resource);
    const request = { header: (name: string) => ({ 'x-account': 'a1' })[name], metadata: (source: string, key: string, path: readonly string[]) => (source === 'ROUTE_ENTRY' && key === 'io.gatehouse' && path.join('.') === 'tier' ? 'gold' : undefined) };
    const descriptors = actions.descriptors(request);
    expect(descriptors).toEqual([
      { entries: [{ key: 'generic_key', value: 'gloo-system.acts' }, { key: 'account', value: 'a1' }] },
      { entries: [{ key: 'generic_key', value: 'gloo-system.acts' }, { key: 'tier', value: 'gold' }] },
    ]);
    const engine = new RateLimitEngine({ backend: new MemoryCounters() });
    engine.update(rateLimitTablesOf(snapshot));
    expect((await engine.shouldRateLimit('crd', descriptors)).overallCode).toBe('OK');
    expect((await engine.shouldRateLimit('crd', descriptors)).overallCode).toBe('OVER_LIMIT');
    // Without the header the first descriptor is not built at all (Envoy's rule).
    expect(actions.descriptors({ header: () => undefined })).toEqual([]);
  });
});

describe('MemoryCounters', () => {
  test('stays within maxKeys under a flood of distinct keys, sweeping expired windows first', async () => {
    let now = 0;
    const counters = new MemoryCounters({ maxKeys: 100, now: () => now });
    for (let i = 0; i < 1000; i++) await counters.increment([{ key: `k${i}`, ttlSeconds: 1 }], 1);
    expect(counters.size).toBeLessThanOrEqual(100);
    now += 1000;
    await counters.increment([{ key: 'fresh', ttlSeconds: 60 }], 1);
    for (let i = 0; i < 99; i++) await counters.increment([{ key: `n${i}`, ttlSeconds: 60 }], 1);
    // 'fresh' is among the newest 100 and none of them expired: it was kept.
    expect(await counters.increment([{ key: 'fresh', ttlSeconds: 60 }], 1)).toEqual([2]);
  });

  test('concurrent increments lose nothing', async () => {
    const counters = new MemoryCounters();
    const results = await Promise.all(Array.from({ length: 500 }, () => counters.increment([{ key: 'k', ttlSeconds: 60 }], 2)));
    expect(results.map((r) => r[0]).sort((a, b) => a! - b!)).toEqual(Array.from({ length: 500 }, (_, i) => (i + 1) * 2));
  });
});
