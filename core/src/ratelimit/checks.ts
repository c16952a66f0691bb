import type { Diagnostic } from '../config/diagnostic.ts';
import type { Resource } from '../config/resource.ts';
import type { CheckContext, ConfigSnapshot } from '../config/store.ts';
import { RateLimitCodes } from './codes.ts';
import { buildTables, compileRateLimitConfig, type CompiledConfig, type RateLimitTables } from './compile.ts';

/** Load-time check of a RateLimitConfig (the ResourceChecks hook): what does not compile rejects it. */
export function checkRateLimitConfig(resource: Resource<'RateLimitConfig'>, ctx: CheckContext): Diagnostic[] {
  return compiled(resource).problems.map((p) => ctx.at(p.path, RateLimitCodes.CONFIG_INVALID, p.message));
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
