import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSchema, graphql } from 'graphql';
import { BOOKS, BOOKS_SDL, USERS_SDL } from '../graphql-schemas.ts';
import type { BenchContext, BenchModule, BenchScenario, RunningTarget } from '../scenario.ts';
import { inTurns } from '../turns.ts';
import { freePort, startListening, startNginx, stopChild, type Started } from '../tools.ts';
import { NODE_ENV_DEFAULTS, NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';

/**
 * GraphQL rows (issue 3):
 *  (a) the remote executor vs GraphQL Hive Gateway in proxy mode, in front of the same upstream;
 *  (b) a REST-resolved query vs a hand-written graphql-js + undici server making the same calls.
 * Upstreams start once per row pair, so both rows of a pair see the same one.
 */

const here = (name: string) => fileURLToPath(new URL(`../${name}`, import.meta.url));
const HIVE_VERSION = '2.15.1';
// The npm registry reachable here lacks @graphql-tools/batch-execute >= 10.3, which the newest
// @graphql-tools/delegate wants; the previous delegate release works with what is there.
const HIVE_OVERRIDES = { '@graphql-tools/delegate': '12.2.1' };

export const REMOTE_REQUEST = {
  method: 'POST',
  path: '/graphql',
  headers: { 'content-type': 'application/json', accept: 'application/json' },
  body: JSON.stringify({ query: 'query Books { books { id title author } }', operationName: 'Books' }),
};
export const REST_REQUEST = {
  method: 'POST',
  path: '/graphql',
  headers: { 'content-type': 'application/json', accept: 'application/json' },
  body: JSON.stringify({ query: '{ user(id: "1") { id name company { id name } } }' }),
};

/** Starts a shared upstream on first use; stopped when the last row of its pair is done. */
function shared<T extends { stop(): Promise<void> }>(start: (ctx: BenchContext) => Promise<T>, rows: readonly string[]) {
  // Only the rows BENCH_FILTER keeps use it (run.ts's filter): with all four counted, a filtered run never stopped it.
  const filter = process.env.BENCH_FILTER ? new RegExp(process.env.BENCH_FILTER) : undefined;
  const users = rows.filter((row) => !filter || filter.test(row)).length;
  let started: Promise<T> | undefined;
  let left = users;
  return {
    get: (ctx: BenchContext) => (started ??= start(ctx)),
    async release() {
      if (--left === 0 && started) {
        await (await started).stop();
        started = undefined;
        left = users;
      }
    },
  };
}

/** The Books result the remote rows' upstream answers with (computed once with graphql-js). */
export async function booksResult(): Promise<string> {
  return JSON.stringify(await graphql({ schema: buildSchema(BOOKS_SDL), source: JSON.parse(REMOTE_REQUEST.body).query, rootValue: { books: BOOKS } }));
}

/** nginx's server block of the remote rows' upstream: every POST /graphql answered with `result`. */
export const graphqlUpstreamBlock = (result: string) => (port: number) => `server {
    listen 127.0.0.1:${port};
    default_type application/json;
    location = /graphql { return 200 '${result}'; }
  }`;

/** nginx's server block of the REST rows' upstream. */
export const restUpstreamBlock = (port: number) => `server {
    listen 127.0.0.1:${port};
    default_type application/json;
    location = /users/1 { return 200 '{"id":"1","name":"Ada Lovelace","email":"ada@example.com","companyId":"c1"}'; }
    location = /companies/c1 { return 200 '{"id":"c1","name":"Analytical Engines Ltd","founded":1842}'; }
    location = /stitch/users/1 { return 200 '{"id":"1","name":"Ada Lovelace","email":"ada@example.com","company":{"id":"c1"}}'; }
    location / { return 404 '{}'; }
  }`;

/** The remote rows' upstream: nginx answering every POST /graphql with the Books result, so the proxies are what is measured. */
const graphqlUpstream = shared(async (ctx) => startNginx(ctx.workDir, 'graphql-upstream', graphqlUpstreamBlock(await booksResult())), [
  'graphql upstream direct',
  'hive gateway proxy mode (1 process)',
  'gatehouse remote executor (1 worker)',
]);
const restUpstream = shared((ctx) => startNginx(ctx.workDir, 'graphql-rest', restUpstreamBlock), [
  'hand-written graphql-js + undici (REST)',
  'gatehouse REST resolvers (1 worker)',
  'gatehouse REST resolvers, limits off (1 worker)',
  'gatehouse stitched schema, users + companies subschemas (1 worker)',
]);

/** The remote executor row's manifests: the Books API forwarded to the upstream on `port`. */
export function remoteManifests(port: number): object[] {
  const api = {
    apiVersion: 'graphql.gatehouse.dev/v1beta1',
    kind: 'GraphQLApi',
    metadata: { name: 'books' },
    spec: { executableSchema: { schemaDefinition: BOOKS_SDL, executor: { remote: { upstreamRef: { name: 'books' } } } } },
  };
  return [upstream('books', port), api, route('books')];
}

/** The REST resolvers row's manifests: Query.user and User.company each resolved by a REST call to `port`. */
export function restManifests(port: number): object[] {
  const rest = (path: string) => ({ restResolver: { upstreamRef: { name: 'rest' }, request: { headers: { ':path': path } } } });
  const api = {
    apiVersion: 'graphql.gatehouse.dev/v1beta1',
    kind: 'GraphQLApi',
    metadata: { name: 'users' },
    spec: {
      executableSchema: {
        schemaDefinition: USERS_SDL.replace('user(id: ID!): User', 'user(id: ID!): User @resolve(name: "Query|user")').replace('company: Company', 'company: Company @resolve(name: "User|company")'),
        executor: { local: { resolutions: { 'Query|user': rest('/users/{$args.id}'), 'User|company': rest('/companies/{$parent.companyId}') } } },
      },
    },
  };
  return [upstream('rest', port), api, route('users')];
}

/** The REST resolvers row's gateway. */
async function restResolvers(ctx: BenchContext, env: Record<string, string> = {}): Promise<RunningTarget> {
  const up = await restUpstream.get(ctx);
  const target = await ctx.gatehouse({ 'graphql.yaml': restManifests(up.port) }, [], 'gateway', env);
  return withRelease(target, restUpstream.release);
}

/**
 * The limits pair (issue 25: the limits cost at most 5%) is a difference smaller than one pass's
 * noise on a shared machine, and a fixed order (on, then off) put one row first every round: the
 * pair is measured in turns (../turns.ts), both gateways up at once. The limits-off gateway is
 * started on the limits-on row's upstream, which is already counted as a user.
 */
async function limitsOffOnSharedUpstream(ctx: BenchContext): Promise<RunningTarget> {
  const up = await restUpstream.get(ctx);
  return ctx.gatehouse({ 'graphql.yaml': restManifests(up.port) }, [], 'gateway', { GATEHOUSE_GRAPHQL_LIMITS: 'off' });
}

function withRelease(target: RunningTarget, release: () => Promise<void>): RunningTarget {
  return { url: target.url, stop: async () => (await target.stop(), await release()) };
}

function route(api: string) {
  return { apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualService', metadata: { name: 'bench-graphql' }, spec: { virtualHost: { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], graphqlApiRef: { name: api } }] } } };
}
function upstream(name: string, port: number) {
  return { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name }, spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } } };
}

