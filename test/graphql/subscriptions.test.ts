/**
 * Subscriptions on GraphQL routes through a real `gatehouse run` (issue 25 item 6): graphql-ws
 * (WebSocket, `graphql-transport-ws`) and GraphQL over SSE (graphql-sse, distinct connections),
 * the remote executor streaming from a real graphql-yoga upstream, auth on the upgrade and on the
 * SSE request, and the bounds (operations per connection, message size, limits per operation).
 */
import { ApolloClient, gql, InMemoryCache } from '@apollo/client';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { createClient as createSseClient } from 'graphql-sse';
import { createClient as createWsClient, type Client as WsClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';
import { startYoga, type YogaUpstream } from './support.ts';

const SDL = /* GraphQL */ `
  type Query { hello(name: String!): String slow: String items: [String] ping: String boom: String }
  type Mutation { bump(by: Int!): Int }
  type Subscription { countdown(from: Int!): Int headerSeen: String }
`;

const KEY = 'subscriber-key-1';
const b64 = (text: string) => Buffer.from(text).toString('base64');

let yoga: YogaUpstream;
let hostile: TestServer;

/** An upstream speaking broken GraphQL over SSE, chosen by the operation's name. */
function hostileAnswer(name: string, res: import('node:http').ServerResponse): void {
  const sse = () => res.writeHead(200, { 'content-type': 'text/event-stream' });
  switch (name) {
    case 'Huge':
      sse();
      res.end(`event: next\ndata: {"data":{"countdown":"${'x'.repeat(8192)}"}}\n\n`);
      return;
    case 'Endless':
      // One line that never ends: the gateway must not buffer it without bound.
      sse();
      res.write('data: ');
      for (let i = 0; i < 64; i++) res.write('y'.repeat(1024));
      return;
    case 'Garbage':
      sse();
      res.end('event: next\ndata: not json\n\n');
      return;
    case 'Leaky':
      sse();
      res.end('event: next\ndata: {"data":{"countdown":null},"errors":[{"message":"db at 10.9.8.7 refused user admin","path":["countdown"]}]}\n\nevent: complete\n\n');
      return;
    case 'Silent':
      // Headers, then nothing: the subscription idle timeout ends it.
      sse();
      res.flushHeaders();
      return;
    default:
      res.writeHead(500).end('boom');
  }
}
let dir: ConfigDir;
let gateway: GatehouseProcess;
let wsUrl: string;
let remoteApi: (name: string, limits?: object) => object;

beforeAll(async () => {
  yoga = await startYoga();
  hostile = await startServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => hostileAnswer(/subscription (\w+)/.exec(JSON.parse(Buffer.concat(chunks).toString()).query)?.[1] ?? '', res));
  });
  const remote = (name: string, limits?: object) => ({
    ...manifests.graphqlApi(name, { schemaDefinition: SDL, executor: { remote: { upstreamRef: { name: 'yoga' }, headers: { 'x-user': '{$headers.x-user}' } } } }),
    ...(limits ? { spec: { executableSchema: { schemaDefinition: SDL, executor: { remote: { upstreamRef: { name: 'yoga' }, headers: { 'x-user': '{$headers.x-user}' } } } }, limits } } : {}),
  });
  remoteApi = remote;
  const local = manifests.graphqlApi('local', {
    schemaDefinition: 'type Query { greeting: String @resolve(name: "greet") } type Subscription { ticks: Int @resolve(name: "greet") }',
    executor: { local: { resolutions: { greet: { mockResolver: { syncResponse: 'hello' } } } } },
  });
  const route = (prefix: string, name: string, auth = false) => ({ matchers: [{ prefix }], graphqlApiRef: { name }, ...(auth ? { options: { extauth: { configRef: { name: 'keys' } } } } : {}) });
  dir = await makeConfigDir({
    'reload.yaml': [remote('reloadable', { maxDepth: 5 })],
    'config.yaml': [
      manifests.upstream('yoga', [{ addr: '127.0.0.1', port: yoga.port }]),
      manifests.upstream('hostile', [{ addr: '127.0.0.1', port: hostile.port }]),
      manifests.upstream('yoga-small-pool', [{ addr: '127.0.0.1', port: yoga.port }], { circuitBreakers: { maxConnections: 2 } }),
      manifests.graphqlApi('small-pool', { schemaDefinition: SDL, executor: { remote: { upstreamRef: { name: 'yoga-small-pool' } } } }),
      { ...manifests.graphqlApi('hostile', { schemaDefinition: SDL, executor: { remote: { upstreamRef: { name: 'hostile' } } } }), spec: { executableSchema: { schemaDefinition: SDL, executor: { remote: { upstreamRef: { name: 'hostile' } } } }, limits: { maxResponseBytes: 4096, subscriptionIdleTimeout: '1s' } } },
      { apiVersion: 'v1', kind: 'Secret', type: 'extauth.solo.io/apikey', metadata: { name: 'subscriber', namespace: 'default' }, data: { 'api-key': b64(KEY) } },
      manifests.authConfig('keys', [{ apiKeyAuth: { headerName: 'x-api-key', k8sSecretApikeyStorage: { apiKeySecretRefs: [{ name: 'subscriber', namespace: 'default' }] } } }]),
      remote('remote'),
      { ...remote('over-ws'), spec: { executableSchema: { schemaDefinition: SDL, executor: { remote: { upstreamRef: { name: 'yoga' }, headers: { 'x-user': '{$headers.x-user}' }, subscriptionProtocol: 'graphql-ws' } } } } },
      remote('tight', { maxSubscriptionsPerConnection: 2, maxMessageBytes: 2048, maxDepth: 2 }),
      local,
      manifests.virtualService('graphql', {
        domains: ['*'],
        routes: [route('/small-pool', 'small-pool'), route('/over-ws', 'over-ws'), route('/reloadable', 'reloadable'), route('/hostile', 'hostile'), route('/secured', 'remote', true), route('/tight', 'tight'), route('/local', 'local'), route('/graphql', 'remote')],
      }),
    ],
  });
  gateway = await startGatehouse('run', ['--config-dir', dir.path]);
  wsUrl = gateway.url.replace(/^http/, 'ws');
});

