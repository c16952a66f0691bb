import type { Resource } from '../config/resource.ts';
import { durationMs } from '../config/schema/common.ts';
import { FilterStage, type FilterBuildContext, type FilterRequest, type HttpFilter, type HttpFilterFactory, type LocalReply } from '../proxy/filters/http-filter.ts';
import { compileRateLimitActions, type ActionRequest, type CompiledActions } from './actions.ts';
import { rateLimitConfigActions } from './checks.ts';
import { RateLimitCodes } from './codes.ts';
import { CRD_DOMAIN } from './compile.ts';
import type { RateLimitDecision, RequestDescriptor } from './engine.ts';
import type { GatewayRateLimiter } from './gateway-limiter.ts';
import type { LocalRateLimitSpec, RateLimitBasicSpec, RateLimitConfigRefsSpec, RateLimitExtensionSpec } from './options-schema.ts';

/**
 * Gateway-side rate limiting (docs/rate-limiting.md "On routes and virtual hosts"), Gloo's
 * options on virtual hosts and routes:
 *
 * - at FilterStage.rateLimitEarly (before auth): `localRatelimit` (a token bucket in this
 *   process), `rateLimitEarlyConfigs`, `rateLimitEarly`;
 * - at FilterStage.rateLimit (after auth, so limits can key on the user): `ratelimitBasic`,
 *   `rateLimitConfigs`, `rateLimitRegularConfigs`, `ratelimit`, `rateLimitRegular`.
 *
 * Descriptors are built at load from the actions (./actions.ts) and decided by the gateway's
 * engine (./gateway-limiter.ts: memory, or Redis shared across workers and replicas). A route
 * whose actions produce no descriptor for a request decides synchronously, without a promise.
 */
export const rateLimitFilter: HttpFilterFactory = {
  name: 'ratelimit',
  check(options, at, path) {
    const out = [];
    for (const name of ['ratelimit', 'rateLimitEarly', 'rateLimitRegular'] as const) {
      const ext = options[name] as RateLimitExtensionSpec | undefined;
      if (!ext?.rateLimits) continue;
      const { problems } = compileRateLimitActions(ext.rateLimits as Record<string, unknown>[], { path: [...path, name, 'rateLimits'] });
      for (const p of problems) out.push(at(p.path as (string | number)[], RateLimitCodes.CONFIG_INVALID, p.message));
    }
    const local = options.localRatelimit as LocalRateLimitSpec | undefined;
    if (local?.fillInterval !== undefined && durationMs(local.fillInterval) < 50) out.push(at([...path, 'localRatelimit', 'fillInterval'], RateLimitCodes.CONFIG_INVALID, 'fillInterval must be at least 50ms (Envoy)'));
    return out;
  },
  create(context) {
    const route = context.routeOptions ?? {};
    const host = context.virtualHostOptions ?? {};
    const limiter = context.services.ratelimit as GatewayRateLimiter | undefined;
    const filters: HttpFilter[] = [];

    const early: Decider[] = [];
    const bucket = localBucket(route, host);
    const earlyActions = [...configActions(context, 'rateLimitEarlyConfigs'), ...extensionActions(route, host, 'rateLimitEarly')];
    if (earlyActions.length > 0) early.push(actionsDecider(earlyActions));
    if (bucket || early.length > 0) filters.push(limitFilter('ratelimit-early', FilterStage.rateLimitEarly, bucket, early, limiter, context));

    const regular: Decider[] = [];
    const actions = [...configActions(context, 'rateLimitConfigs'), ...configActions(context, 'rateLimitRegularConfigs'), ...extensionActions(route, host, 'ratelimit'), ...extensionActions(route, host, 'rateLimitRegular')];
    if (actions.length > 0) regular.push(actionsDecider(actions));
    for (const [options, scope] of [
      [host, context.virtualHost],
      [route, `${context.virtualHost}/${context.route}`],
    ] as const) {
      const basic = options.ratelimitBasic as RateLimitBasicSpec | undefined;
      if (basic) regular.push(basicDecider(basic, scope));
    }
    if (regular.length > 0) filters.push(limitFilter('ratelimit', FilterStage.rateLimit, undefined, regular, limiter, context));
    return filters.length > 0 ? filters : undefined;
  },
};

/** The domain `ratelimitBasic` counts in (its limits travel with the descriptors). */
export const BASIC_DOMAIN = 'gatehouse-basic';

