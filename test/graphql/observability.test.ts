/**
 * Operation-level observability (issue 25 item 12) through a real `gatehouse run`: a latency
 * histogram labelled by operation name (bounded: 50 names per API, then "other"), remote
 * upstream errors counted as errors, refused requests (4xx) counted, and `traceparent` and
 * `x-request-id` on every upstream call: REST and gRPC resolvers, the remote executor.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';
import { startYoga, type YogaUpstream } from './support.ts';

const PROTO = `
syntax = "proto3";
package echo;
message Ping { string text = 1; }
service Echo { rpc Say(Ping) returns (Ping); }
`;

const SDL = 'type Query { book(id: ID!): Book @resolve(name: "book") say(text: String): Ping @resolve(name: "say") } type Book { id: ID title: String } type Ping { text: String }';
const YOGA_SDL = 'type Query { hello(name: String!): String slow: String items: [String] ping: String boom: String } type Mutation { bump(by: Int!): Int } type Subscription { countdown(from: Int!): Int headerSeen: String }';

let rest: TestServer;
let restHeaders: Record<string, unknown>[];
let grpcServer: grpc.Server;
let grpcMetadata: grpc.Metadata[];
let protoDir: string;
let yoga: YogaUpstream;
let dir: ConfigDir;
let gateway: GatehouseProcess;

beforeAll(async () => {
  restHeaders = [];
  rest = await startServer((req, res) => {
    restHeaders.push(req.headers);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: req.url!.split('/')[2], title: 'T' }));
  });
  protoDir = await mkdtemp(join(tmpdir(), 'gatehouse-obs-'));
  await writeFile(join(protoDir, 'echo.proto'), PROTO);
  const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(join(protoDir, 'echo.proto'), { keepCase: true })) as any;
  grpcMetadata = [];
  grpcServer = new grpc.Server();
  grpcServer.addService(pkg.echo.Echo.service, {
    Say(call: grpc.ServerUnaryCall<{ text: string }, object>, callback: grpc.sendUnaryData<object>) {
      grpcMetadata.push(call.metadata);
      callback(null, { text: call.request.text });
    },
  });
  const grpcPort = await new Promise<number>((resolve, reject) => grpcServer.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  yoga = await startYoga();
  const route = (prefix: string, name: string) => ({ matchers: [{ prefix }], graphqlApiRef: { name } });
  dir = await makeConfigDir({
    'config.yaml': [
      manifests.upstream('rest', [{ addr: '127.0.0.1', port: rest.port }]),
      manifests.upstream('grpc', [{ addr: '127.0.0.1', port: grpcPort }], { useHttp2: true }),
      manifests.upstream('yoga', [{ addr: '127.0.0.1', port: yoga.port }]),
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'echo-proto' }, data: { 'echo.proto': PROTO } },
      manifests.graphqlApi('local', {
        schemaDefinition: SDL,
        executor: {
          local: {
            resolutions: {
              book: { restResolver: { upstreamRef: { name: 'rest' }, request: { headers: { ':path': '/books/{$args.id}' } } } },
              say: { grpcResolver: { upstreamRef: { name: 'grpc' }, requestTransform: { serviceName: 'echo.Echo', methodName: 'Say', outgoingMessageJson: { text: '{$args.text}' } } } },
            },
          },
        },
        grpcDescriptorRegistry: { protoRefsList: { protoRefs: [{ name: 'echo-proto' }] } },
      }),
      manifests.graphqlApi('remote', { schemaDefinition: YOGA_SDL, executor: { remote: { upstreamRef: { name: 'yoga' } } } }),
      manifests.virtualService('graphql', { domains: ['*'], routes: [route('/local', 'local'), route('/remote', 'remote')] }),
    ],
  });
  gateway = await startGatehouse('run', ['--config-dir', dir.path]);
});

afterAll(async () => {
  await gateway?.stop();
  await rest?.close();
  grpcServer?.forceShutdown();
  await yoga?.close();
  await dir?.cleanup();
  if (protoDir) await rm(protoDir, { recursive: true, force: true });
});

async function post(path: string, body: object, headers: Record<string, string> = {}) {
  const response = await fetch(`${gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as any };
}

const scrape = async () => (await fetch(`${gateway.adminUrl}/metrics`)).text();
/** The value of one series, 0 when absent. */
const value = (text: string, series: string) => Number(new RegExp(`^${series.replace(/[{}"/.]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);

describe('trace headers on every upstream call', () => {
  const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';

  it('REST and gRPC resolvers: the incoming trace id with a new span, and the request id', async () => {
    const { status, body } = await post('/local', { query: '{ book(id: "1") { id } say(text: "hi") { text } }' }, { traceparent: `00-${TRACE}-00f067aa0ba902b7-01`, 'x-request-id': 'req-obs-1' });
    expect(status).toBe(200);
    expect(body.data).toEqual({ book: { id: '1' }, say: { text: 'hi' } });
    const restSeen = restHeaders.at(-1)!;
    expect(restSeen['x-request-id']).toBe('req-obs-1');
    expect(restSeen.traceparent).toMatch(new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`));
    expect(restSeen.traceparent).not.toContain('00f067aa0ba902b7');
    const md = grpcMetadata.at(-1)!;
    expect(md.get('x-request-id')).toEqual(['req-obs-1']);
    expect(md.get('traceparent')).toEqual([restSeen.traceparent]);
  });

  it('a new trace when the request has none or a malformed one; the remote executor sends them too', async () => {
    for (const traceparent of [undefined, 'garbage', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, `00-${TRACE.toUpperCase()}-zz-01`]) {
      const before = yoga.requests.length;
      await post('/remote', { query: '{ hello(name: "t") }' }, traceparent ? { traceparent } : {});
      await expect.poll(() => yoga.requests.length).toBeGreaterThan(before);
      const seen = yoga.requests.at(-1)!.headers;
      expect(seen.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
      expect(seen.traceparent).not.toContain('0'.repeat(32));
      expect(seen['x-request-id']).toMatch(/\S/);
    }
  });
});