/** Installs Hive Gateway into the git-ignored work dir on first use (never into package.json). */
function hiveBinary(): string {
  const prefix = here('.work/hive');
  const bin = join(prefix, 'node_modules', '.bin', 'hive-gateway');
  if (!existsSync(bin)) {
    console.error(`installing @graphql-hive/gateway@${HIVE_VERSION} into ${prefix}`);
    mkdirSync(prefix, { recursive: true });
    writeFileSync(join(prefix, 'package.json'), JSON.stringify({ name: 'hive-bench', private: true, overrides: HIVE_OVERRIDES }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefix', prefix, `@graphql-hive/gateway@${HIVE_VERSION}`], { stdio: 'inherit' });
  }
  return bin;
}

/** Hive Gateway in proxy mode in front of `upstreamUrl`, one serving process. */
export async function startHive(workDir: string, upstreamUrl: string): Promise<Started> {
  const bin = hiveBinary();
  const port = await freePort();
  const dir = join(workDir, 'hive');
  await mkdir(dir, { recursive: true });
  // The upstream (nginx) cannot answer introspection, so Hive gets the schema as a file, as Gatehouse does.
  const schemaFile = join(dir, 'schema.graphql');
  await writeFile(schemaFile, BOOKS_SDL);
  // One serving process (--fork 1, its default), like the single Gatehouse worker it is compared with.
  const child = spawn(process.execPath, [bin, 'proxy', upstreamUrl, '--schema', schemaFile, '--port', String(port), '--host', '127.0.0.1', '--fork', '1'], {
    cwd: dir,
    env: { ...process.env, NODE_ENV: 'production', LOG_LEVEL: 'error' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (c) => (err += c));
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`hive-gateway exited: ${err}`);
    try {
      const response = await fetch(`http://127.0.0.1:${port}/graphql`, { method: REMOTE_REQUEST.method, headers: REMOTE_REQUEST.headers, body: REMOTE_REQUEST.body });
      if (response.ok && ((await response.json()) as { data?: unknown }).data) return { child, port, stop: () => stopChild(child) };
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await stopChild(child);
  throw new Error(`hive-gateway did not answer: ${err}`);
}

export const scenarios: BenchScenario[] = [
  {
    group: 'graphql remote',
    name: 'graphql upstream direct',
    request: REMOTE_REQUEST,
    start: async (ctx) => {
      const up = await graphqlUpstream.get(ctx);
      return withRelease({ url: `http://127.0.0.1:${up.port}`, stop: async () => {} }, graphqlUpstream.release);
    },
  },
  {
    group: 'graphql remote',
    name: 'hive gateway proxy mode (1 process)',
    request: REMOTE_REQUEST,
    start: async (ctx) => {
      const up = await graphqlUpstream.get(ctx);
      const hive = await startHive(ctx.workDir, `http://127.0.0.1:${up.port}/graphql`);
      return withRelease({ url: `http://127.0.0.1:${hive.port}`, stop: hive.stop }, graphqlUpstream.release);
    },
  },
  {
    group: 'graphql remote',
    name: 'gatehouse remote executor (1 worker)',
    request: REMOTE_REQUEST,
    start: async (ctx) => {
      const up = await graphqlUpstream.get(ctx);
      const target = await ctx.gatehouse({ 'graphql.yaml': remoteManifests(up.port) }, [], 'gateway');
      return withRelease(target, graphqlUpstream.release);
    },
  },
  {
    group: 'graphql rest',
    name: 'hand-written graphql-js + undici (REST)',
    request: REST_REQUEST,
    start: async (ctx) => {
      const up = await restUpstream.get(ctx);
      // Same Node flags as Gatehouse (see scenarios/proxy.ts): the ratio compares code paths.
      const server = await startListening(process.execPath, [...NODE_FLAGS, here('graphql-handwritten.ts'), `http://127.0.0.1:${up.port}`], NODE_ENV_DEFAULTS);
      return withRelease({ url: `http://127.0.0.1:${server.port}`, stop: server.stop }, restUpstream.release);
    },
  },
  ...inTurns([
    { group: 'graphql rest', name: 'gatehouse REST resolvers (1 worker)', request: REST_REQUEST, start: (ctx) => restResolvers(ctx) },
    {
      group: 'graphql rest',
      // Issue 25: what the operation limits cost (same API; GATEHOUSE_GRAPHQL_LIMITS=off is for benchmarks only, docs/graphql.md).
      name: 'gatehouse REST resolvers, limits off (1 worker)',
      request: REST_REQUEST,
      start: (ctx) => restResolvers(ctx, { GATEHOUSE_GRAPHQL_LIMITS: 'off' }),
      startInTurns: limitsOffOnSharedUpstream,
      // Still a user of the shared upstream when measured in turns, so that it stops after the round's last row.
      placeholder: async (ctx) => {
        await restUpstream.get(ctx);
        return withRelease({ url: 'measured in turns with the limits-on row', stop: async () => {} }, restUpstream.release);
      },
    },
  ]),
  {
    group: 'graphql rest',
    name: 'gatehouse stitched schema, users + companies subschemas (1 worker)',
    request: REST_REQUEST,
    start: async (ctx) => {
      const up = await restUpstream.get(ctx);
      const rest = (path: string) => ({ restResolver: { upstreamRef: { name: 'rest' }, request: { headers: { ':path': path } } } });
      const api = (name: string, schemaDefinition: string, resolutions: object) => ({
        apiVersion: 'graphql.gatehouse.dev/v1beta1',
        kind: 'GraphQLApi',
        metadata: { name },
        spec: { executableSchema: { schemaDefinition, executor: { local: { resolutions } } } },
      });
      // The same data as the REST resolvers row: the user from one subschema, its company completed from the other by id.
      const users = api('users', 'type Query { user(id: ID!): User @resolve(name: "user") } type User { id: ID! name: String company: Company } type Company { id: ID! }', { user: rest('/stitch/users/{$args.id}') });
      const companies = api('companies', 'type Query { company(id: ID!): Company @resolve(name: "company") } type Company { id: ID! name: String }', { company: rest('/companies/{$args.id}') });
      const stitched = {
        apiVersion: 'graphql.gatehouse.dev/v1beta1',
        kind: 'GraphQLApi',
        metadata: { name: 'stitched' },
        spec: { stitchedSchema: { subschemas: [{ name: 'users' }, { name: 'companies', typeMerge: { Company: { selectionSet: '{ id }', queryName: 'company', args: { id: 'id' } } } }] } },
      };
      const target = await ctx.gatehouse({ 'graphql.yaml': [upstream('rest', up.port), users, companies, stitched, route('stitched')] }, [], 'gateway');
      return withRelease(target, restUpstream.release);
    },
  },
];

export const goals: BenchModule['goals'] = [
  { row: 'gatehouse remote executor (1 worker)', against: 'hive gateway proxy mode (1 process)', minThroughputRatio: 3 },
  { row: 'gatehouse REST resolvers (1 worker)', against: 'hand-written graphql-js + undici (REST)', minThroughputRatio: 0.8 },
  // Issue 25: the limits cost at most 5% (limits on / off); the pair is measured in turns (../turns.ts).
  { row: 'gatehouse REST resolvers (1 worker)', against: 'gatehouse REST resolvers, limits off (1 worker)', minThroughputRatio: 0.95 },
  // Issue 16: a stitched query across two subschemas vs the same data from one local executor.
  { row: 'gatehouse stitched schema, users + companies subschemas (1 worker)', against: 'gatehouse REST resolvers (1 worker)', minThroughputRatio: 0.7 },
];