/** What one request asks the engine: descriptors by domain. */
type Decider = (request: FilterRequest, out: Map<string, RequestDescriptor[]>) => void;

function push(out: Map<string, RequestDescriptor[]>, domain: string, descriptors: readonly RequestDescriptor[]): void {
  if (descriptors.length === 0) return;
  const list = out.get(domain);
  if (list) list.push(...descriptors);
  else out.set(domain, [...descriptors]);
}

/** `rateLimitConfigs` (or its early/regular variants) of the route and the virtual host: the actions of each RateLimitConfig. */
function configActions(context: FilterBuildContext, option: string): CompiledActions[] {
  const out: CompiledActions[] = [];
  const vsNamespace = context.virtualHost.slice(0, context.virtualHost.indexOf('/'));
  for (const [options, namespace] of [
    [context.virtualHostOptions, vsNamespace],
    [context.routeOptions, context.namespace],
  ] as const) {
    const refs = (options?.[option] as RateLimitConfigRefsSpec | undefined)?.refs ?? [];
    for (const ref of refs) {
      const resource = context.snapshot.resources.get(`RateLimitConfig/${ref.namespace ?? namespace}/${ref.name}`) as Resource<'RateLimitConfig'> | undefined;
      // The store serves only VirtualServices whose references resolve; a missing one here is a bug, logged.
      if (!resource) {
        context.logger.error({ code: RateLimitCodes.CONFIG_INVALID, route: context.route, ref }, 'RateLimitConfig not served; its limits do not apply');
        continue;
      }
      out.push(rateLimitConfigActions(resource));
    }
  }
  return out;
}

/** Envoy-API actions (`ratelimit`, `rateLimitEarly`, `rateLimitRegular`): the route's, and the virtual host's when the route has none or includes them. */
function extensionActions(route: Readonly<Record<string, unknown>>, host: Readonly<Record<string, unknown>>, option: string): CompiledActions[] {
  const own = route[option] as RateLimitExtensionSpec | undefined;
  const vh = host[option] as RateLimitExtensionSpec | undefined;
  const lists: RateLimitExtensionSpec['rateLimits'][] = [];
  if (own?.rateLimits?.length) lists.push(own.rateLimits);
  // Envoy: a route's rate_limits replace the virtual host's unless include_vh_rate_limits.
  if (vh?.rateLimits?.length && (!own?.rateLimits?.length || own.includeVhRateLimits)) lists.push(vh.rateLimits);
  return lists.map((list) => compileRateLimitActions(list as Record<string, unknown>[]));
}

function actionsDecider(compiled: readonly CompiledActions[]): Decider {
  return (request, out) => {
    const view = actionView(request);
    for (const actions of compiled) push(out, CRD_DOMAIN, actions.descriptors(view));
  };
}

/** Gloo's ratelimitBasic: anonymous requests per client address, authenticated ones per user id (`x-user-id`, which only auth sets). */
function basicDecider(basic: RateLimitBasicSpec, scope: string): Decider {
  return (request, out) => {
    const user = request.ctx.headers['x-user-id'];
    const id = typeof user === 'string' && user !== '' ? user : undefined;
    const limits = id !== undefined ? basic.authorizedLimits : basic.anonymousLimits;
    if (!limits) return;
    const entries = [{ key: 'generic_key', value: scope }, id !== undefined ? { key: 'user_id', value: id } : { key: 'remote_address', value: request.remoteAddress }];
    push(out, BASIC_DOMAIN, [{ entries, limit: { requestsPerUnit: limits.requestsPerUnit, unit: limits.unit } }]);
  };
}

/** What actions read from a request: its headers as they are now, the client's address, metadata of earlier filters. */
function actionView(request: FilterRequest): ActionRequest {
  const headers = request.ctx.headers;
  return {
    header(name) {
      const value = headers[name];
      return Array.isArray(value) ? value[0] : value;
    },
    headerJoined(name) {
      const value = headers[name];
      return Array.isArray(value) ? value.join(',') : value;
    },
    remoteAddress: request.remoteAddress || undefined,
    destinationCluster: undefined,
    sourceCluster: undefined,
    metadata(_source, key, path) {
      let value: unknown = request.metadata.get(key);
      for (const segment of path) value = value !== null && typeof value === 'object' && Object.hasOwn(value, segment) ? (value as Record<string, unknown>)[segment] : undefined;
      return typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'boolean' ? String(value) : undefined;
    },
  };
}

