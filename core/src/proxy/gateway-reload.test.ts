import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { pino } from 'pino';
import { parseManifests } from '../config/manifest.ts';
import { ConfigStore } from '../config/store.ts';
import { createGraphQLEndpoints } from '../graphql/index.ts';
import { Gateway } from './gateway.ts';
import { UpstreamRegistry, type UpstreamCluster } from './upstream/upstream-cluster.ts';

const manifests = (routeUpstream: string) => [
  { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'rest' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 9 }] } } },
  { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'a' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 10 }] } } },
  { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'b' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 11 }] } } },
  {
    apiVersion: 'graphql.gatehouse.dev/v1beta1',
    kind: 'GraphQLApi',
    metadata: { name: 'api' },
    spec: {
      executableSchema: {
        schemaDefinition: 'type Query { users: [String] @resolve(name: "users") }',
        executor: { local: { resolutions: { users: { restResolver: { upstreamRef: { name: 'rest' }, request: { headers: { ':path': '/users' } } } } } } },
      },
    },
  },
  {
    apiVersion: 'gateway.gatehouse.dev/v1',
    kind: 'VirtualService',
    metadata: { name: 'vs' },
    spec: {
      virtualHost: {
        domains: ['*'],
        routes: [
          { matchers: [{ prefix: '/graphql' }], graphqlApiRef: { name: 'api' } },
          { matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: routeUpstream } } } },
        ],
      },
    },
  },
];

describe('Gateway.update', () => {
  test('keeps pools that only GraphQL resolvers use, closes pools nothing uses any more', async () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    const load = (routeUpstream: string) => store.load(parseManifests('c.yaml', manifests(routeUpstream).map((m) => stringify(m)).join('---\n')).documents);
    const logger = pino({ level: 'silent' });
    const upstreams = new UpstreamRegistry();
    const gateway = new Gateway({ logger, upstreams, graphql: createGraphQLEndpoints({ upstreams, logger }), accessLog: false });

    const clusterOf = (name: string, snapshot: ReturnType<typeof load>): UpstreamCluster => upstreams.forUpstream(snapshot.resources.get(`Upstream/default/${name}`) as never);
    const first = load('a');
    gateway.update(first);
    const rest = clusterOf('rest', first);
    const a = clusterOf('a', first);

    const second = load('b');
    gateway.update(second);
    expect(clusterOf('rest', second)).toBe(rest);
    expect((rest.hosts[0]!.dispatcher as unknown as { closed: boolean }).closed).toBe(false);
    // The route moved from a to b: a's pool is closed once drained.
    expect((a.hosts[0]!.dispatcher as unknown as { closed: boolean }).closed).toBe(true);
    await gateway.close();
  });
});
