import type { Diagnostic } from '../config/diagnostic.ts';
import type { Resource } from '../config/resource.ts';
import type { CheckContext, ConfigSnapshot } from '../config/store.ts';
import { compileRateLimitActions, type CompiledActions } from './actions.ts';
import { RateLimitCodes } from './codes.ts';
import { buildTables, compileRateLimitConfig, configKeyOf, field, type CompiledConfig, type RateLimitTables } from './compile.ts';

/** Load-time check of a RateLimitConfig (the ResourceChecks hook): what does not compile rejects it. */
export function checkRateLimitConfig(resource: Resource<'RateLimitConfig'>, ctx: CheckContext): Diagnostic[] {
  return [...compiled(resource).problems, ...rateLimitConfigActions(resource).problems].map((p) => ctx.at(p.path, RateLimitCodes.CONFIG_INVALID, p.message));
}

const actionsCache = new WeakMap<object, CompiledActions>();
/** A RateLimitConfig's `rateLimits`, compiled (what the gateway side evaluates per request). */
export function rateLimitConfigActions(resource: Resource<'RateLimitConfig'>): CompiledActions {
  let out = actionsCache.get(resource);
  if (!out) {
    const raw = (resource.spec as Record<string, unknown>).raw as Record<string, unknown>;
    const name = Object.hasOwn(raw, 'rate_limits') ? 'rate_limits' : 'rateLimits';
    const list = (field(raw, 'rateLimits', 'rate_limits') as Record<string, unknown>[] | undefined) ?? [];
    actionsCache.set(resource, (out = compileRateLimitActions(list, { configKey: configKeyOf(resource), path: ['spec', 'raw', name] })));
  }
  return out;
}

// Compiled once per resource version: the check and the server's tables share the work.
const cache = new WeakMap<object, CompiledConfig>();
function compiled(resource: Resource<'RateLimitConfig'>): CompiledConfig {
  let out = cache.get(resource);
  if (!out) cache.set(resource, (out = compileRateLimitConfig(resource)));
  return out;
}

/** The rate-limit server's tables for a snapshot: every served RateLimitConfig. */
export function rateLimitTablesOf(snapshot: Pick<ConfigSnapshot, 'resources'>): RateLimitTables {
  const configs: CompiledConfig[] = [];
  for (const resource of snapshot.resources.values()) {
    if (resource.kind !== 'RateLimitConfig') continue;
    const config = compiled(resource);
    // A served resource passed its check; this guards a caller that skipped the checks.
    if (config.problems.length === 0) configs.push(config);
  }
  return buildTables(configs);
}
