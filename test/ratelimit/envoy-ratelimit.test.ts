/**
 * A real Envoy (test/envoy/install-envoy.sh) using Gatehouse as its rate-limit server: Envoy's
 * `envoy.filters.http.ratelimit` filter calls `envoy.service.ratelimit.v3.RateLimitService` on
 * the auth port of `gatehouse run`, with route rate-limit actions (generic_key, request_headers,
 * remote_address, and Gloo's set-style convention) composing the descriptors of a RateLimitConfig.
 */
import { afterAll, beforeAll, describe, expect, it, test } from 'vitest';
import { findEnvoy, startEnvoy, type EnvoyProcess } from '../envoy/envoy.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send, type Reply } from '../support/http.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';

const ENVOY = findEnvoy();
if (!ENVOY) {
  const message = 'envoy not found: run test/envoy/install-envoy.sh (or set GATEHOUSE_ENVOY)';
  if (process.env.CI === 'true') {
    describe('Envoy with Gatehouse as its rate-limit server', () => {
      it('needs the envoy binary on CI', () => {
        throw new Error(message);
      });
    });
  } else {
    console.warn(`\n*** SKIPPED test/ratelimit/envoy-ratelimit.test.ts: ${message} ***\n`);
  }
}

/** Gloo's prefix for a RateLimitConfig's descriptors: generic_key <namespace>.<name>. */
const CONFIG = { generic_key: { descriptor_value: 'gloo-system.envoy-limits' } };
const SET_MARKER = { generic_key: { descriptor_value: 'solo.setDescriptor.uniqueValue' } };

const rateLimitConfig = {
  apiVersion: 'ratelimit.solo.io/v1alpha1',
  kind: 'RateLimitConfig',
  metadata: { name: 'envoy-limits', namespace: 'gloo-system' },
  spec: {
    raw: {
      descriptors: [
        { key: 'generic_key', value: 'per-route', rateLimit: { requestsPerUnit: 3, unit: 'HOUR' } },
        { key: 'account', rateLimit: { requestsPerUnit: 2, unit: 'HOUR' } },
        { key: 'remote_address', rateLimit: { requestsPerUnit: 4, unit: 'HOUR' } },
      ],
      setDescriptors: [{ simpleDescriptors: [{ key: 'type', value: 'a' }, { key: 'number', value: 'one' }], rateLimit: { requestsPerUnit: 1, unit: 'HOUR' } }],
      rateLimits: [{ actions: [{ genericKey: { descriptorValue: 'per-route' } }] }],
    },
  },
};

function bootstrap(appPort: number, rlsPort: number): object {
  const route = (prefix: string, actions: object[]) => ({ match: { prefix }, route: { cluster: 'app', rate_limits: [{ actions }] } });
  const cluster = (name: string, port: number, http2 = false) => ({
    name,
    type: 'STATIC',
    connect_timeout: '2s',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } }] }] },
    ...(http2
      ? { typed_extension_protocol_options: { 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': { '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions', explicit_http_config: { http2_protocol_options: {} } } } }
      : {}),
  });
  return {
    admin: { address: { socket_address: { address: '127.0.0.1', port_value: 0 } } },
    static_resources: {
      listeners: [
        {
          name: 'main',
          address: { socket_address: { address: '127.0.0.1', port_value: 0 } },
          filter_chains: [
            {
              filters: [
                {
                  name: 'envoy.filters.network.http_connection_manager',
                  typed_config: {
                    '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
                    stat_prefix: 'ingress',
                    // remote_address descriptors carry the peer's address.
                    use_remote_address: true,
                    route_config: {
                      virtual_hosts: [
                        {
                          name: 'app',
                          domains: ['*'],
                          routes: [
                            route('/generic', [CONFIG, { generic_key: { descriptor_value: 'per-route' } }]),
                            route('/headers', [CONFIG, { request_headers: { header_name: 'x-account', descriptor_key: 'account' } }]),
                            route('/remote', [CONFIG, { remote_address: {} }]),
                            // Gloo's translation of setActions: the marker, and skip_if_absent on headers.
                            route('/set', [CONFIG, SET_MARKER, { request_headers: { header_name: 'x-number', descriptor_key: 'number', skip_if_absent: true } }, { request_headers: { header_name: 'x-type', descriptor_key: 'type', skip_if_absent: true } }]),
                            { match: { prefix: '/' }, route: { cluster: 'app' } },
                          ],
                        },
                      ],
                    },
                    http_filters: [
                      {
                        name: 'envoy.filters.http.ratelimit',
                        typed_config: {
                          '@type': 'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit',
                          domain: 'crd',
                          failure_mode_deny: true,
                          timeout: '5s',
                          enable_x_ratelimit_headers: 'DRAFT_VERSION_03',
                          rate_limit_service: { transport_api_version: 'V3', grpc_service: { envoy_grpc: { cluster_name: 'ratelimit' } } },
                        },
                      },
                      { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } },
                    ],
                  },
                },
              ],
            },
          ],
        },
      ],
      clusters: [cluster('app', appPort), cluster('ratelimit', rlsPort, true)],
    },
  };
}

