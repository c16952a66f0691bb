// Envoy anchors (issue 14): Envoy as a plain proxy beside nginx and Gatehouse, and Envoy's
// ext_authz filter calling `gatehouse extauth` (Basic Auth, RequiredHeader plugin), calling
// nothing (filter disabled), or calling a minimal grpc-js server that always allows (the Node
// limit for an ext_authz server). Every Envoy row runs the bootstrap of docs/envoy.md with one
// worker thread, against the run's shared nginx upstream. Envoy is installed on demand.
import { execFileSync } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { NODE_ENV_DEFAULTS, NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { docBootstrap, ensureEnvoy, startEnvoy, withAddresses, type Address } from '../../envoy/envoy.ts';
import type { BenchContext, BenchModule, BenchScenario, RunningTarget } from '../scenario.ts';
import { freePort, startListening, type Started } from '../tools.ts';

const CLI = fileURLToPath(new URL('../../../core/bin/gatehouse.js', import.meta.url));
const REQUIRED_HEADER = fileURLToPath(new URL('../../../plugins/required-header/src/index.ts', import.meta.url));
const ALLOW_SERVER = fileURLToPath(new URL('../grpc-allow-server.ts', import.meta.url));

// The doc's addresses (docs/envoy.md), replaced for each row.
const ADMIN = '127.0.0.1:9901';
const LISTENER = '0.0.0.0:10000';
const EXTAUTH = 'extauth.gatehouse-system.svc.cluster.local:8083';
const APP = 'app.default.svc.cluster.local:8080';

/** The same request for every Envoy row (the auth rows' CheckRequests carry the same headers). */
const request = { headers: { authorization: `Basic ${Buffer.from('alice:wonderland').toString('base64')}`, 'x-api-key': 'bench' } };
const PLUGIN_PATH = '/partners/';

type Bootstrap = Record<string, any>;

/** APR1 hash from the real tool, as users write it. */
function aliceHash(): { salt: string; hashedPassword: string } {
  const line = execFileSync('htpasswd', ['-nbm', 'alice', 'wonderland'], { encoding: 'utf8' }).trim();
  const [, salt, hashedPassword] = /\$apr1\$([^$]+)\$(.+)$/.exec(line)!;
  return { salt: salt!, hashedPassword: hashedPassword! };
}

const loopback = (port: number): Address => ({ address: '127.0.0.1', port });

/** The HTTP connection manager of the doc's (only) listener. */
function connectionManager(bootstrap: Bootstrap): Bootstrap {
  return bootstrap.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
}

/** The doc's bootstrap without any auth: no header_mutation or ext_authz filter, no per-route settings, no auth cluster. */
function plainProxy(bootstrap: Bootstrap): Bootstrap {
  const hcm = connectionManager(bootstrap);
  hcm.http_filters = hcm.http_filters.filter((f: { name: string }) => f.name === 'envoy.filters.http.router');
  for (const host of hcm.route_config.virtual_hosts) {
    delete host.typed_per_filter_config;
    for (const route of host.routes) delete route.typed_per_filter_config;
  }
  bootstrap.static_resources.clusters = bootstrap.static_resources.clusters.filter((c: { name: string }) => c.name !== 'gatehouse-extauth');
  return bootstrap;
}

/** The doc's bootstrap with ext_authz disabled for the whole virtual host (the filters stay in the chain). */
function authDisabled(bootstrap: Bootstrap): Bootstrap {
  for (const host of connectionManager(bootstrap).route_config.virtual_hosts) {
    host.typed_per_filter_config['envoy.filters.http.ext_authz'] = { '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute', disabled: true };
  }
  return bootstrap;
}

async function envoyRow(ctx: BenchContext, shape: (bootstrap: Bootstrap) => Bootstrap, authPort: number | undefined, check?: { path: string }): Promise<RunningTarget> {
  const binary = ensureEnvoy();
  const addresses: Record<string, Address> = { [ADMIN]: loopback(0), [LISTENER]: loopback(0), [APP]: loopback(ctx.upstreamPort) };
  if (authPort !== undefined) addresses[EXTAUTH] = loopback(authPort);
  const envoy = await startEnvoy(binary, withAddresses(shape(await docBootstrap()), addresses), { logLevel: 'error' });
  const target = { url: envoy.url, stop: envoy.stop };
  if (check) await expectAllowed(target, check.path);
  return target;
}

/** Fails the row (instead of measuring 401/403s) unless the bench request gets through Envoy and the auth server. */
async function expectAllowed(target: RunningTarget, path: string): Promise<void> {
  // A plugin step is built asynchronously after the first config load: give it a moment.
  let status = 0;
  for (let attempt = 0; attempt < 50; attempt++) {
    const response = await fetch(target.url + path, request);
    await response.arrayBuffer();
    if ((status = response.status) === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await target.stop();
  throw new Error(`envoy answered ${status} on ${path}, not 200: the auth server did not allow the bench request`);
}

/** `gatehouse extauth` serving `default.basic` (Basic Auth) and `default.partners` (RequiredHeader), logging to a file. */
async function startGatehouseExtauth(ctx: BenchContext): Promise<Started> {
  const dir = await mkdtemp(join(ctx.workDir, 'envoy-extauth-'));
  const pluginDir = join(dir, 'plugins');
  await buildPlugin({ entry: REQUIRED_HEADER, name: 'RequiredHeader', outDir: pluginDir });
  const authConfig = (name: string, configs: object[]) => ({ apiVersion: 'enterprise.gatehouse.dev/v1', kind: 'AuthConfig', metadata: { name, namespace: 'default' }, spec: { configs } });
  await writeFile(
    join(dir, 'auth.yaml'),
    [
      authConfig('basic', [{ basicAuth: { realm: 'bench', apr: { users: { alice: aliceHash() } } } }]),
      authConfig('partners', [{ pluginAuth: { name: 'RequiredHeader', config: { RequiredHeader: 'x-api-key', AllowedValues: ['bench'] } } }]),
    ]
      .map((d) => stringify(d))
      .join('---\n'),
  );
  return startListening(process.execPath, [...NODE_FLAGS, CLI, 'extauth', '--config-dir', join(dir), '--plugin-dir', pluginDir, '--port', '0', '--host', '127.0.0.1']);
}

/** Runs `row` with an auth server started first, stopping both together. */
async function withAuthServer(start: () => Promise<Started>, row: (port: number) => Promise<RunningTarget>): Promise<RunningTarget> {
  const auth = await start();
  try {
    const target = await row(auth.port);
    return {
      url: target.url,
      stop: async () => {
        await target.stop();
        await auth.stop();
      },
    };
  } catch (error) {
    await auth.stop();
    throw error;
  }
}

/** `gatehouse extauth` serving the RateLimitService (Gloo's RateLimitConfig), with one limit the bench never reaches. */
async function startGatehouseRls(ctx: BenchContext): Promise<Started> {
  const dir = await mkdtemp(join(ctx.workDir, 'envoy-rls-'));
  const config = {
    apiVersion: 'ratelimit.solo.io/v1alpha1',
    kind: 'RateLimitConfig',
    metadata: { name: 'bench-limits', namespace: 'default' },
    spec: { raw: { descriptors: [{ key: 'generic_key', value: 'bench', rateLimit: { requestsPerUnit: 4_000_000_000, unit: 'DAY' } }], rateLimits: [{ actions: [{ genericKey: { descriptorValue: 'bench' } }] }] } },
  };
  await writeFile(join(dir, 'rlc.yaml'), stringify(config));
  return startListening(process.execPath, [...NODE_FLAGS, CLI, 'extauth', '--config-dir', dir, '--port', '0', '--host', '127.0.0.1']);
}

/**
 * The plain proxy with Envoy's rate limit filter asking `gatehouse extauth` on every request, as
 * Gloo translates a route's `rateLimitConfigs` (the config's generic_key, then its actions).
 */
function rateLimited(bootstrap: Bootstrap): Bootstrap {
  const b = plainProxy(bootstrap);
  const hcm = connectionManager(b);
  hcm.http_filters.unshift({
    name: 'envoy.filters.http.ratelimit',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit',
      domain: 'crd',
      failure_mode_deny: true,
      timeout: '1s',
      rate_limit_service: { transport_api_version: 'V3', grpc_service: { envoy_grpc: { cluster_name: 'ratelimit' } } },
    },
  });
  for (const host of hcm.route_config.virtual_hosts) {
    for (const route of host.routes) if (route.route) route.route.rate_limits = [{ actions: [{ generic_key: { descriptor_value: 'default.bench-limits' } }, { generic_key: { descriptor_value: 'bench' } }] }];
  }
  b.static_resources.clusters.push({
    name: 'ratelimit',
    type: 'STATIC',
    connect_timeout: '1s',
    // The doc's extauth address (the same `gatehouse extauth` serves both services), replaced by envoyRow.
    load_assignment: { cluster_name: 'ratelimit', endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: EXTAUTH.split(':')[0], port_value: Number(EXTAUTH.split(':')[1]) } } } }] }] },
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': { '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions', explicit_http_config: { http2_protocol_options: {} } },
    },
  });
  return b;
}