afterAll(async () => {
  await gateway?.stop();
  await yoga?.close();
  await hostile?.close();
  await dir?.cleanup();
});

function wsClient(path: string, headers: Record<string, string> = {}, extra: object = {}): WsClient {
  class WithHeaders extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, { headers });
    }
  }
  return createWsClient({ url: `${wsUrl}${path}`, webSocketImpl: WithHeaders, retryAttempts: 0, lazy: true, ...extra });
}

/** Runs one operation over graphql-ws; resolves with every result, or rejects with the error the server sent. */
function collect(client: WsClient, payload: { query: string; variables?: Record<string, unknown> }): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    const results: unknown[] = [];
    client.subscribe(payload, { next: (r) => results.push(r), error: reject, complete: () => resolve(results) });
  });
}

describe('graphql-ws (graphql-transport-ws)', () => {
  it('streams a subscription from the graphql-yoga upstream, and runs queries and mutations on the socket', async () => {
    const client = wsClient('/graphql', { 'x-user': 'ada' });
    try {
      const results = await collect(client, { query: 'subscription Count($n: Int!) { countdown(from: $n) }', variables: { n: 3 } });
      expect(results).toEqual([3, 2, 1, 0].map((n) => ({ data: { countdown: n } })));
      // Request headers reach the upstream through the executor's header templates.
      expect(await collect(client, { query: 'subscription { headerSeen }' })).toEqual([{ data: { headerSeen: 'ada' } }]);
      expect(await collect(client, { query: '{ hello(name: "ws") }' })).toEqual([{ data: { hello: 'hello ws' } }]);
      const [bumped] = (await collect(client, { query: 'mutation { bump(by: 1) }' })) as { data: { bump: number } }[];
      expect(bumped!.data.bump).toBeGreaterThanOrEqual(1);
    } finally {
      await client.dispose();
    }
  });

  it('works with Apollo Client (GraphQLWsLink)', async () => {
    const ws = wsClient('/graphql');
    const apollo = new ApolloClient({ link: new GraphQLWsLink(ws), cache: new InMemoryCache() });
    try {
      const values = await new Promise<number[]>((resolve, reject) => {
        const seen: number[] = [];
        apollo.subscribe({ query: gql`subscription { countdown(from: 2) }` }).subscribe({ next: (r) => seen.push((r.data as { countdown: number }).countdown), error: reject, complete: () => resolve(seen) });
      });
      expect(values).toEqual([2, 1, 0]);
    } finally {
      await ws.dispose();
    }
  });

  it('validates each operation at the gateway and applies the limits before anything reaches the upstream', async () => {
    const client = wsClient('/tight');
    const before = yoga.requests.length;
    try {
      await expect(collect(client, { query: 'subscription { nope }' })).rejects.toEqual([expect.objectContaining({ message: expect.stringMatching(/Cannot query field "nope"/) })]);
      const aliases = Array.from({ length: 40 }, (_, i) => `a${i}: countdown(from: 1)`).join(' ');
      await expect(collect(client, { query: `subscription { ${aliases} }` })).rejects.toEqual([expect.objectContaining({ extensions: { code: 'GRAPHQL_LIMIT_ROOT_FIELDS' } })]);
      await expect(collect(client, { query: 'subscription { countdown(from: 1) }', variables: { deep: JSON.parse(`${'{"a":'.repeat(40)}1${'}'.repeat(40)}`) } })).rejects.toEqual([
        expect.objectContaining({ extensions: { code: 'GRAPHQL_LIMIT_VARIABLES_DEPTH' } }),
      ]);
      expect(yoga.requests.length).toBe(before);
    } finally {
      await client.dispose();
    }
  });

  it('bounds operations per connection (limits.maxSubscriptionsPerConnection) and message size (limits.maxMessageBytes)', async () => {
    const client = wsClient('/tight');
    try {
      // Two long subscriptions run (each has sent an event); the third is refused with the limit's code.
      const stops: (() => void)[] = [];
      await Promise.all(
        [0, 1].map(
          () =>
            new Promise<void>((resolve, reject) => {
              stops.push(client.subscribe({ query: 'subscription { countdown(from: 100000) }' }, { next: () => resolve(), error: reject, complete: () => reject(new Error('completed')) }));
            }),
        ),
      );
      const third = await collect(client, { query: 'subscription { countdown(from: 1) }' }).then(
        () => 'completed',
        (errors: { extensions?: { code?: string } }[]) => errors[0]?.extensions?.code,
      );
      expect(third).toBe('GRAPHQL_LIMIT_SUBSCRIPTIONS');
      // Completing one frees its place.
      stops[0]!();
      await expect.poll(() => collect(client, { query: '{ hello(name: "freed") }' }).catch(() => 'refused'), { timeout: 10_000 }).toEqual([{ data: { hello: 'hello freed' } }]);
      stops[1]!();
    } finally {
      await client.dispose();
    }
    // A message over 2 KiB closes the socket with 1009.
    const raw = new WebSocket(`${wsUrl}/tight`, 'graphql-transport-ws');
    await new Promise((resolve) => raw.once('open', resolve));
    raw.send(JSON.stringify({ type: 'connection_init' }));
    raw.send(JSON.stringify({ type: 'subscribe', id: '1', payload: { query: `{ hello(name: "${'x'.repeat(4096)}") }` } }));
    const code = await new Promise<number>((resolve) => raw.once('close', resolve));
    expect(code).toBe(1009);
  });

  it('hostile frames: garbage, a subscribe before connection_init, duplicate ids; the gateway keeps serving', async () => {
    /** Sends `messages` (after connection_ack when `init`); resolves with the close code. */
    const frames = async (messages: string[], init = false) => {
      const raw = new WebSocket(`${wsUrl}/graphql`, 'graphql-transport-ws');
      await new Promise((resolve, reject) => {
        raw.once('open', resolve);
        raw.once('error', reject);
      });
      const closed = new Promise<number>((resolve) => raw.once('close', resolve));
      if (init) {
        raw.send(JSON.stringify({ type: 'connection_init' }));
        await new Promise<void>((resolve) => raw.on('message', (m) => JSON.parse(String(m)).type === 'connection_ack' && resolve()));
      }
      for (const m of messages) raw.send(m);
      return closed;
    };
    expect(await frames(['not json'])).toBe(4400);
    expect(await frames([JSON.stringify({ type: 'subscribe', id: '1', payload: { query: '{ ping }' } })])).toBe(4401);
    const endless = JSON.stringify({ type: 'subscribe', id: 'a', payload: { query: 'subscription { countdown(from: 100000) }' } });
    expect(await frames([endless, endless], true)).toBe(4409);
    expect(await frames([JSON.stringify({ type: 'subscribe', id: 'b', payload: { query: 42 } })], true)).toBe(4400);
    const client = wsClient('/graphql');
    try {
      expect(await collect(client, { query: '{ hello(name: "after") }' })).toEqual([{ data: { hello: 'hello after' } }]);
    } finally {
      await client.dispose();
    }
  });

  it('a malformed upgrade (no Sec-WebSocket-Key, bad version) is answered 4xx and closed; the gateway keeps serving', async () => {
    const { connect } = await import('node:net');
    const raw = (head: string) =>
      new Promise<string>((resolve) => {
        const socket = connect(Number(new URL(gateway.url).port), '127.0.0.1');
        let answer = '';
        socket.on('data', (c: Buffer) => (answer += c.toString()));
        socket.on('close', () => resolve(answer));
        socket.on('error', () => resolve(answer));
        socket.write(head);
      });
    expect(await raw('GET /graphql HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n')).toMatch(/^HTTP\/1\.1 400/);
    expect(await raw('GET /graphql HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 99\r\n\r\n')).toMatch(/^HTTP\/1\.1 400/);
    const client = wsClient('/graphql');
    try {
      expect(await collect(client, { query: '{ hello(name: "fine") }' })).toEqual([{ data: { hello: 'hello fine' } }]);
    } finally {
      await client.dispose();
    }
  });

  it('runs auth on the upgrade: no key → 401 before any WebSocket; the right key → subscribed', async () => {
    const refused = new WebSocket(`${wsUrl}/secured`, 'graphql-transport-ws');
    const status = await new Promise<number>((resolve) => refused.once('unexpected-response', (_req, res) => resolve(res.statusCode!)));
    expect(status).toBe(401);
    refused.on('error', () => {});
    const client = wsClient('/secured', { 'x-api-key': KEY });
    try {
      expect(await collect(client, { query: 'subscription { countdown(from: 1) }' })).toEqual([{ data: { countdown: 1 } }, { data: { countdown: 0 } }]);
    } finally {
      await client.dispose();
    }
  });

  it('a local-executor API refuses subscriptions with a clear error', async () => {
    const client = wsClient('/local');
    try {
      await expect(collect(client, { query: 'subscription { ticks }' })).rejects.toEqual([expect.objectContaining({ extensions: { code: 'GRAPHQL_SUBSCRIPTIONS_UNSUPPORTED' } })]);
      expect(await collect(client, { query: '{ greeting }' })).toEqual([{ data: { greeting: 'hello' } }]);
    } finally {
      await client.dispose();
    }
  });
});

