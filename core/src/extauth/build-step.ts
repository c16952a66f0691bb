import { formatPath } from '../config/diagnostic.ts';
import type { AuthStepSpec, PluginAuthSpec } from '../config/schema/auth-config.ts';
import { durationMs } from '../config/schema/common.ts';
import { redisOptions, type RedisSettings } from '../redis/client.ts';
import type { StoreSettings } from './plugins/store/step-store.ts';
import { pluginStoreDefaults, type PluginStoreDefaults } from './plugins/store/store-defaults.ts';
import type { UpstreamSpec } from '../config/schema/upstream.ts';
import { GatehouseError } from '../errors.ts';
import type { Logger } from '../log/logger.ts';
import { ApiKeyAuthStep, compileApiKeyAuth, selectSecrets, type ApiKeySecretSource } from './api-key/api-key-step.ts';
import { BasicAuthStep, compileBasicAuth } from './basic/basic-auth-step.ts';
import { ExtAuthCodes } from './codes.ts';
import { HmacAuthStep, compileHmacAuth } from './hmac/hmac-step.ts';
import { JwtStep } from './jwt/jwt-step.ts';
import { LdapStep, compileLdap } from './ldap/ldap-step.ts';
import { HttpPassThroughStep } from './pass-through/http-pass-through-step.ts';
import { PassThroughStep } from './pass-through/pass-through-step.ts';
import { redactingLogger, type Redactor } from './redact.ts';
import type { AuthStep } from './step.ts';

/** What building a step may need besides its spec. */
export interface StepBuildOptions {
  logger: Logger;
  /** Where compiled plugins live (SPEC 5.2, default `/auth-plugins`). */
  pluginDir: string;
  memoryLimitMb?: number;
  cpuTimeoutMs?: number;
  /** Deadline of a passThroughAuth call (default 1 s). */
  passThroughTimeoutMs?: number;
  /** Per-call wall deadline of plugin calls, fetch and timers included (default 1 s). */
  pluginWallTimeoutMs?: number;
  /** Served Upstreams, for `pluginAuth.egress[].upstreamRef` (set per AuthConfig by the engine). */
  resolveUpstream?: (ref: { name: string; namespace: string }) => UpstreamSpec | undefined;
  /** The namespace of the AuthConfig being built. */
  namespace?: string;
  /** Served Secrets, for `pluginAuth.secretRefs` (set per AuthConfig by the engine). */
  resolveSecret?: (ref: { name: string; namespace: string; key: string }) => string | undefined;
  /** Served Secrets, for `apiKeyAuth` (by reference and by label). */
  secrets?: ApiKeySecretSource;
  /** Masks the AuthConfig's secret values in what a plugin step logs (set per AuthConfig by the engine). */
  redact?: Redactor;
  /** `--resolve HOST=ADDR` of `gatehouse run`: the address to dial for a host named in a step (LDAP, OPA server). */
  resolveHost?: (host: string) => string | undefined;
  /** Served ConfigMaps' data, for `opaAuth.modules`. */
  resolveConfigMap?: (ref: { name: string; namespace: string }) => Readonly<Record<string, string>> | undefined;
  /** Run plugin isolates on the process's plugin thread (./plugins/thread/plugin-thread.ts) instead of the event loop. */
  pluginThread?: boolean;
  /** The AuthConfig's `failOnRedirect` (set per AuthConfig by the engine): an OIDC step answers 401 instead of redirecting. */
  failOnRedirect?: boolean;
  /** Deadline of one call of an `oauth2` step to its identity provider (default 3 s). */
  providerTimeoutMs?: number;
  /** The name of the AuthConfig being built: with its namespace, a plugin step's store identity. */
  configName?: string;
  /** The default `ctx.store` backend for steps without `pluginAuth.store`; default: the process's (`--plugin-store-redis-url`), else memory. */
  pluginStore?: PluginStoreDefaults;
}

