import { readFileSync } from 'node:fs';
import { status as GrpcStatus, type Server, type ServerUnaryCall, type ServiceDefinition, type UntypedServiceImplementation, type sendUnaryData } from '@grpc/grpc-js';
import { loadSync, type PackageDefinition } from '@grpc/proto-loader';
import { lookup, type ConfigSnapshot, type ResourceChecks } from '../config/store.ts';
import { ErrorCodes, GatehouseError } from '../errors.ts';
import { envoyProtoIncludeDirs, PROTO_OPTIONS } from '../extauth/grpc/protos.ts';
import type { Logger } from '../log/logger.ts';
import { createRedisClient, redisCredentialsFromSecret, RedisCodes, type RedisSettings } from '../redis/client.ts';
import type { CounterBackend } from './backend.ts';
import { checkRateLimitConfig, rateLimitTablesOf } from './checks.ts';
import { RateLimitCodes } from './codes.ts';
import { UNIT_NUMBERS, UNIT_SECONDS } from './compile.ts';
import { RateLimitEngine, type DescriptorStatus, type RequestDescriptor } from './engine.ts';
import { MemoryCounters } from './memory-backend.ts';
import { RedisCounters } from './redis-backend.ts';

/** Envoy's rate-limit service, served next to ext_authz (docs/rate-limiting.md). */
export const RATE_LIMIT_PROTO = 'envoy/service/ratelimit/v3/rls.proto';
export const RATE_LIMIT_SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';

/** The checks a config loader needs to accept or reject RateLimitConfigs. */
export const rateLimitChecks: ResourceChecks = { RateLimitConfig: checkRateLimitConfig };

let cached: PackageDefinition | undefined;
/** The package definition holding RateLimitService (loaded once per process). */
export function rateLimitPackage(): PackageDefinition {
  cached ??= loadSync(RATE_LIMIT_PROTO, { ...PROTO_OPTIONS, includeDirs: envoyProtoIncludeDirs() });
  return cached;
}

/** Where the counters live, as the server is configured. */
export type BackendSettings =
  | { type: 'memory'; maxKeys?: number }
  | { type: 'redis'; redis: RedisSettings; /** `namespace/name` of a Secret with `password` (and `username`) keys, read from the config source. */ secret?: { namespace: string; name: string } | undefined };

/** Options of {@link attachRateLimitService}. */
export interface RateLimitServiceOptions {
  backend?: BackendSettings;
  failOpen?: boolean;
  timeoutMs?: number;
  logger?: Logger;
}

/**
 * Server settings from the environment (until the CLI grows flags for them):
 * `GATEHOUSE_RATELIMIT_BACKEND` (`memory`, default, or `redis`), `GATEHOUSE_RATELIMIT_REDIS_URL`,
 * `GATEHOUSE_RATELIMIT_REDIS_SECRET` (`namespace/name`), `GATEHOUSE_RATELIMIT_REDIS_CA_FILE`,
 * `GATEHOUSE_RATELIMIT_REDIS_TLS_SERVERNAME`, `GATEHOUSE_RATELIMIT_FAIL_OPEN`
 * (`true`, default, or `false`), `GATEHOUSE_RATELIMIT_TIMEOUT_MS` (default 500).
 */
