/**
 * Helpers for extauth tests. Hashes come from real tools (htpasswd, openssl), never from
 * the code under test; gRPC clients and servers are built from Envoy's protos directly.
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { pino, type Logger } from 'pino';
import { parseManifests } from '../../core/src/config/manifest.ts';
import { ConfigStore, type ConfigSnapshot, type ResourceChecks } from '../../core/src/config/store.ts';
import { stringify } from 'yaml';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';

/** `{salt, hashedPassword}` from `htpasswd -nbm user password` (Apache's APR1). */
export function htpasswdApr1(user: string, password: string): { salt: string; hashedPassword: string; line: string } {
  const line = execFileSync('htpasswd', ['-nbm', user, password], { encoding: 'utf8' }).trim();
  const match = /^[^:]+:\$apr1\$([^$]+)\$(.{22})$/.exec(line);
  if (!match) throw new Error(`unexpected htpasswd output: ${line}`);
  return { salt: match[1]!, hashedPassword: match[2]!, line };
}

/** `openssl passwd -apr1 -salt SALT PASSWORD`: the full `$apr1$salt$hash`. */
export function opensslApr1(password: string, salt: string): string {
  return execFileSync('openssl', ['passwd', '-apr1', '-salt', salt, password], { encoding: 'utf8' }).trim();
}

/** `hex(sha1(password + salt))` from `openssl sha1`. */
export function opensslSha1(password: string, salt: string): string {
  const out = execFileSync('openssl', ['sha1'], { input: password + salt, encoding: 'utf8' }).trim();
  const match = /= ([0-9a-f]{40})$/.exec(out);
  if (!match) throw new Error(`unexpected openssl output: ${out}`);
  return match[1]!;
}

/** `Basic base64(user:password)`. */
export function basic(user: string, password: string, scheme = 'Basic'): string {
  return `${scheme} ${Buffer.from(`${user}:${password}`, 'utf8').toString('base64')}`;
}

/** A pino logger whose JSON lines are kept in `lines`. */
export function captureLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line));
      callback();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

/** Waits until `predicate` holds (polling), or fails after `timeoutMs`. */
export async function eventually<T>(predicate: () => T | undefined | false, timeoutMs = 5_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = predicate();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const authConfig = (name: string, configs: object[], namespace = 'default') => ({
  apiVersion: 'enterprise.gatehouse.dev/v1',
  kind: 'AuthConfig',
  metadata: { name, namespace },
  spec: { configs },
});

/** A ConfigStore fed with manifests, as the config loader feeds it. */
export function snapshotter(checks?: ResourceChecks): (documents: object[]) => ConfigSnapshot {
  const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev', ...(checks ? { checks } : {}) });
  return (documents) => store.load(parseManifests('test.yaml', documents.map((d) => stringify(d)).join('---\n')).documents);
}

/** A CheckRequest (JSON, proto field names) for `config_id`. */
export function checkRequest(configId: string, headers: Record<string, string> = {}, path = '/'): import('../../core/src/extauth/step.ts').CheckRequest {
  return {
    attributes: {
      request: { http: { method: 'GET', path, host: 'example.com', scheme: 'http', headers: { host: 'example.com', ...headers } } },
      context_extensions: { config_id: configId, source_type: 'virtual_host', source_name: 'default/test' },
    },
  };
}

// ---- Envoy's ext_authz API, built here from the .proto files (independent of core/src/extauth/grpc).

function envoyDeps(): string[] {
  const require = createRequire(import.meta.url);
  const root = join(dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');
  return ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => join(root, d));
}

let authorization: grpc.ServiceClientConstructor | undefined;
export function authorizationService(): grpc.ServiceClientConstructor {
  if (!authorization) {
    const definition = loadSync('envoy/service/auth/v3/external_auth.proto', { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: envoyDeps() });
    const pkg = grpc.loadPackageDefinition(definition) as unknown as { envoy: { service: { auth: { v3: { Authorization: grpc.ServiceClientConstructor } } } } };
    authorization = pkg.envoy.service.auth.v3.Authorization;
  }
  return authorization;
}

/** A decoded CheckResponse (defaults filled in, enums as names). */
export interface EnvoyCheckResponse {
  status: { code: number; message: string };
  http_response: 'ok_response' | 'denied_response' | undefined;
  ok_response?: { headers: { header: { key: string; value: string }; append: { value: boolean } | null }[]; headers_to_remove: string[] };
  denied_response?: { status: { code: string }; headers: { header: { key: string; value: string } }[]; body: string };
}

/** An Envoy-style ext_authz client: `check(request)` sends a CheckRequest message (`token`: as Envoy's initial_metadata would). */
export function envoyAuthClient(address: string, options: { token?: string } = {}): { check(request: object, timeoutMs?: number): Promise<EnvoyCheckResponse>; close(): void } {
  const Client = authorizationService();
  const client = new Client(address, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  if (options.token !== undefined) metadata.set('authorization', `Bearer ${options.token}`);
  return {
    check: (request, timeoutMs = 5_000) =>
      new Promise((resolve, reject) =>
        (client as unknown as { Check: Function }).Check(request, metadata, { deadline: Date.now() + timeoutMs }, (error: Error | null, response: EnvoyCheckResponse) => (error ? reject(error) : resolve(response))),
      ),
    close: () => client.close(),
  };
}

/** `grpc.health.v1.Health/Check` status (SERVING, NOT_SERVING, …), from the health proto shipped with grpc-health-check. */
export async function healthStatus(address: string, service = ''): Promise<string> {
  const require = createRequire(import.meta.url);
  const protoDir = join(dirname(require.resolve('grpc-health-check/package.json')), 'proto');
  const definition = loadSync('health/v1/health.proto', { keepCase: true, enums: String, defaults: true, includeDirs: [protoDir] });
  const Health = (grpc.loadPackageDefinition(definition) as unknown as { grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } } }).grpc.health.v1.Health;
  const client = new Health(address, grpc.credentials.createInsecure());
  try {
    return await new Promise((resolve, reject) =>
      (client as unknown as { check: Function }).check({ service }, { deadline: Date.now() + 5_000 }, (error: Error | null, response: { status: string }) => (error ? reject(error) : resolve(response.status))),
    );
  } finally {
    client.close();
  }
}

