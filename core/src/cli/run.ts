import cluster from 'node:cluster';
import { createLogger } from '../log/logger.ts';
import { runGatewayProcess } from '../server/gateway-process.ts';
import { describeFlags, parseFlags, portValue, type FlagDef } from './flags.ts';
import { configurePluginHost } from '../extauth/plugins/plugin-host-options.ts';
import { PLUGIN_FLAGS, pluginHostFlags, pluginLimits, pluginStoreFlags } from './extauth.ts';
import { configurePluginStoreDefaults } from '../extauth/plugins/store/store-defaults.ts';
import { AUTH_CLIENT_FLAGS, gatewayParts } from './gateway.ts';
import { EXTAUTH_TOKEN_FLAGS, GATEWAY_FLAGS, duration, extAuthToken, gatewayFlagValues } from './gateway-flags.ts';

const FLAGS: readonly FlagDef[] = [
  ...GATEWAY_FLAGS,
  { name: 'extauth-port', type: 'string', default: '8083', description: 'port of the embedded extauth gRPC server (for Envoy or other gateways)' },
  { name: 'extauth-host', type: 'string', default: '127.0.0.1', description: 'address the embedded extauth gRPC server binds (another address needs --extauth-token-file: the port checks passwords)' },
  ...EXTAUTH_TOKEN_FLAGS,
  { name: 'plugin-dir', type: 'string', default: '/auth-plugins', description: 'directory of compiled auth plugins' },
  ...PLUGIN_FLAGS,
  ...AUTH_CLIENT_FLAGS,
  { name: 'help', type: 'boolean', description: 'show this help' },
];

/**
 * `gatehouse run`: gateway + admin + extauth in one process (SPEC 1, the embedded default).
 * The gateway calls the auth engine in-process (measured 60–160× cheaper per check than
 * gRPC over loopback); the gRPC server still listens for Envoy or separate gateways.
 * With `--workers N`, every worker runs its own engine on the snapshots the main process pushes.
 */
export async function runRun(argv: string[]): Promise<number | void> {
  const { values } = parseFlags(argv, FLAGS);
  if (values.help) {
    process.stdout.write(`usage: gatehouse run --config-dir DIR | --kube [flags]\n\n${describeFlags(FLAGS)}\n`);
    return 0;
  }
  const flags = gatewayFlagValues(values);
  const extauthPort = portValue(values, 'extauth-port');
  const extauthHost = values['extauth-host'] as string;
  const token = extAuthToken(values);
  const pluginDir = values['plugin-dir'] as string;
  const limits = pluginLimits(values);
  configurePluginHost(pluginHostFlags(values));
  configurePluginStoreDefaults(pluginStoreFlags(values));
  const failure = { timeoutMs: duration(values, 'extauth-timeout'), failureModeAllow: values['extauth-failure-mode-allow'] === true };
  const logger = createLogger('gatehouse');
  const parts = await gatewayParts();
  parts.primary = async ({ logger, loader }) => {
    // Several workers share one memory store for plugin steps: the primary's (docs/plugins.md "Store").
    if (flags.workers > 1) (await import('../extauth/plugins/store/store-cluster.ts')).serveMemoryStoreToWorkers();
    const { startEmbeddedExtAuth } = await import('../extauth/embedded.ts');
    const { server, authorizer } = await startEmbeddedExtAuth({ loader, port: extauthPort, host: extauthHost, token, pluginDir, ...limits, resolve: flags.resolve, logger, ...failure });
    return { listening: { extauthPort: server.port }, authorizer, close: () => server.close() };
  };
  // With --workers: each worker runs its own engine (and plugin isolates) on pushed snapshots.
  parts.authorizer = async ({ logger, snapshots }) => {
    if (cluster.isWorker) (await import('../extauth/plugins/store/store-cluster.ts')).useMemoryStoreOfPrimary();
    const [{ AuthEngine }, { InProcessAuthorizer }, { watchPluginDir }] = await Promise.all([
      import('../extauth/engine.ts'),
      import('../extauth/authorizers.ts'),
      import('../extauth/plugins/watch-plugin-dir.ts'),
    ]);
    const engine = new AuthEngine({ logger, pluginDir, ...limits, ...(flags.resolve.size ? { resolveHost: (host: string) => flags.resolve.get(host) } : {}) });
    snapshots.onSnapshot((snapshot) => engine.update(snapshot));
    if (snapshots.current) await engine.update(snapshots.current);
    await watchPluginDir(pluginDir, (files) => void engine.pluginFilesChanged(files), { logger });
    return new InProcessAuthorizer(engine, { logger, ...failure });
  };
  await runGatewayProcess({ ...flags, logger, parts });
}