export function rateLimitOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): Omit<RateLimitServiceOptions, 'logger'> {
  const bad = (message: string) => new GatehouseError(ErrorCodes.BAD_ARGUMENT, message);
  const kind = env.GATEHOUSE_RATELIMIT_BACKEND ?? (env.GATEHOUSE_RATELIMIT_REDIS_URL ? 'redis' : 'memory');
  let backend: BackendSettings;
  if (kind === 'memory') backend = { type: 'memory' };
  else if (kind === 'redis') {
    const url = env.GATEHOUSE_RATELIMIT_REDIS_URL;
    if (!url) throw bad('GATEHOUSE_RATELIMIT_BACKEND=redis needs GATEHOUSE_RATELIMIT_REDIS_URL (redis://host:port)');
    const secretRef = env.GATEHOUSE_RATELIMIT_REDIS_SECRET;
    let secret: { namespace: string; name: string } | undefined;
    if (secretRef) {
      const match = /^([a-z0-9][-a-z0-9.]*)\/([a-z0-9][-a-z0-9.]*)$/.exec(secretRef);
      if (!match) throw bad(`GATEHOUSE_RATELIMIT_REDIS_SECRET=${secretRef} must be namespace/name`);
      secret = { namespace: match[1]!, name: match[2]! };
    }
    // A private CA for rediss:// (the system trust store otherwise), and the name to verify.
    const caFile = env.GATEHOUSE_RATELIMIT_REDIS_CA_FILE;
    let ca: string | undefined;
    if (caFile) {
      try {
        ca = readFileSync(caFile, 'utf8');
      } catch (error) {
        throw bad(`GATEHOUSE_RATELIMIT_REDIS_CA_FILE=${caFile} cannot be read: ${(error as Error).message}`);
      }
    }
    const servername = env.GATEHOUSE_RATELIMIT_REDIS_TLS_SERVERNAME;
    const tls = ca || servername ? { ...(ca ? { ca } : {}), ...(servername ? { servername } : {}) } : undefined;
    backend = { type: 'redis', redis: { url, ...(tls ? { tls } : {}) }, secret };
  } else throw bad(`GATEHOUSE_RATELIMIT_BACKEND=${kind} must be memory or redis`);
  const failOpenText = env.GATEHOUSE_RATELIMIT_FAIL_OPEN ?? 'true';
  if (failOpenText !== 'true' && failOpenText !== 'false') throw bad(`GATEHOUSE_RATELIMIT_FAIL_OPEN=${failOpenText} must be true or false`);
  const timeoutText = env.GATEHOUSE_RATELIMIT_TIMEOUT_MS;
  const timeoutMs = timeoutText === undefined ? undefined : Number(timeoutText);
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0 && timeoutMs <= 60_000)) throw bad(`GATEHOUSE_RATELIMIT_TIMEOUT_MS=${timeoutText} must be 1 to 60000`);
  return { backend, failOpen: failOpenText === 'true', ...(timeoutMs !== undefined ? { timeoutMs } : {}) };
}

/** What the auth server keeps of the attached service. */
export interface RateLimitService {
  readonly engine: RateLimitEngine;
  /** A new configuration: new tables, and a new Redis client when its Secret changed. */
  update(snapshot: ConfigSnapshot): void;
  close(): Promise<void>;
}

/** A backend that is not usable yet (the Redis Secret is missing): every call fails, so failOpen decides. */
function unavailable(reason: string): CounterBackend {
  return { kind: 'redis', increment: () => Promise.reject(new GatehouseError(RateLimitCodes.BACKEND_UNAVAILABLE, reason)), close: () => Promise.resolve() };
}

/**
 * Registers `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` on a gRPC server (the
 * auth server's: one port serves ext_authz and rate limits, as Gloo's deployments pair them).
 * Call before the server binds.
 */
