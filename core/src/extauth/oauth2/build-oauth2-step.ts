/**
 * Builds `oauth2` steps; imported on first use, so processes without OIDC steps never load jose or
 * open provider connections.
 */
import type { AuthStepSpec } from '../../config/schema/auth-config.ts';
import { GatehouseError } from '../../errors.ts';
import { createRedisClient, loadRedisDriver } from '../../redis/client.ts';
import type { StepBuildOptions } from '../build-step.ts';
import { ExtAuthCodes } from '../codes.ts';
import type { AuthStep } from '../step.ts';
import { AccessTokenStep } from './access-token-step.ts';
import { compileAccessTokenValidation, compileOidc, type SecretLookup } from './compile.ts';
import { Sealer } from './cookies.ts';
import { OidcStep } from './oidc-step.ts';
import { ProviderHttp } from './provider-http.ts';
import { CookieSessionStore, RedisSessionStore, type SessionStore } from './sessions.ts';

/** The Secrets a step may read, as `compile*` wants them. */
export function secretLookup(options: Pick<StepBuildOptions, 'secrets'>): SecretLookup {
  return (ref) => options.secrets?.byRef(ref)?.data;
}

/** Builds the `oauth2` step of `spec`. */
export async function buildOAuth2Step(spec: AuthStepSpec, name: string, at: (...path: (string | number)[]) => string, options: StepBuildOptions): Promise<AuthStep> {
  const oauth2 = spec.oauth2 as Record<string, unknown>;
  const namespace = options.namespace ?? 'default';
  const isOidc = oauth2.oidcAuthorizationCode !== undefined || oauth2.oidc_authorization_code !== undefined;
  const fail = (problems: { path: (string | number)[]; message: string; severity: string }[]) =>
    new GatehouseError(ExtAuthCodes.STEP_BUILD, problems.filter((p) => p.severity === 'error').map((p) => `${at('oauth2', ...p.path)}: ${p.message}`).join('; '));
  const http = new ProviderHttp({ resolveHost: options.resolveHost, ...(options.providerTimeoutMs ? { timeoutMs: options.providerTimeoutMs } : {}) });
  if (!isOidc) {
    const { compiled, problems } = compileAccessTokenValidation(oauth2, namespace, secretLookup(options));
    if (!compiled) throw fail(problems);
    return new AccessTokenStep(compiled, { name, logger: options.logger, http });
  }
  const { compiled, problems } = compileOidc(oauth2, namespace, secretLookup(options));
  if (!compiled) throw fail(problems);
  let store: SessionStore;
  if (compiled.redis) {
    await loadRedisDriver();
    const redis = createRedisClient({ url: compiled.redis.url, tls: compiled.redis.tls, poolSize: compiled.redis.poolSize }, { logger: options.logger, name: 'gatehouse-oidc' });
    store = new RedisSessionStore(compiled.sessionCookie, redis, compiled.redis.keyPrefix, compiled.cookie);
  } else store = new CookieSessionStore(compiled.sessionCookie, new Sealer(compiled.key), compiled.cookie);
  return new OidcStep(compiled, { name, logger: options.logger, http, store, failOnRedirect: options.failOnRedirect === true });
}
