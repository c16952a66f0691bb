import type { ConfigLoader } from '../config/loader.ts';
import type { Logger } from '../log/logger.ts';
import type { Authorizer } from './authorizer.ts';
import type { CallerToken } from './caller-token.ts';
import { GrpcAuthorizer, InProcessAuthorizer } from './authorizers.ts';
import { startExtAuthServer, type ExtAuthServer } from './server.ts';

/** Options of {@link startEmbeddedExtAuth}. */
export interface EmbeddedExtAuthOptions {
  /** The gateway's config source: one directory read, one set of verdicts. */
  loader: ConfigLoader;
  /** `--extauth-port` (0 picks a free one). */
  port: number;
  /** Where the gRPC port binds (`gatehouse run --extauth-host`, default 127.0.0.1). */
  host: string;
  /** Caller token of the gRPC port (`--extauth-token-file`). */
  token?: CallerToken | undefined;
  pluginDir: string;
  memoryLimitMb?: number;
  cpuTimeoutMs?: number;
  /** Per-call wall deadline of plugin calls, fetch and timers included (default 1 s). */
  pluginWallTimeoutMs?: number;
  /** Plugin isolates on a thread of their own. */
  pluginThread?: boolean;
  /** `--resolve HOST=ADDR` for the hosts auth steps dial. */
  resolve?: ReadonlyMap<string, string>;
  logger: Logger;
  /** Per-check deadline (default 200 ms). */
  timeoutMs?: number;
  failureModeAllow?: boolean;
  /**
   * How the gateway reaches the engine: `in-process` (default) calls it directly;
   * `grpc` goes through the embedded server on loopback. Measured with
   * `test/bench/extauth-check-cost.ts`: in-process is 60–160× cheaper per check.
   */
  mode?: 'in-process' | 'grpc';
}

/**
 * `gatehouse run`'s auth (SPEC 1): the ext_authz gRPC server on the gateway's config source
 * (so an Envoy or a `gatehouse gateway` elsewhere can use it too), and the gateway's
 * Authorizer on the same engine. Close the authorizer, then the server.
 */
export async function startEmbeddedExtAuth(options: EmbeddedExtAuthOptions): Promise<{ server: ExtAuthServer; authorizer: Authorizer }> {
  const server = await startExtAuthServer({
    loader: options.loader,
    port: options.port,
    host: options.host,
    token: options.token,
    pluginDir: options.pluginDir,
    logger: options.logger,
    ...(options.memoryLimitMb !== undefined ? { memoryLimitMb: options.memoryLimitMb } : {}),
    ...(options.cpuTimeoutMs !== undefined ? { cpuTimeoutMs: options.cpuTimeoutMs } : {}),
    ...(options.pluginWallTimeoutMs !== undefined ? { pluginWallTimeoutMs: options.pluginWallTimeoutMs } : {}),
    ...(options.pluginThread ? { pluginThread: true } : {}),
    ...(options.resolve ? { resolve: options.resolve } : {}),
  });
  const failure = { logger: options.logger, ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}), ...(options.failureModeAllow ? { failureModeAllow: true } : {}) };
  const local = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host.includes(':') ? `[${options.host}]` : options.host;
  const authorizer = options.mode === 'grpc' ? new GrpcAuthorizer(`${local}:${server.port}`, { ...failure, token: options.token }) : new InProcessAuthorizer(server.engine, failure);
  return { server, authorizer };
}