export function attachRateLimitService(server: Server, options: RateLimitServiceOptions = {}): RateLimitService {
  const { logger } = options;
  const settings = options.backend ?? { type: 'memory' };
  let secretVersion: string | undefined;
  const redisBackend = (password?: { username?: string; password: string }): CounterBackend => {
    const redis = settings.type === 'redis' ? { ...settings.redis, ...(password ?? {}) } : undefined;
    return new RedisCounters(createRedisClient(redis!, { logger, name: 'gatehouse-ratelimit' }));
  };
  const initial: CounterBackend =
    settings.type === 'memory' ? new MemoryCounters(settings.maxKeys !== undefined ? { maxKeys: settings.maxKeys } : {}) : settings.secret ? unavailable(`the Redis Secret ${settings.secret.namespace}/${settings.secret.name} is not loaded yet`) : redisBackend();
  const engine = new RateLimitEngine({ backend: initial, ...(options.failOpen !== undefined ? { failOpen: options.failOpen } : {}), ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}), ...(logger ? { logger } : {}) });

  const shouldRateLimit = (call: ServerUnaryCall<RateLimitRequestMessage, RateLimitResponseMessage>, callback: sendUnaryData<RateLimitResponseMessage>): void => {
    let request: { domain: string; descriptors: RequestDescriptor[]; hits: number };
    try {
      request = fromMessage(call.request);
    } catch (error) {
      callback({ code: GrpcStatus.INVALID_ARGUMENT, details: (error as Error).message });
      return;
    }
    const deadline = call.getDeadline();
    const until = deadline instanceof Date ? deadline.getTime() : Number.isFinite(deadline) ? deadline : undefined;
    engine.shouldRateLimit(request.domain, request.descriptors, request.hits, until).then(
      (decision) => callback(null, { overall_code: CODE[decision.overallCode], statuses: decision.statuses.map(statusMessage) }),
      (error: Error) => {
        const invalid = error instanceof GatehouseError && error.code === RateLimitCodes.BAD_REQUEST;
        if (!invalid) logger?.error({ err: error.message }, 'ShouldRateLimit failed');
        callback({ code: invalid ? GrpcStatus.INVALID_ARGUMENT : GrpcStatus.INTERNAL, details: invalid ? error.message : 'rate-limit decision failed' });
      },
    );
  };
  server.addService(rateLimitPackage()[RATE_LIMIT_SERVICE] as ServiceDefinition, { ShouldRateLimit: shouldRateLimit } as UntypedServiceImplementation);

  return {
    engine,
    update(snapshot) {
      engine.update(rateLimitTablesOf(snapshot));
      if (settings.type !== 'redis' || !settings.secret) return;
      const secret = lookup(snapshot, 'Secret', settings.secret, settings.secret.namespace);
      const version = secret?.version ?? 'missing';
      if (version === secretVersion) return;
      secretVersion = version;
      const previous = engine.backend;
      try {
        engine.backend = secret ? redisBackend(redisCredentialsFromSecret(secret)) : unavailable(`the Redis Secret ${settings.secret.namespace}/${settings.secret.name} does not exist`);
      } catch (error) {
        logger?.error({ err: (error as Error).message, code: RedisCodes.SETTINGS }, 'rate-limit Redis settings unusable');
        engine.backend = unavailable((error as Error).message);
      }
      void previous.close().catch(() => undefined);
    },
    close() {
      return engine.backend.close();
    },
  };
}

const CODE = { OK: 1, OVER_LIMIT: 2 } as const;

/** The request as proto-loader decodes it (proto field names, int64 as strings, enums as numbers). */
interface RateLimitRequestMessage {
  domain?: string;
  descriptors?: { entries?: { key?: string; value?: string }[]; limit?: { requests_per_unit?: number; unit?: number } | null }[];
  hits_addend?: number;
}
interface RateLimitResponseMessage {
  overall_code: number;
  statuses: object[];
}

function fromMessage(message: RateLimitRequestMessage): { domain: string; descriptors: RequestDescriptor[]; hits: number } {
  const descriptors = (message.descriptors ?? []).map((d) => ({
    entries: (d.entries ?? []).map((e) => ({ key: e.key ?? '', value: e.value ?? '' })),
    ...(d.limit ? { limit: { requestsPerUnit: d.limit.requests_per_unit ?? 0, unit: d.limit.unit ?? 0 } } : {}),
  }));
  return { domain: message.domain ?? '', descriptors, hits: message.hits_addend ?? 0 };
}

function statusMessage(status: DescriptorStatus): object {
  const out: Record<string, unknown> = { code: CODE[status.code], limit_remaining: status.limitRemaining };
  if (status.currentLimit) {
    out.current_limit = { name: status.currentLimit.name, requests_per_unit: status.currentLimit.requestsPerUnit, unit: UNIT_NUMBERS[status.currentLimit.unit] };
    const ms = Math.max(0, Math.min(status.durationUntilResetMs ?? 0, UNIT_SECONDS[status.currentLimit.unit] * 1000));
    out.duration_until_reset = { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 };
  }
  return out;
}