/** Default wait of one Redis store operation (always within the call's wall deadline). */
const STORE_TIMEOUT_MS = 100;

/**
 * Where step `index`'s `ctx.store` lives (SPEC 5.3): `pluginAuth.store`, else the auth server's
 * default, else memory. The identity (namespace/AuthConfig/index/plugin) keys the memory hub and
 * the default Redis key prefix, so counters survive reloads and rebuilds of the same step.
 */
export function storeSettings(spec: PluginAuthSpec, index: number, options: StepBuildOptions, at: (...path: (string | number)[]) => string): StoreSettings {
  const identity = `${options.namespace ?? 'default'}/${options.configName ?? '-'}/${index}/${spec.name}`;
  const redis = spec.store?.redis;
  const defaults = options.pluginStore ?? pluginStoreDefaults();
  if (spec.store?.memory || (!redis && !defaults)) return { kind: 'memory', identity };
  const keyPrefix = redis?.keyPrefix ?? `gatehouse:plugin:${identity}:`;
  if (!redis) return { kind: 'redis', identity, redis: defaults!.redis, keyPrefix, timeoutMs: defaults!.timeoutMs ?? STORE_TIMEOUT_MS, failOpen: defaults!.failOpen ?? false };
  const namespace = options.namespace ?? 'default';
  const bad = (field: string, message: string) => new GatehouseError(ExtAuthCodes.STEP_BUILD, `${at('pluginAuth', 'store', 'redis', ...field.split('.'))}: ${message}`);
  const tlsWanted = redis.socketType === 'tls';
  const url = redis.url ?? `${tlsWanted ? 'rediss' : 'redis'}://${redis.host}/${redis.db ?? 0}`;
  const settings: RedisSettings = { url, ...(redis.poolSize !== undefined ? { poolSize: redis.poolSize } : {}) };
  if (redis.secretRef) {
    const ref = { name: redis.secretRef.name, namespace: redis.secretRef.namespace ?? namespace };
    const password = options.resolveSecret?.({ ...ref, key: 'password' });
    if (password === undefined) throw bad('secretRef', `Secret ${ref.namespace}/${ref.name} with key "password" is not served`);
    settings.password = password;
    const username = options.resolveSecret?.({ ...ref, key: 'username' });
    if (username !== undefined) settings.username = username;
  }
  if (tlsWanted || redis.tls) {
    const caRef = redis.tls?.caSecretRef;
    let ca: string | undefined;
    if (caRef) {
      const ref = { name: caRef.name, namespace: caRef.namespace ?? namespace, key: caRef.key ?? 'ca.crt' };
      ca = options.resolveSecret?.(ref);
      if (ca === undefined) throw bad('tls.caSecretRef', `Secret ${ref.namespace}/${ref.name} with key "${ref.key}" is not served`);
    }
    settings.tls = { ...(ca ? { ca } : {}), ...(redis.tls?.serverName ? { servername: redis.tls.serverName } : {}) };
  }
  try {
    redisOptions(settings);
  } catch (error) {
    throw bad(redis.url ? 'url' : 'host', (error as Error).message);
  }
  return { kind: 'redis', identity, redis: settings, keyPrefix, timeoutMs: redis.timeout ? durationMs(redis.timeout) : STORE_TIMEOUT_MS, failOpen: redis.failOpen === true };
}

type CreatePluginStep = typeof import('./plugins/plugin-step.ts').createPluginStep;

/**
 * A plugin step factory imported on first use: processes whose AuthConfigs have no
 * `pluginAuth` step never load the native module (isolated-vm). A failed import is retried on
 * the next build.
 */
function lazyFactory(load: () => Promise<CreatePluginStep>, what: string): () => Promise<CreatePluginStep> {
  let factory: Promise<CreatePluginStep> | undefined;
  return () => {
    factory ??= load().catch((error: unknown) => {
      factory = undefined;
      throw new GatehouseError(ExtAuthCodes.STEP_UNAVAILABLE, `pluginAuth steps are unavailable: ${what} cannot be loaded (${(error as Error).message})`, { cause: error });
    });
    return factory;
  };
}

