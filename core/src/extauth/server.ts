import { stat } from 'node:fs/promises';
import { Server, ServerCredentials, type ServiceDefinition, type UntypedServiceImplementation, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { ConfigLoader } from '../config/loader.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import { DEFAULT_API_GROUP_DOMAIN } from '../config/schema/kinds.ts';
import { ErrorCodes, GatehouseError } from '../errors.ts';
import { createLogger, type Logger } from '../log/logger.ts';
import { extAuthChecks } from './checks.ts';
import { forbidden } from './decision.ts';
import { AuthEngine } from './engine.ts';
import { checkRequestFromMessage, checkResponseToMessage, type CheckRequestMessage, type CheckResponseMessage } from './grpc/check-messages.ts';
import { AUTHORIZATION_SERVICE, authorizationPackage } from './grpc/protos.ts';
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
  /** Compiled plugins (default /auth-plugins). */
  pluginDir?: string;
  memoryLimitMb?: number;
  cpuTimeoutMs?: number;
  /** Per-call wall deadline of plugin calls, fetch and timers included (default 1 s). */
  pluginWallTimeoutMs?: number;
  /** Plugin isolates on a thread of their own (default false here; the CLI's default is true). */
  pluginThread?: boolean;
  apiGroupDomain?: string;
  logger?: Logger;
  /** Reload on config changes (default true). */
  watch?: boolean;
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
  });

  const health = new HealthImplementation({ '': 'NOT_SERVING', [AUTHORIZATION_SERVICE]: 'NOT_SERVING' });
  const server = new Server();
  const check = (call: ServerUnaryCall<CheckRequestMessage, CheckResponseMessage>, callback: sendUnaryData<CheckResponseMessage>): void => {
    engine.check(checkRequestFromMessage(call.request)).then(
      (decision) => callback(null, checkResponseToMessage(decision)),
      // engine.check never rejects; this guards the gRPC call against a bug all the same.
      () => callback(null, checkResponseToMessage(forbidden())),
    );
  };
  server.addService(authorizationPackage()[AUTHORIZATION_SERVICE] as ServiceDefinition, { Check: check } as UntypedServiceImplementation);
  // Envoy's rate-limit service on the same port (docs/rate-limiting.md).
  const rateLimit = attachRateLimitService(server, { ...rateLimitOptionsFromEnv(), logger });
  health.addToServer(server);

  const host = options.host ?? '0.0.0.0';
  const bound = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${port}`, ServerCredentials.createInsecure(), (error, actual) =>
      error ? reject(new GatehouseError('GH_EXTAUTH_LISTEN', `cannot listen on ${host}:${port}: ${error.message}`, { cause: error })) : resolve(actual),
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
  try {
    if (loader) {
      // A shared loader may not have loaded yet (the gateway starts it after building its parts).
      unsubscribe = loader.onSnapshot(apply);
      if (loader.current) await apply(loader.current);
    } else {
      const source = options.kube
        ? new (await import('../config/source/kube.ts')).KubeSource({ ...options.kube, apiGroupDomain: options.apiGroupDomain ?? DEFAULT_API_GROUP_DOMAIN, logger })
        : undefined;
      loader = new ConfigLoader({ ...(source ? { source } : { dir: options.configDir! }), apiGroupDomain: options.apiGroupDomain ?? DEFAULT_API_GROUP_DOMAIN, checks: { ...extAuthChecks, ...rateLimitChecks }, logger, watch: options.watch ?? true });
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
  logger.info({ service: 'extauth', host, port: bound }, options.loader ? 'extauth server started' : 'listening');

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
        pluginWatcher?.close();
        await ownLoader?.close();
        await shutdown(server, 5_000);
        await engine.close();
        await rateLimit.close();
      })();
      return closing;
    },
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
