import { describe, expect, test } from 'vitest';
import { parseFlags } from './flags.ts';
import { defaultMaxConnections } from '../server/listen.ts';
import { PLUGIN_FLAGS, pluginHostFlags, pluginLimits } from './extauth.ts';
import { GATEWAY_FLAGS, gatewayFlagValues } from './gateway-flags.ts';

const values = (argv: string[], env: NodeJS.ProcessEnv = {}) => gatewayFlagValues(parseFlags(argv, GATEWAY_FLAGS, env).values);

describe('gatewayFlagValues', () => {
  test('--cross-namespace-secrets takes granted, none or any', () => {
    expect(values(['--config-dir', '/cfg', '--cross-namespace-secrets', 'none']).crossNamespaceSecrets).toBe('none');
    expect(() => values(['--config-dir', '/cfg', '--cross-namespace-secrets', 'all'])).toThrow(/granted, none or any/);
  });

  test('defaults (SPEC 9)', () => {
    expect(values(['--config-dir', '/cfg'])).toEqual({
      configDir: '/cfg',
      port: 8080,
      httpsPort: 8443,
      httpsOnDemand: true,
      adminPort: 9901,
      host: '0.0.0.0',
      workers: 1,
      proxyName: 'gateway-proxy',
      apiGroupDomain: 'gatehouse.dev',
      crossNamespaceSecrets: 'granted',
      kubeClusterDomain: 'cluster.local',
      resolve: new Map(),
      accessLog: true,
      shutdownGraceMs: 30_000,
      adminHost: '127.0.0.1',
      paths: { normalize: true, mergeSlashes: true, escapedSlashes: 'reject' },
      limits: { requestHeadersTimeoutMs: 10_000, requestTimeoutMs: 300_000, idleTimeoutMs: 300_000, maxConnections: defaultMaxConnections(), maxRequestHeaders: 100 },
      maxPendingRequests: 1024,
      watchdogMs: 10_000,
    });
  });

  test('limits and path options (issue 17), and their errors', () => {
    expect(values(['--config-dir', '/c', '--request-timeout', '0', '--max-connections', '100', '--escaped-slashes', 'unescape', '--merge-slashes', 'false', '--admin-host', '0.0.0.0'])).toMatchObject({
      adminHost: '0.0.0.0',
      paths: { normalize: true, mergeSlashes: false, escapedSlashes: 'unescape' },
      limits: { requestTimeoutMs: 0, maxConnections: 100 },
    });
    expect(() => values(['--config-dir', '/c', '--escaped-slashes', 'maybe'])).toThrow(/--escaped-slashes must be reject, unescape or keep/);
    expect(() => values(['--config-dir', '/c', '--max-connections', 'lots'])).toThrow(/--max-connections must be a positive integer/);
    expect(() => values(['--config-dir', '/c', '--normalize-path', 'perhaps'])).toThrow(/--normalize-path must be true or false/);
  });

  test('--https-port given binds always; --max-connections-per-client and --max-request-headers (issue 29)', () => {
    const given = values(['--config-dir', '/c', '--https-port', '0', '--max-connections-per-client', '7', '--max-request-headers', '50']);
    expect(given).toMatchObject({ httpsPort: 0, limits: { maxConnectionsPerClient: 7, maxRequestHeaders: 50 } });
    expect(given.httpsOnDemand).toBeUndefined();
    expect(() => values(['--config-dir', '/c', '--max-request-headers', '0'])).toThrow(/--max-request-headers must be a positive integer/);
    expect(() => values(['--config-dir', '/c', '--https-port', 'x'])).toThrow(/--https-port must be a port number/);
  });

  test('--proxy-protocol: true requires a PROXY header, optional allows none, false (the default) reads none', () => {
    expect(values(['--config-dir', '/c']).limits?.proxyProtocol).toBeUndefined();
    expect(values(['--config-dir', '/c', '--proxy-protocol', 'true']).limits?.proxyProtocol).toEqual({});
    expect(values(['--config-dir', '/c', '--proxy-protocol', 'optional']).limits?.proxyProtocol).toEqual({ allowWithout: true });
    expect(values(['--config-dir', '/c', '--proxy-protocol', 'off']).limits?.proxyProtocol).toBeUndefined();
    expect(() => values(['--config-dir', '/c', '--proxy-protocol', 'v2'])).toThrow(/--proxy-protocol takes true, optional or false/);
  });

  test('every value parsed, from flags or GATEHOUSE_* variables', () => {
    const parsed = values(['--port', '0', '--workers', '3', '--resolve', 'Echo.Demo.svc.cluster.local=127.0.0.1', '--access-log', 'false', '--shutdown-grace', '250ms'], {
      GATEHOUSE_CONFIG_DIR: '/env',
      GATEHOUSE_ADMIN_PORT: '9999',
      GATEHOUSE_API_GROUP_DOMAIN: 'example.org',
    });
    expect(parsed).toMatchObject({ configDir: '/env', port: 0, adminPort: 9999, workers: 3, apiGroupDomain: 'example.org', accessLog: false, shutdownGraceMs: 250 });
    // Host names are matched case-insensitively.
    expect(parsed.resolve.get('echo.demo.svc.cluster.local')).toBe('127.0.0.1');
  });

  test.each([
    [['--resolve', 'no-equals-sign'], '--resolve takes HOST=ADDR, got "no-equals-sign"'],
    [['--resolve', '=1.2.3.4'], '--resolve takes HOST=ADDR'],
    [['--workers', 'many'], '--workers must be a positive integer or "auto", got "many"'],
    [['--shutdown-grace', '30'], '--shutdown-grace must be a duration such as 30s or 200ms, got "30"'],
    [['--admin-port', '70000'], '--admin-port must be a port number'],
  ])('%j is rejected: %s', (argv, message) => {
    expect(() => values(['--config-dir', '/cfg', ...argv])).toThrow(message);
  });

  test('--config-dir is required', () => {
    expect(() => values([])).toThrow('--config-dir is required (or set GATEHOUSE_CONFIG_DIR)');
  });
});