const loadPluginFactory = lazyFactory(async () => (await import('./plugins/plugin-step.ts')).createPluginStep, 'the plugin host');
/** Steps on the process's plugin thread (./plugins/thread/plugin-thread.ts). */
const loadThreadFactory = lazyFactory(async () => (await import('./plugins/thread/plugin-thread.ts')).createThreadedPluginStep, 'the plugin thread');

/** The step kinds of an AuthConfig step (exactly one is set). */
const STEP_TYPES = ['basicAuth', 'pluginAuth', 'apiKeyAuth', 'passThroughAuth', 'ldap', 'ldapInternal', 'hmacAuth', 'opaAuth', 'opaServerAuth', 'jwt', 'oauth2'] as const;

/** The name of step `index` for logs and metrics: its `name`, or `<type>[<index>]`. */
export function stepName(spec: AuthStepSpec, index: number): string {
  const type = STEP_TYPES.find((key) => spec[key] !== undefined) ?? 'passThroughAuth';
  return spec.name || (spec.pluginAuth ? spec.pluginAuth.name : `${type}[${index}]`);
}

/**
 * Builds step `index` of an AuthConfig. Throws a GatehouseError whose message names the
 * field and the cause (`GH_EXTAUTH_STEP_BUILD`, `GH_EXTAUTH_STEP_UNAVAILABLE`, or the plugin host's code).
 */
