import { flushTracing } from '../tracing/tracing.ts';
import { readFileSync } from 'node:fs';
import { DEFAULT_API_GROUP_DOMAIN } from '../config/schema/kinds.ts';
import { redisOptions } from '../redis/client.ts';
import { configurePluginStoreDefaults, type PluginStoreDefaults } from '../extauth/plugins/store/store-defaults.ts';
import { ErrorCodes, GatehouseError } from '../errors.ts';
import { ExtAuthCodes } from '../extauth/codes.ts';
import { configurePluginHost, DEFAULT_PLUGIN_HOST, type PluginHostOptions } from '../extauth/plugins/plugin-host-options.ts';
import { startExtAuthServer } from '../extauth/server.ts';
import { createLogger, flushLogs } from '../log/logger.ts';
import { installProcessGuards } from '../server/process-guards.ts';
import { describeFlags, parseFlags, portValue, requiredValue, type FlagDef, type FlagValues } from './flags.ts';
import { EXTAUTH_TOKEN_FLAGS, KUBE_FLAGS, SECRET_FLAGS, crossNamespaceSecretsValue, duration, extAuthToken, flagBool, kubeFlagValues } from './gateway-flags.ts';

/** Sandbox limits of plugin steps, shared with `gatehouse run`. */
export const PLUGIN_FLAGS: readonly FlagDef[] = [
  { name: 'plugin-memory-limit-mb', type: 'string', default: '64', description: 'memory limit of one plugin isolate, in MB' },
  { name: 'plugin-cpu-timeout', type: 'string', default: '50ms', description: 'CPU time one plugin call may use' },
  { name: 'plugin-wall-timeout', type: 'string', default: '1s', description: 'wall time one plugin call may take, waiting for fetch and timers included' },
  { name: 'plugin-thread', type: 'string', default: 'true', description: 'run plugin isolates off the event loop that serves traffic (true|false); where: --plugin-process' },
  { name: 'plugin-process', type: 'string', default: 'true', description: 'with --plugin-thread true: run plugin isolates in a supervised child process, restarted when it dies, instead of a thread whose crash ends this process (true|false)' },
  { name: 'plugin-process-max-rss-mb', type: 'string', default: String(DEFAULT_PLUGIN_HOST.maxRssMb), description: 'kill and restart the plugin process when its resident memory passes this many MB (0: no bound)' },
  { name: 'plugin-process-stall', type: 'string', default: `${DEFAULT_PLUGIN_HOST.stallMs / 1000}s`, description: 'kill and restart the plugin process when its event loop has been stalled this long' },
  { name: 'plugin-store-redis-url', type: 'string', description: 'ctx.store of plugin steps without pluginAuth.store in this Redis (redis://[user:pass@]host:port[/db], rediss:// for TLS) instead of memory' },
  { name: 'plugin-store-redis-password-file', type: 'string', description: 'file holding the password of --plugin-store-redis-url' },
  { name: 'plugin-store-timeout', type: 'string', default: '100ms', description: 'longest wait of one Redis store operation (within the call deadline)' },
  { name: 'plugin-store-fail-open', type: 'string', default: 'false', description: 'allow requests whose plugin failed because the store Redis was unreachable (true|false)' },
];

/** The default plugin store from {@link PLUGIN_FLAGS} (docs/plugins.md "Store"): Redis when a URL is given, else memory. */
export function pluginStoreFlags(values: FlagValues): PluginStoreDefaults | undefined {
  const url = values['plugin-store-redis-url'];
  if (typeof url !== 'string' || url === '') return undefined;
  const passwordFile = values['plugin-store-redis-password-file'];
  let password: string | undefined;
  if (typeof passwordFile === 'string' && passwordFile !== '') {
    try {
      password = readFileSync(passwordFile, 'utf8').trim();
    } catch (error) {
      throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--plugin-store-redis-password-file ${passwordFile} cannot be read: ${(error as Error).message}`);
    }
  }
  const redis = { url, ...(password ? { password } : {}) };
  try {
    redisOptions(redis);
  } catch (error) {
    throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--plugin-store-redis-url: ${(error as Error).message}`);
  }
  return { redis, timeoutMs: duration(values, 'plugin-store-timeout'), failOpen: flagBool(values, 'plugin-store-fail-open') };
}