/** Waits until the current HOUR window has more than `marginMs` left, so a burst stays in one window. */
async function awayFromWindowEnd(marginMs = 30_000): Promise<void> {
  for (;;) {
    const left = 3_600_000 - (Date.now() % 3_600_000);
    if (left > marginMs) return;
    await new Promise((r) => setTimeout(r, Math.min(left + 50, 1000)));
  }
}

describe.skipIf(!ENVOY)('Envoy with Gatehouse (gatehouse run) as its rate-limit server', () => {
  let app: TestServer;
  let config: ConfigDir;
  let gatehouse: GatehouseProcess;
  let envoy: EnvoyProcess;

  beforeAll(async () => {
    app = await startEcho('app');
    config = await makeConfigDir({ 'rlc.yaml': rateLimitConfig });
    gatehouse = await startGatehouse('run', ['--config-dir', config.path], { httpsPort: false });
    envoy = await startEnvoy(ENVOY!, bootstrap(app.port, gatehouse.extauthPort!));
    await awayFromWindowEnd();
  }, 90_000);

  afterAll(async () => {
    await envoy?.stop();
    await gatehouse?.stop();
    await app?.close();
    await config?.cleanup();
  });

  const get = (path: string, headers: Record<string, string> = {}) => send(envoy.url, { path, headers });
  const statuses = (replies: Reply[]) => replies.map((r) => r.status);
  const burst = async (n: number, path: string, headers: Record<string, string> = {}) => {
    const out: Reply[] = [];
    for (let i = 0; i < n; i++) out.push(await get(path, headers));
    return out;
  };

  test('generic_key: exactly 3 allowed, then 429 with x-envoy-ratelimited; the x-ratelimit-* headers count down', async () => {
    const replies = await burst(5, '/generic');
    expect(statuses(replies)).toEqual([200, 200, 200, 429, 429]);
    expect(replies.slice(0, 3).map((r) => r.headers['x-ratelimit-remaining'])).toEqual(['2', '1', '0']);
    for (const reply of replies) {
      // Envoy writes it from our statuses: the limit, its window and its name.
      expect(reply.headers['x-ratelimit-limit']).toBe('3, 3;w=3600;name="crd|generic_key^gloo-system.envoy-limits|generic_key^per-route"');
      const reset = Number(reply.headers['x-ratelimit-reset']);
      expect(reset).toBeGreaterThan(0);
      expect(reset).toBeLessThanOrEqual(3600);
    }
    expect(replies[3]!.headers['x-envoy-ratelimited']).toBe('true');
    expect(replies[0]!.headers['x-envoy-ratelimited']).toBeUndefined();
    // The upstream saw only the allowed requests' bodies (429s are Envoy's local replies).
    expect(JSON.parse(replies[0]!.body).upstream).toBe('app');
    expect(await envoy.stat('cluster.app.ratelimit.error')).toBe(0);
    expect(await envoy.stat('cluster.app.ratelimit.over_limit')).toBeGreaterThanOrEqual(2);
    // Gatehouse counts its decisions by domain and result.
    const metrics = await (await fetch(`${gatehouse.adminUrl}/metrics`)).text();
    expect(Number(/^gatehouse_ratelimit_decisions_total\{domain="crd",result="over_limit"\} (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(2);
  });

  test('request_headers: each account value has its own counter of 2; without the header no descriptor is sent', async () => {
    expect(statuses(await burst(3, '/headers', { 'x-account': 'alice' }))).toEqual([200, 200, 429]);
    expect(statuses(await burst(3, '/headers', { 'x-account': 'bob' }))).toEqual([200, 200, 429]);
    expect(statuses(await burst(4, '/headers'))).toEqual([200, 200, 200, 200]);
  });

  test('remote_address: 4 allowed from 127.0.0.1, then 429', async () => {
    expect(statuses(await burst(5, '/remote'))).toEqual([200, 200, 200, 200, 429]);
  });

  test('set-style: the rule matches type=a and number=one in any order; a subset of the rule does not match', async () => {
    expect(statuses(await burst(2, '/set', { 'x-type': 'a', 'x-number': 'one' }))).toEqual([200, 429]);
    expect(statuses(await burst(3, '/set', { 'x-type': 'a' }))).toEqual([200, 200, 200]);
    expect(statuses(await burst(2, '/set', { 'x-type': 'a', 'x-number': 'two' }))).toEqual([200, 200]);
  });

  test('routes without rate-limit actions are never limited', async () => {
    expect(statuses(await burst(6, '/other'))).toEqual([200, 200, 200, 200, 200, 200]);
  });
});