describe('GraphQL over SSE (graphql-sse, distinct connections)', () => {
  function sse(path: string, headers: Record<string, string> = {}) {
    return createSseClient({ url: `${gateway.url}${path}`, singleConnection: false, retryAttempts: 0, headers });
  }
  async function collectSse(client: ReturnType<typeof sse>, query: string): Promise<unknown[]> {
    const results: unknown[] = [];
    for await (const result of client.iterate({ query })) results.push(result);
    return results;
  }

  it('streams a subscription from the upstream and answers a query as one event', async () => {
    const client = sse('/graphql', { 'x-user': 'grace' });
    try {
      expect(await collectSse(client, 'subscription { countdown(from: 2) }')).toEqual([2, 1, 0].map((n) => ({ data: { countdown: n } })));
      expect(await collectSse(client, 'subscription { headerSeen }')).toEqual([{ data: { headerSeen: 'grace' } }]);
      expect(await collectSse(client, '{ hello(name: "sse") }')).toEqual([{ data: { hello: 'hello sse' } }]);
    } finally {
      client.dispose();
    }
  });

  it('refuses what fails validation or a limit with a 4xx JSON answer, and runs auth on the request', async () => {
    const invalid = await fetch(`${gateway.url}/tight`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify({ query: 'subscription { nope }' }) });
    expect(invalid.status).toBe(400);
    expect(((await invalid.json()) as { errors: { message: string }[] }).errors[0]!.message).toMatch(/Cannot query field "nope"/);
    const unauthenticated = await fetch(`${gateway.url}/secured`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify({ query: 'subscription { countdown(from: 1) }' }) });
    expect(unauthenticated.status).toBe(401);
    await unauthenticated.body?.cancel();
    const client = sse('/secured', { 'x-api-key': KEY });
    try {
      expect(await collectSse(client, 'subscription { countdown(from: 1) }')).toEqual([{ data: { countdown: 1 } }, { data: { countdown: 0 } }]);
    } finally {
      client.dispose();
    }
  });

  it('a client that leaves mid-stream stops the upstream stream; the gateway keeps serving', async () => {
    const controller = new AbortController();
    const response = await fetch(`${gateway.url}/graphql`, { method: 'POST', signal: controller.signal, headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify({ query: 'subscription { countdown(from: 100000) }' }) });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toMatch(/event: next/);
    controller.abort();
    const client = sse('/graphql');
    try {
      expect(await collectSse(client, '{ hello(name: "still") }')).toEqual([{ data: { hello: 'hello still' } }]);
    } finally {
      client.dispose();
    }
  });
});