export async function buildStep(spec: AuthStepSpec, index: number, options: StepBuildOptions): Promise<AuthStep> {
  const name = stepName(spec, index);
  const at = (...path: (string | number)[]) => formatPath(['spec', 'configs', index, ...path]);
  if (spec.basicAuth) {
    const { compiled, problems } = compileBasicAuth(spec.basicAuth);
    if (!compiled) {
      throw new GatehouseError(ExtAuthCodes.STEP_BUILD, problems.map((p) => `${at('basicAuth', ...p.path)}: ${p.message}`).join('; '));
    }
    return new BasicAuthStep(compiled, { name });
  }
  if (spec.apiKeyAuth) {
    const source = options.secrets ?? { byRef: () => undefined, all: () => [] };
    const selected = selectSecrets(spec.apiKeyAuth, options.namespace ?? 'default', source);
    const { compiled, problems } = compileApiKeyAuth(spec.apiKeyAuth, selected.secrets);
    const errors = [...selected.problems, ...problems].filter((p) => p.severity === 'error');
    if (errors.length > 0) throw new GatehouseError(ExtAuthCodes.STEP_BUILD, errors.map((p) => `${at('apiKeyAuth', ...p.path)}: ${p.message}`).join('; '));
    return new ApiKeyAuthStep(compiled, { name });
  }
  if (spec.passThroughAuth) {
    const timeout = options.passThroughTimeoutMs ? { timeoutMs: options.passThroughTimeoutMs } : {};
    try {
      if (spec.passThroughAuth.http) return new HttpPassThroughStep(spec.passThroughAuth, { name, logger: options.logger, ...timeout });
      return new PassThroughStep(spec.passThroughAuth, { name, logger: options.logger, ...timeout });
    } catch (error) {
      throw new GatehouseError(ExtAuthCodes.STEP_BUILD, `${spec.passThroughAuth.http ? at('passThroughAuth', 'http', 'url') : at('passThroughAuth', 'grpc', 'address')}: ${(error as Error).message}`, { cause: error });
    }
  }
  if (spec.pluginAuth) {
    const store = storeSettings(spec.pluginAuth, index, options, at);
    const create = options.pluginThread ? await loadThreadFactory() : await loadPluginFactory();
    try {
      return await create(spec.pluginAuth, {
        pluginDir: options.pluginDir,
        // What a plugin writes (log lines, error messages, stacks) is untrusted text: redacted and bounded.
        logger: options.redact ? redactingLogger(options.logger, options.redact) : options.logger,
        ...(options.memoryLimitMb !== undefined ? { memoryLimitMb: options.memoryLimitMb } : {}),
        ...(options.cpuTimeoutMs !== undefined ? { cpuTimeoutMs: options.cpuTimeoutMs } : {}),
        ...(options.pluginWallTimeoutMs !== undefined ? { wallTimeoutMs: options.pluginWallTimeoutMs } : {}),
        ...(options.resolveUpstream ? { resolveUpstream: options.resolveUpstream } : {}),
        ...(options.namespace !== undefined ? { namespace: options.namespace } : {}),
        ...(options.resolveSecret ? { resolveSecret: options.resolveSecret } : {}),
        store,
      });
    } catch (error) {
      // Keep the plugin host's own code (GH_PLUGIN_NOT_FOUND, GH_PLUGIN_VERSION_MISMATCH, …) and add where it came from.
      const code = (error as { code?: unknown }).code;
      throw new GatehouseError(typeof code === 'string' && code.startsWith('GH_') ? code : ExtAuthCodes.STEP_BUILD, `${at('pluginAuth')}: ${(error as Error).message}`, { cause: error });
    }
  }
  const ldapSpec = spec.ldap ?? spec.ldapInternal;
  if (ldapSpec) {
    const kind = spec.ldap ? 'ldap' : 'ldapInternal';
    const credentials = spec.ldap ? ldapSecretCredentials(spec.ldap, options) : inlineCredentials(spec.ldapInternal!);
    const { compiled, problems } = compileLdap(ldapSpec, credentials);
    if (!compiled) throw new GatehouseError(ExtAuthCodes.STEP_BUILD, problems.filter((p) => p.severity === 'error').map((p) => `${at(kind, ...p.path)}: ${p.message}`).join('; '));
    return new LdapStep(compiled, { name, type: kind, ...(options.resolveHost ? { resolveHost: options.resolveHost } : {}) });
  }
  if (spec.hmacAuth) {
    const source = options.secrets;
    const { compiled, problems } = compileHmacAuth(spec.hmacAuth, options.namespace ?? 'default', (ref) => source?.byRef(ref)?.data);
    if (!compiled) throw new GatehouseError(ExtAuthCodes.STEP_BUILD, problems.map((p) => `${at('hmacAuth', ...p.path)}: ${p.message}`).join('; '));
    return new HmacAuthStep(compiled, { name });
  }
  if (spec.jwt) return new JwtStep({ name });
  if (spec.opaAuth || spec.opaServerAuth) {
    const { buildOpaStep } = await import('./opa/build-opa-step.ts');
    return buildOpaStep(spec, name, at, options);
  }
  if (spec.oauth2) {
    const { buildOAuth2Step } = await import('./oauth2/build-oauth2-step.ts');
    return buildOAuth2Step(spec, name, at, options);
  }
  throw new GatehouseError(ExtAuthCodes.STEP_BUILD, `${at()}: holds none of ${STEP_TYPES.join(', ')}`);
}

/** The service account of `ldap.groupLookupSettings.credentialsSecretRef` (a Gloo credentials Secret: `username`, `password`). */
function ldapSecretCredentials(spec: NonNullable<AuthStepSpec['ldap']>, options: StepBuildOptions): { username: string; password: string } | undefined {
  const lookup = spec.groupLookupSettings;
  const ref = lookup?.credentialsSecretRef;
  if (!ref) return undefined;
  const data = options.secrets?.byRef({ name: ref.name, namespace: ref.namespace ?? options.namespace ?? 'default' })?.data;
  return data?.username && data.password ? { username: data.username, password: data.password } : undefined;
}

function inlineCredentials(spec: NonNullable<AuthStepSpec['ldapInternal']>): { username: string; password: string } | undefined {
  const lookup = spec.groupLookupSettings;
  return lookup ? { username: lookup.username, password: lookup.password } : undefined;
}