/** A user's own ext_authz server (for passThroughAuth and failure tests). `handler` returns a CheckResponse message. */
export async function startEnvoyAuthServer(
  handler: (request: { attributes: { request: { http: { headers: Record<string, string>; path: string } }; context_extensions: Record<string, string> } }) => object | Promise<object>,
): Promise<{ address: string; port: number; requests: unknown[]; close(): Promise<void> }> {
  const server = new grpc.Server();
  const requests: unknown[] = [];
  type Request = Parameters<typeof handler>[0];
  server.addService(authorizationService().service, {
    Check: (call: grpc.ServerUnaryCall<Request, object>, callback: grpc.sendUnaryData<object>) => {
      requests.push(call.request);
      Promise.resolve(handler(call.request)).then(
        (response) => callback(null, response),
        (error: Error) => callback({ code: grpc.status.INTERNAL, details: error.message }),
      );
    },
  } as grpc.UntypedServiceImplementation);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  return {
    address: `127.0.0.1:${port}`,
    port,
    requests,
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())).then(() => server.forceShutdown()),
  };
}

/**
 * The routes both end-to-end auth suites use, on one virtual host guarded by AuthConfig
 * `basic`: `/open` (auth disabled), `/override` (AuthConfig `other`), `/chain` (AuthConfig
 * `chain`), and everything else (inherits `basic`), all to the echo upstream.
 */
export function guardedRoutes(echoPort: number): object[] {
  const echo = { routeAction: { single: { upstream: { name: 'echo' } } } };
  return [
    { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'echo' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: echoPort }] } } },
    {
      apiVersion: 'gateway.gatehouse.dev/v1',
      kind: 'VirtualService',
      metadata: { name: 'api' },
      spec: {
        virtualHost: {
          domains: ['*'],
          options: { extauth: { configRef: { name: 'basic' } } },
          routes: [
            { matchers: [{ prefix: '/open' }], options: { extauth: { disable: true } }, ...echo },
            { matchers: [{ prefix: '/override' }], options: { extauth: { configRef: { name: 'other' } } }, ...echo },
            { matchers: [{ prefix: '/chain' }], options: { extauth: { configRef: { name: 'chain' } } }, ...echo },
            { matchers: [{ prefix: '/' }], ...echo },
          ],
        },
      },
    },
  ];
}

/**
 * The AuthConfigs {@link guardedRoutes} refers to: `basic` (APR1 user alice, realm demo),
 * `other` (SHA1 user bob with password "builder", realm other) and `chain` (basic, then the
 * user's own ext_authz server at `passThroughAddress`).
 */
export function guardedAuthConfigs(alice: { salt: string; hashedPassword: string }, passThroughAddress: string): object[] {
  const basicAuth = { basicAuth: { realm: 'demo', apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } } };
  return [
    authConfig('basic', [basicAuth]),
    authConfig('other', [{ basicAuth: { realm: 'other', encryption: { sha1: {} }, userList: { users: { bob: { salt: 'pepper', hashedPassword: opensslSha1('builder', 'pepper') } } } } }]),
    authConfig('chain', [basicAuth, { passThroughAuth: { grpc: { address: passThroughAddress } } }]),
  ];
}

/**
 * The user's own ext_authz server behind the `chain` AuthConfig's passThroughAuth: denies
 * with 418 (`x-why: teapot`, body "no tea") when `x-deny` is sent; otherwise allows, adding
 * `x-team: blue for <x-user-id>` and removing `x-internal`.
 */
export function startTeamAuthServer(): ReturnType<typeof startEnvoyAuthServer> {
  return startEnvoyAuthServer((req) => {
    const headers = req.attributes.request.http.headers;
    if (headers['x-deny']) return { status: { code: 7 }, denied_response: { status: { code: 418 }, headers: [{ header: { key: 'x-why', value: 'teapot' } }], body: 'no tea' } };
    return { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-team', value: `blue for ${headers['x-user-id']}` } }], headers_to_remove: ['x-internal'] } };
  });
}

/** What both end-to-end auth suites run against; see {@link startGuardedSetup}. */
export interface GuardedSetup {
  /** The echo upstream behind every guarded route. */
  readonly echo: TestServer;
  /** The team's ext_authz server behind passThroughAuth ({@link startTeamAuthServer}). */
  readonly userServer: Awaited<ReturnType<typeof startEnvoyAuthServer>>;
  /** The guarded routes and AuthConfigs, with `alice` as the Basic Auth user. */
  readonly dir: ConfigDir;
  close(): Promise<void>;
}

/** Starts the echo upstream and the team's ext_authz server, and writes the guarded config for them. */
export async function startGuardedSetup(alice: { salt: string; hashedPassword: string }): Promise<GuardedSetup> {
  const echo = await startEcho('echo');
  const userServer = await startTeamAuthServer();
  const dir = await makeConfigDir({ 'auth.yaml': guardedAuthConfigs(alice, userServer.address), 'routes.yaml': guardedRoutes(echo.port) });
  return {
    echo,
    userServer,
    dir,
    async close() {
      await echo.close();
      await userServer.close();
      await dir.cleanup();
    },
  };
}