describe('a hostile upstream stream', () => {
  it('oversized events, endless lines, garbage, leaked details and silence end the stream with an error; the gateway keeps serving', { timeout: 60_000 }, async () => {
    const client = wsClient('/hostile');
    const sse = createSseClient({ url: `${gateway.url}/hostile`, singleConnection: false, retryAttempts: 0 });
    try {
      const run = (name: string) => collect(client, { query: `subscription ${name} { countdown(from: 1) }` });
      expect(await run('Huge')).toEqual([{ errors: [expect.objectContaining({ extensions: { code: 'GRAPHQL_LIMIT_RESPONSE_BYTES' } })] }]);
      expect(await run('Endless')).toEqual([{ errors: [expect.objectContaining({ extensions: { code: 'GRAPHQL_LIMIT_RESPONSE_BYTES' } })] }]);
      expect(await run('Garbage')).toEqual([{ errors: [expect.objectContaining({ extensions: { code: 'BAD_UPSTREAM_RESPONSE' } })] }]);
      const leaky = await run('Leaky');
      expect(JSON.stringify(leaky)).not.toContain('10.9.8.7');
      expect(leaky).toEqual([{ data: { countdown: null }, errors: [{ message: 'the upstream GraphQL server reported an error', path: ['countdown'], extensions: { code: 'UPSTREAM_ERROR' } }] }]);
      expect(await run('Silent')).toEqual([{ errors: [expect.objectContaining({ extensions: { code: 'UPSTREAM_TIMEOUT' } })] }]);
      // A 500 with a text body.
      expect(await run('Broken')).toEqual([{ errors: [expect.objectContaining({ extensions: { code: 'BAD_UPSTREAM_RESPONSE' } })] }]);
      // The same over SSE.
      const viaSse: unknown[] = [];
      for await (const r of sse.iterate({ query: 'subscription Huge { countdown(from: 1) }' })) viaSse.push(r);
      expect(viaSse).toEqual([{ errors: [expect.objectContaining({ extensions: { code: 'GRAPHQL_LIMIT_RESPONSE_BYTES' } })] }]);
    } finally {
      await client.dispose();
      sse.dispose();
    }
    const healthy = wsClient('/graphql');
    try {
      expect(await collect(healthy, { query: '{ hello(name: "alive") }' })).toEqual([{ data: { hello: 'hello alive' } }]);
    } finally {
      await healthy.dispose();
    }
  });
});