describe('operation metrics', () => {
  it('a latency histogram by operation name, at most 50 names per API (then "other")', async () => {
    for (let i = 0; i < 60; i++) expect((await post('/local', { query: `query Op${i} { book(id: "${i % 3}") { id } }` })).status).toBe(200);
    await post('/local', { query: '{ book(id: "1") { id } }' });
    const text = await scrape();
    const names = new Set([...text.matchAll(/^gatehouse_graphql_operation_duration_seconds_count\{api="default\/local",operation="query",operation_name="([^"]+)",result="ok"\}/gm)].map((m) => m[1]));
    expect(names.size).toBeLessThanOrEqual(51);
    expect(names.has('Op0')).toBe(true);
    expect(names.has('other')).toBe(true);
    expect(value(text, 'gatehouse_graphql_operation_duration_seconds_count{api="default/local",operation="query",operation_name="Op0",result="ok"}')).toBe(1);
    expect(text).toMatch(/gatehouse_graphql_operation_duration_seconds_bucket\{le="\+Inf",api="default\/local",operation="query",operation_name="Op0",result="ok"\} 1/);
  });

  it('remote upstream errors count as errors; refused requests (4xx) are counted', async () => {
    const before = await scrape();
    expect((await post('/remote', { query: 'query Boom { boom }' })).body.errors[0].extensions.code).toBe('UPSTREAM_ERROR');
    expect((await post('/remote', { query: '{ nope }' })).status).toBe(400);
    expect((await post('/local', { query: '{ book(id: ' })).status).toBe(400);
    const invalidJson = await fetch(`${gateway.url}/local`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
    expect(invalidJson.status).toBe(400);
    const after = await scrape();
    expect(value(after, 'gatehouse_graphql_operations_total{api="default/remote",operation="query",result="error"}')).toBe(value(before, 'gatehouse_graphql_operations_total{api="default/remote",operation="query",result="error"}') + 1);
    expect(value(after, 'gatehouse_graphql_operation_duration_seconds_count{api="default/remote",operation="query",operation_name="Boom",result="error"}')).toBe(1);
    expect(value(after, 'gatehouse_graphql_operations_total{api="default/remote",operation="unknown",result="rejected"}')).toBe(value(before, 'gatehouse_graphql_operations_total{api="default/remote",operation="unknown",result="rejected"}') + 1);
    expect(value(after, 'gatehouse_graphql_operations_total{api="default/local",operation="unknown",result="rejected"}')).toBe(value(before, 'gatehouse_graphql_operations_total{api="default/local",operation="unknown",result="rejected"}') + 2);
  });
});