const RLS = 'envoy + gatehouse rate-limit server (RLS over gRPC, limit not reached)';
const BASIC = 'envoy + gatehouse extauth, Basic-Auth route';
const PLUGIN = 'envoy + gatehouse extauth, plugin route (RequiredHeader)';
const MINIMAL = 'envoy + minimal grpc-js Check server (allows all)';
const DISABLED = 'envoy, ext_authz disabled';
const PLAIN = 'envoy proxy (1 worker)';

export const scenarios: BenchScenario[] = [
  { group: 'envoy', name: PLAIN, request, start: (ctx) => envoyRow(ctx, plainProxy, undefined) },
  // The auth cluster has no server here: it is never called, and its failing health check costs nothing per request.
  { group: 'envoy', name: DISABLED, request, start: async (ctx) => envoyRow(ctx, authDisabled, await freePort()) },
  {
    group: 'envoy',
    name: MINIMAL,
    request,
    start: (ctx) => withAuthServer(() => startListening(process.execPath, [...NODE_FLAGS, ALLOW_SERVER], NODE_ENV_DEFAULTS), (port) => envoyRow(ctx, (b) => b, port, { path: '/' })),
  },
  { group: 'envoy', name: BASIC, request, start: (ctx) => withAuthServer(() => startGatehouseExtauth(ctx), (port) => envoyRow(ctx, (b) => b, port, { path: '/' })) },
  // Issue 28: Gatehouse as Envoy's rate-limit server, against Envoy with no rate limit.
  { group: 'envoy', name: RLS, request, start: (ctx) => withAuthServer(() => startGatehouseRls(ctx), (port) => envoyRow(ctx, rateLimited, port, { path: '/' })) },
  {
    group: 'envoy',
    name: PLUGIN,
    request: { ...request, path: PLUGIN_PATH },
    start: (ctx) => withAuthServer(() => startGatehouseExtauth(ctx), (port) => envoyRow(ctx, (b) => b, port, { path: PLUGIN_PATH })),
  },
];

export const goals: BenchModule['goals'] = [
  { row: 'gatehouse (1 worker, no access log)', against: PLAIN },
  { row: PLAIN, against: 'nginx proxy (1 worker)' },
  { row: RLS, against: PLAIN },
  // The auth server should cost little more than gRPC itself.
  { row: BASIC, against: MINIMAL, minThroughputRatio: 0.9 },
  { row: PLUGIN, against: BASIC },
  { row: MINIMAL, against: DISABLED },
  { row: DISABLED, against: PLAIN },
  // What the Envoy + gRPC shape costs against Gatehouse deciding in-process (scenarios/extauth.ts).
  { row: BASIC, against: 'gatehouse run, Basic-Auth route' },
];