describe('remote executor with subscriptionProtocol: graphql-ws (upstreams without SSE)', () => {
  it('passes subscriptions to the upstream over graphql-ws, for graphql-ws and SSE clients, headers on the handshake', async () => {
    const before = yoga.requests.length;
    const client = wsClient('/over-ws', { 'x-user': 'lin' });
    try {
      expect(await collect(client, { query: 'subscription { countdown(from: 2) }' })).toEqual([2, 1, 0].map((n) => ({ data: { countdown: n } })));
      expect(await collect(client, { query: 'subscription { headerSeen }' })).toEqual([{ data: { headerSeen: 'lin' } }]);
    } finally {
      await client.dispose();
    }
    const sse = createSseClient({ url: `${gateway.url}/over-ws`, singleConnection: false, retryAttempts: 0 });
    try {
      const results: unknown[] = [];
      for await (const r of sse.iterate({ query: 'subscription { countdown(from: 1) }' })) results.push(r);
      expect(results).toEqual([{ data: { countdown: 1 } }, { data: { countdown: 0 } }]);
    } finally {
      sse.dispose();
    }
    // None of it went over HTTP POST.
    expect(yoga.requests.length).toBe(before);
  });
});

describe('upstream connections', () => {
  it('subscriptions take at most half of the upstream pool: queries still get through', { timeout: 30_000 }, async () => {
    // maxConnections 2: one stream at a time.
    const controller = new AbortController();
    const endless = await fetch(`${gateway.url}/small-pool`, { method: 'POST', signal: controller.signal, headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify({ query: 'subscription { countdown(from: 100000) }' }) });
    const reader = endless.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toMatch(/event: next/);
    try {
      const client = wsClient('/small-pool');
      try {
        const second = await collect(client, { query: 'subscription { countdown(from: 1) }' });
        expect(second).toEqual([{ errors: [expect.objectContaining({ extensions: { code: 'GRAPHQL_LIMIT_SUBSCRIPTIONS' } })] }]);
      } finally {
        await client.dispose();
      }
      const query = await fetch(`${gateway.url}/small-pool`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: '{ hello(name: "pool") }' }) });
      expect(await query.json()).toEqual({ data: { hello: 'hello pool' } });
    } finally {
      controller.abort();
    }
    // Once the stream ends its place is free again.
    const client = wsClient('/small-pool');
    try {
      await expect.poll(() => collect(client, { query: 'subscription { countdown(from: 0) }' }), { timeout: 10_000 }).toEqual([{ data: { countdown: 0 } }]);
    } finally {
      await client.dispose();
    }
  });
});

describe('reconfiguration', () => {
  it('a changed API closes its WebSockets (1001) so that clients reconnect under the new config; other APIs\' stay open', { timeout: 60_000 }, async () => {
    const open = (path: string) => {
      const raw = new WebSocket(`${wsUrl}${path}`, 'graphql-transport-ws');
      const closed = new Promise<{ code: number; reason: string }>((resolve) => raw.once('close', (code, reason) => resolve({ code, reason: String(reason) })));
      return { raw, closed, ready: new Promise<void>((resolve) => raw.once('open', () => { raw.send(JSON.stringify({ type: 'connection_init' })); raw.once('message', () => resolve()); })) };
    };
    const changed = open('/reloadable');
    const untouched = open('/graphql');
    await Promise.all([changed.ready, untouched.ready]);
    await dir.write('reload.yaml', [remoteApi('reloadable', { maxDepth: 6 })]);
    expect(await changed.closed).toEqual({ code: 1001, reason: 'the GraphQL API was reconfigured; reconnect' });
    expect(untouched.raw.readyState).toBe(WebSocket.OPEN);
    untouched.raw.close();
  });
});