/** Where plugin steps run, from {@link PLUGIN_FLAGS} (docs/plugins.md "Plugin process"). */
export function pluginHostFlags(values: FlagValues): PluginHostOptions {
  const maxRssMb = Number(values['plugin-process-max-rss-mb']);
  if (!Number.isInteger(maxRssMb) || maxRssMb < 0) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--plugin-process-max-rss-mb must be a whole number of MB (0: no bound), got "${values['plugin-process-max-rss-mb']}"`);
  const stallMs = duration(values, 'plugin-process-stall');
  if (stallMs < 100) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--plugin-process-stall must be at least 100ms, got "${values['plugin-process-stall']}"`);
  return { process: flagBool(values, 'plugin-process'), maxRssMb, stallMs };
}

/** The plugin sandbox limits given by {@link PLUGIN_FLAGS}. */
export function pluginLimits(values: FlagValues): { memoryLimitMb: number; cpuTimeoutMs: number; pluginWallTimeoutMs: number; pluginThread: boolean } {
  return {
    memoryLimitMb: positiveInteger(values, 'plugin-memory-limit-mb'),
    cpuTimeoutMs: duration(values, 'plugin-cpu-timeout'),
    pluginWallTimeoutMs: duration(values, 'plugin-wall-timeout'),
    pluginThread: flagBool(values, 'plugin-thread'),
  };
}

const FLAGS: readonly FlagDef[] = [
  { name: 'config-dir', type: 'string', description: 'directory of manifests (AuthConfigs are served), read recursively and watched' },
  ...KUBE_FLAGS,
  ...SECRET_FLAGS,
  { name: 'port', type: 'string', default: '8083', description: 'gRPC port (0 picks a free port)' },
  { name: 'host', type: 'string', default: '0.0.0.0', description: 'address to bind' },
  { name: 'admin-port', type: 'string', default: '9902', description: 'admin API port: /healthz, /readyz, /metrics, /configs (0 picks a free port)' },
  { name: 'admin-host', type: 'string', default: '127.0.0.1', description: 'address the admin API binds (0.0.0.0 in a pod, for Prometheus)' },
  ...EXTAUTH_TOKEN_FLAGS,
  { name: 'plugin-dir', type: 'string', default: '/auth-plugins', description: 'directory of compiled auth plugins' },
  ...PLUGIN_FLAGS,
  { name: 'api-group-domain', type: 'string', default: DEFAULT_API_GROUP_DOMAIN, description: 'domain of the API groups (enterprise.DOMAIN/v1, …)' },
  { name: 'help', type: 'boolean', description: 'show this help' },
];

function positiveInteger(values: FlagValues, name: string): number {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 1) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--${name} must be a positive integer, got "${values[name]}"`);
  return n;
}

/**
 * `gatehouse extauth` (SPEC 1, 9): the external auth server on its own, as the Kubernetes
 * `extauth` deployment runs it. Serves until SIGTERM/SIGINT, then drains and exits 0.
 */
export async function runExtAuth(argv: string[]): Promise<number | void> {
  const { values } = parseFlags(argv, FLAGS);
  if (values.help) {
    process.stdout.write(`usage: gatehouse extauth --config-dir DIR | --kube [flags]\n\n${describeFlags(FLAGS)}\n`);
    return 0;
  }
  const logger = createLogger('extauth');
  installProcessGuards(logger);
  configurePluginHost(pluginHostFlags(values));
  configurePluginStoreDefaults(pluginStoreFlags(values));
  const kube = kubeFlagValues(values);
  // The admin API first, so the `listening` line can name its port; ready once the server is.
  let server: Awaited<ReturnType<typeof startExtAuthServer>> | undefined;
  const { startExtAuthAdmin } = await import('../admin/extauth-admin.ts');
  const admin = await startExtAuthAdmin({ ready: () => server?.engine.ready ?? false, buildReport: () => server?.engine.buildReport() ?? [] }, portValue(values, 'admin-port'), values['admin-host'] as string).catch((error: Error) => {
    throw new GatehouseError(ExtAuthCodes.LISTEN, `cannot listen on ${values['admin-host'] as string}:${values['admin-port'] as string} (--admin-port): ${error.message}`, { cause: error });
  });
  server = await startExtAuthServer({
    ...(kube ? { kube } : { configDir: requiredValue(values, 'config-dir') }),
    port: portValue(values, 'port'),
    host: values.host as string,
    token: extAuthToken(values),
    pluginDir: values['plugin-dir'] as string,
    ...pluginLimits(values),
    apiGroupDomain: values['api-group-domain'] as string,
    crossNamespaceSecrets: crossNamespaceSecretsValue(values),
    logger,
    listening: { adminPort: admin.port },
  });
  const running = server;
  const stop = async (signal: string): Promise<void> => {
    logger.info({ signal }, 'shutting down: finishing in-flight checks');
    await running.close();
    admin.server.close();
    await flushTracing();
    logger.info('stopped');
    flushLogs();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}