/** Envoy's local rate limit: a token bucket per route (or one shared by a virtual host's routes), in this process. */
interface Bucket {
  take(now: number): boolean;
}

// A virtual host's bucket is one object for all its routes (by its options object).
const hostBuckets = new WeakMap<object, Bucket>();

function localBucket(route: Readonly<Record<string, unknown>>, host: Readonly<Record<string, unknown>>): Bucket | undefined {
  const own = route.localRatelimit as LocalRateLimitSpec | undefined;
  if (own) return tokenBucket(own);
  const shared = host.localRatelimit as LocalRateLimitSpec | undefined;
  if (!shared) return undefined;
  let bucket = hostBuckets.get(host);
  if (!bucket) hostBuckets.set(host, (bucket = tokenBucket(shared)));
  return bucket;
}

function tokenBucket(spec: LocalRateLimitSpec): Bucket {
  const max = spec.maxTokens;
  const perFill = spec.tokensPerFill ?? 1;
  const intervalMs = spec.fillInterval !== undefined ? durationMs(spec.fillInterval) : 1000;
  let tokens = max;
  let filledAt = -1;
  return {
    take(now) {
      if (filledAt < 0) filledAt = now;
      // Fills happen at whole intervals, as Envoy's timer adds tokensPerFill each fillInterval.
      const fills = Math.floor((now - filledAt) / intervalMs);
      if (fills > 0) {
        tokens = Math.min(max, tokens + fills * perFill);
        filledAt += fills * intervalMs;
      }
      if (tokens < 1) return false;
      tokens--;
      return true;
    },
  };
}

const LOCAL_LIMITED: LocalReply = { status: 429, code: RateLimitCodes.LOCAL_LIMITED, body: 'local_rate_limited', headers: ['x-envoy-ratelimited', 'true'] };

function limitFilter(name: string, stage: number, bucket: Bucket | undefined, deciders: readonly Decider[], limiter: GatewayRateLimiter | undefined, context: FilterBuildContext): HttpFilter {
  const logger = context.logger;
  // Only route tables that serve no traffic (the primary's view for admin:/config) are built without one.
  if (deciders.length > 0 && !limiter) logger.debug({ route: context.route, virtualService: context.virtualHost }, 'this process has no rate limiter: the route\'s rate limits do not apply here');
  return {
    name,
    stage,
    onRequest(request) {
      if (bucket && !bucket.take(performance.now())) return LOCAL_LIMITED;
      if (!limiter || deciders.length === 0) return undefined;
      const byDomain = new Map<string, RequestDescriptor[]>();
      for (const decide of deciders) decide(request, byDomain);
      // No descriptor: nothing to count, and no promise.
      if (byDomain.size === 0) return undefined;
      const refused = (error: unknown) => {
        // A malformed descriptor (a header value over the engine's bounds): the request is not limited by it.
        logger.warn({ reqId: request.ctx.requestId, err: (error as Error).message, code: RateLimitCodes.BAD_REQUEST }, 'rate-limit descriptors refused; the request is not limited');
        return undefined;
      };
      const answers: (RateLimitDecision | Promise<RateLimitDecision>)[] = [];
      let waiting = false;
      try {
        for (const [domain, descriptors] of byDomain) {
          const answer = limiter.engine.decide(domain, descriptors);
          if (answer instanceof Promise) waiting = true;
          answers.push(answer);
        }
      } catch (error) {
        return refused(error);
      }
      // Counters in memory answer at once: the request goes on in this turn, without a promise.
      if (!waiting) return overLimit(answers as RateLimitDecision[]);
      return Promise.all(answers).then((decided) => overLimit(decided), refused);
    },
  };
}

/** The 429 Envoy's rate-limit filter sends, with the engine's headers; undefined when every decision is OK. */
function overLimit(answers: readonly RateLimitDecision[]): LocalReply | undefined {
  const over = answers.find((a) => a.overallCode === 'OVER_LIMIT');
  if (!over) return undefined;
  const headers: string[] = [];
  for (const [key, value] of Object.entries(over.headers)) headers.push(key, value);
  if (!Object.hasOwn(over.headers, 'x-envoy-ratelimited')) headers.push('x-envoy-ratelimited', 'true');
  return { status: 429, code: RateLimitCodes.LIMITED, body: 'too many requests', headers };
}
