import { stat } from 'node:fs/promises';
import { createHash, timingSafeEqual } from 'node:crypto';
import { Server, ServerCredentials, status as GrpcStatus, type Metadata, type UntypedServiceImplementation, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { ConfigLoader } from '../config/loader.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import type { CrossNamespaceSecrets } from '../config/secret-grants.ts';
import type { CallerToken } from './caller-token.ts';
import { DEFAULT_API_GROUP_DOMAIN } from '../config/schema/kinds.ts';
import { ErrorCodes, GatehouseError } from '../errors.ts';
import { createLogger, type Logger } from '../log/logger.ts';
import { extAuthChecks } from './checks.ts';
import { forbidden } from './decision.ts';
import { LogLimiter } from './log-limit.ts';
import { bound as boundText } from './redact.ts';
import { ExtAuthCodes } from './codes.ts';
import { metrics, setKubeConnectedProbe } from '../admin/metrics.ts';
import { AuthEngine } from './engine.ts';
import { checkServerDefinition, encodeCheckResponse } from './grpc/check-codec.ts';
import { AUTHORIZATION_SERVICE } from './grpc/protos.ts';
import { loadRedisDriver } from '../redis/client.ts';
import { collectorFromEnv, loadRuntime } from '../tracing/tracing.ts';
import type { CheckRequest } from './step.ts';
import { attachRateLimitService, rateLimitChecks, rateLimitOptionsFromEnv } from '../ratelimit/grpc-service.ts';

/** The auth server's default gRPC port (SPEC 1). */
export const DEFAULT_EXTAUTH_PORT = 8083;

/** Options of {@link startExtAuthServer}. */
export interface ExtAuthServerOptions {
  /** Directory of manifests (SPEC 2.1). Required unless `loader` or `kube` is given. */
  configDir?: string;
  /** `--kube`: read configuration from the Kubernetes API instead (no status writing: the gateway writes status). */
  kube?: { kubeconfig?: string | undefined; namespaces: readonly string[] } | undefined;
  /** An already started config source to share (embedded in `gatehouse run`); not closed by the server. */
  loader?: ConfigLoader;
  /** gRPC port (default 8083; 0 picks a free one). */
  port?: number;
  /** Interface to bind (default 0.0.0.0). */
  host?: string;
  /**
   * Callers of Check must send `authorization: Bearer <token>` gRPC metadata (Envoy:
   * `grpc_service.initial_metadata`); others get UNAUTHENTICATED. Unset: any caller is served
   * (and a warning is logged unless the port is bound to loopback).
   */
  token?: CallerToken | undefined;
  /** Compiled plugins (default /auth-plugins). */
  pluginDir?: string;
  memoryLimitMb?: number;
  cpuTimeoutMs?: number;
  /** Per-call wall deadline of plugin calls, fetch and timers included (default 1 s). */
  pluginWallTimeoutMs?: number;
  /** Plugin isolates on a thread of their own (default false here; the CLI's default is true). */
  pluginThread?: boolean;
  apiGroupDomain?: string;
  /** `--cross-namespace-secrets` (docs/tenancy.md; default granted). */
  crossNamespaceSecrets?: CrossNamespaceSecrets;
  /** `--resolve HOST=ADDR`: where auth steps dial the hosts they name (LDAP servers, OPA servers). */
  resolve?: ReadonlyMap<string, string>;
  logger?: Logger;
  /** Reload on config changes (default true). */
  watch?: boolean;
  /** Fields added to the `listening` log line (the admin port). */
  listening?: Record<string, unknown>;
}

/** A running `gatehouse extauth`. */
export interface ExtAuthServer {
  /** The bound port (useful with port 0). */
  readonly port: number;
  readonly engine: AuthEngine;
  /** Stops accepting checks, finishes those in flight, closes every step. */
  close(): Promise<void>;
}

/**
 * Starts the external auth server (SPEC 1, 5): Envoy's `envoy.service.auth.v3.Authorization/Check`
 * plus `grpc.health.v1.Health` (NOT_SERVING until the first configuration is loaded). Logs
 * `"msg":"listening"` with the port once it serves (with a shared loader that has not
 * loaded yet: once bound; health turns SERVING with the first snapshot).
 */
export async function startExtAuthServer(options: ExtAuthServerOptions): Promise<ExtAuthServer> {
  // Step spans go to OTEL_EXPORTER_OTLP_* (docs/tracing.md); the SDK loads only when it is set.
  const collector = collectorFromEnv();
  if (collector) await loadRuntime(collector);
  const port = options.port ?? DEFAULT_EXTAUTH_PORT;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `port ${port} is not a port number (0 to 65535)`);
  if (!options.loader && !options.kube) {
    if (!options.configDir) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, 'a config directory is required (--config-dir or GATEHOUSE_CONFIG_DIR)');
    const info = await stat(options.configDir).catch(() => undefined);
    if (!info?.isDirectory()) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `config directory ${options.configDir} does not exist or is not a directory`);
  }
  const logger = options.logger ?? createLogger('extauth');
  const engine = new AuthEngine({
    logger,
    ...(options.pluginDir !== undefined ? { pluginDir: options.pluginDir } : {}),
    ...(options.memoryLimitMb !== undefined ? { memoryLimitMb: options.memoryLimitMb } : {}),
    ...(options.cpuTimeoutMs !== undefined ? { cpuTimeoutMs: options.cpuTimeoutMs } : {}),
    ...(options.pluginWallTimeoutMs !== undefined ? { pluginWallTimeoutMs: options.pluginWallTimeoutMs } : {}),
    ...(options.pluginThread ? { pluginThread: true } : {}),
    ...(options.resolve?.size ? { resolveHost: (host: string) => options.resolve!.get(host) } : {}),
  });

  const health = new HealthImplementation({ '': 'NOT_SERVING', [AUTHORIZATION_SERVICE]: 'NOT_SERVING' });
  const server = new Server();
  const authenticated = callerCheck(options.token);
  // The request arrives decoded to the CheckRequest contract; the answer goes out as bytes (grpc/check-codec.ts).
  const check = (call: ServerUnaryCall<CheckRequest, Buffer>, callback: sendUnaryData<Buffer>): void => {
    // The port answers "is this password right?": only the gateway or Envoy may ask.
    if (!authenticated(call.metadata)) {
      const suppressed = refusedLog.take('unauthenticated');
      if (suppressed !== undefined) logger.warn({ code: ExtAuthCodes.UNAUTHENTICATED, peer: boundText(call.getPeer(), 128), ...(suppressed ? { repeated: suppressed } : {}) }, 'ext_authz call refused: no valid caller token');
      callback({ code: GrpcStatus.UNAUTHENTICATED, details: 'this ext_authz server needs a caller token (authorization: Bearer <token> metadata)' }, null);
      return;
    }
    engine.check(withTraceContext(call.request, call.metadata)).then(
      (decision) => callback(null, encodeCheckResponse(decision)),
      // engine.check never rejects; this guards the gRPC call against a bug all the same.
      () => callback(null, encodeCheckResponse(forbidden())),
    );
  };
  server.addService(checkServerDefinition(), { Check: check } as UntypedServiceImplementation);
  // Envoy's rate-limit service on the same port (docs/rate-limiting.md).
  const rateLimitOptions = rateLimitOptionsFromEnv();
  if (rateLimitOptions.backend?.type === 'redis') await loadRedisDriver();
  const rateLimit = attachRateLimitService(server, { ...rateLimitOptions, logger });
  health.addToServer(server);

  const host = options.host ?? '0.0.0.0';
  if (!options.token && !isLoopback(host)) {
    logger.warn({ code: ExtAuthCodes.UNAUTHENTICATED, host }, 'the ext_authz port accepts any caller: set a caller token (--extauth-token-file) so that only the gateway or Envoy can check credentials');
  }
  const bound = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${port}`, ServerCredentials.createInsecure(), (error, actual) =>
      error ? reject(new GatehouseError(ExtAuthCodes.LISTEN, `cannot listen on ${host}:${port}: ${error.message}`, { cause: error })) : resolve(actual),
    );
  });

  const markServing = (): void => {
    health.setStatus('', 'SERVING');
    health.setStatus(AUTHORIZATION_SERVICE, 'SERVING');
  };
  const apply = async (snapshot: ConfigSnapshot): Promise<void> => {
    await engine.update(snapshot);
    rateLimit.update(snapshot);
    markServing();
  };
  let loader = options.loader;
  let unsubscribe: () => void;
  let reporter: { close(): Promise<void> } | undefined;
  // Which AuthConfigs cannot be built: a metric here, and with --kube their status and an Event (issue 27 item 1).
  const unavailable = new Set<string>();
  const stopReports = engine.onBuildReport((report) => {
    const now = new Set(report.filter((r) => r.failure).map((r) => r.configId));
    for (const id of unavailable) if (!now.has(id)) metrics.authConfigUnavailable.remove(id);
    for (const id of now) metrics.authConfigUnavailable.set({ config: id }, 1);
    unavailable.clear();
    for (const id of now) unavailable.add(id);
  });
  try {
    if (loader) {
      // `gatehouse run --kube`: the shared loader reads the cluster, so build results go to the
      // AuthConfigs' status and Events here too, as a separate `gatehouse extauth --kube` does (issue 27 item 1).
      const shared = loader.source as Partial<import('../config/source/kube.ts').KubeSource>;
      if (typeof shared.origin === 'function' && shared.config && typeof shared.identity === 'string') {
        const { KubeBuildReporter } = await import('../config/source/kube-status.ts');
        const buildReporter = new KubeBuildReporter({ config: shared.config, origins: shared as import('../config/source/kube.ts').KubeSource, logger, identity: shared.identity });
        engine.onBuildReport((report) => buildReporter.report(report));
        reporter = buildReporter;
      }
      // A shared loader may not have loaded yet (the gateway starts it after building its parts).
      unsubscribe = loader.onSnapshot(apply);
      if (loader.current) await apply(loader.current);
    } else {
      const source = options.kube
        ? new (await import('../config/source/kube.ts')).KubeSource({
            ...options.kube,
            apiGroupDomain: options.apiGroupDomain ?? DEFAULT_API_GROUP_DOMAIN,
            logger,
            ...(options.crossNamespaceSecrets ? { crossNamespaceSecrets: options.crossNamespaceSecrets } : {}),
          })
        : undefined;
      if (source) {
        const { KubeBuildReporter } = await import('../config/source/kube-status.ts');
        const buildReporter = new KubeBuildReporter({ config: source.config, origins: source, logger, identity: source.identity });
        engine.onBuildReport((report) => buildReporter.report(report));
        reporter = buildReporter;
        // `gatehouse extauth --kube` reports its own watches in gatehouse_kube_connected, as the gateway does (it read 0 while connected).
        setKubeConnectedProbe(() => source.health().connected);
      }
      loader = new ConfigLoader({ ...(source ? { source } : { dir: options.configDir! }), apiGroupDomain: options.apiGroupDomain ?? DEFAULT_API_GROUP_DOMAIN, crossNamespaceSecrets: options.crossNamespaceSecrets, checks: { ...extAuthChecks, ...rateLimitChecks }, logger, watch: options.watch ?? true });
      unsubscribe = loader.onSnapshot(apply);
      await loader.start();
    }
  } catch (error) {
    server.forceShutdown();
    void rateLimit.close();
    throw error;
  }
  // Plugin files arrive from init containers or a rebuild: reload the configs that use them.
  let pluginWatcher: { close(): void } | undefined;
  if (options.watch !== false) {
    const { watchPluginDir } = await import('./plugins/watch-plugin-dir.ts');
    pluginWatcher = await watchPluginDir(engine.pluginDir, (files) => void engine.pluginFilesChanged(files), { logger });
  }
  // SPEC 9: one `listening` line per process. Embedded in `gatehouse run`, the gateway's line
  // carries `extauthPort` instead.
  logger.info({ service: 'extauth', host, port: bound, ...options.listening }, options.loader ? 'extauth server started' : 'listening');

  const ownLoader = options.loader ? undefined : loader;
  let closing: Promise<void> | undefined;
  return {
    port: bound,
    engine,
    close() {
      closing ??= (async () => {
        health.setStatus('', 'NOT_SERVING');
        health.setStatus(AUTHORIZATION_SERVICE, 'NOT_SERVING');
        unsubscribe();
        stopReports();
        pluginWatcher?.close();
        await ownLoader?.close();
        if (ownLoader && options.kube) setKubeConnectedProbe(undefined);
        await reporter?.close();
        await shutdown(server, 5_000);
        await engine.close();
        await rateLimit.close();
      })();
      return closing;
    },
  };
}

/** One line per 10 s for refused callers, however many there are. */
const refusedLog = new LogLimiter({ intervalMs: 10_000 });

/** True for an address only this machine can reach. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

/**
 * Whether a call carries the caller token (`authorization: Bearer <token>`); always true
 * without a token. Compared as SHA-256 digests in constant time.
 */
function callerCheck(token: CallerToken | undefined): (metadata: Metadata) => boolean {
  if (!token) return () => true;
  const digest = (text: string) => createHash('sha256').update(text).digest();
  let digests: { of: readonly string[]; values: Buffer[] } | undefined;
  return (metadata) => {
    const values = metadata.get('authorization');
    if (values.length !== 1 || typeof values[0] !== 'string') return false;
    const match = /^Bearer[ \t]+(\S{1,4096})\s*$/i.exec(values[0]);
    if (!match) return false;
    const accepted = token.accepted();
    if (digests?.of !== accepted) digests = { of: accepted, values: accepted.map(digest) };
    const presented = digest(match[1]!);
    // Every accepted token is compared, so the time taken does not tell which one matched.
    return digests.values.reduce((ok, expected) => timingSafeEqual(presented, expected) || ok, false);
  };
}

/** Graceful gRPC shutdown; streams still open after `graceMs` (health watches) are cut. */
function shutdown(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * The caller's W3C trace context (gRPC metadata `traceparent`, as Envoy and the gateway send it)
 * put in the request's headers, where the steps' spans look for their parent (core/src/tracing).
 */
function withTraceContext(request: CheckRequest, metadata: Metadata): CheckRequest {
  const traceparent = metadata.get('traceparent')[0];
  if (typeof traceparent !== 'string' || traceparent.length > 128) return request;
  request.attributes.request.http.headers.traceparent = traceparent;
  return request;
}