describe('pluginLimits (the plugin flags of run and extauth)', () => {
  const limits = (argv: string[]) => pluginLimits(parseFlags(argv, PLUGIN_FLAGS, {}).values);
  test('defaults, --plugin-thread false, and a value that is not true or false', () => {
    expect(limits([])).toEqual({ memoryLimitMb: 64, cpuTimeoutMs: 50, pluginWallTimeoutMs: 1000, pluginThread: true });
    expect(limits(['--plugin-thread', 'false']).pluginThread).toBe(false);
    expect(() => limits(['--plugin-thread', 'ture'])).toThrow(/--plugin-thread must be true or false, got "ture"/);
  });
});

describe('pluginHostFlags (where plugin isolates run: issue 24 finding 3)', () => {
  const host = (argv: string[], env: NodeJS.ProcessEnv = {}) => pluginHostFlags(parseFlags(argv, PLUGIN_FLAGS, env).values);
  test('defaults: a supervised plugin process with a 512 MB memory bound and a 5 s stall bound', () => {
    expect(host([])).toEqual({ process: true, maxRssMb: 512, stallMs: 5_000 });
  });
  test('set by flag or environment; 0 turns the memory bound off', () => {
    expect(host(['--plugin-process', 'false', '--plugin-process-max-rss-mb', '0', '--plugin-process-stall', '2s'])).toEqual({ process: false, maxRssMb: 0, stallMs: 2_000 });
    expect(host([], { GATEHOUSE_PLUGIN_PROCESS_MAX_RSS_MB: '256' }).maxRssMb).toBe(256);
  });
  test('a value that is not one is a usage error naming the flag', () => {
    expect(() => host(['--plugin-process', 'ture'])).toThrow(/--plugin-process must be true or false, got "ture"/);
    expect(() => host(['--plugin-process-max-rss-mb=-1'])).toThrow(/--plugin-process-max-rss-mb must be a whole number of MB/);
    expect(() => host(['--plugin-process-max-rss-mb', '1.5'])).toThrow(/--plugin-process-max-rss-mb/);
    expect(() => host(['--plugin-process-stall', '10ms'])).toThrow(/--plugin-process-stall must be at least 100ms/);
  });
});
