/**
 * Gloo's OPA guide through a real `gatehouse run`: the guide's ConfigMap, AuthConfig and
 * VirtualService as printed (test/proxy/fixtures/gloo-guides/security/opa.yaml), compiled by the
 * real opa, with a petstore at the guide's kube service name (`--resolve`); then the same policy
 * behind opaServerAuth, served by a real `opa run --server`, chained after basicAuth.
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { makeConfigDir } from '../support/config-dir.ts';
import { startGatehouse } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { OPA, describeWithOpa, startOpaServer } from './opa.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../proxy/fixtures/gloo-guides/security/', import.meta.url));
const PETSTORE_ADDR = '127.77.1.8';
const env = { GATEHOUSE_OPA_PATH: OPA };

function validate(dir: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...NODE_FLAGS, CLI, 'validate', dir], { env: { ...process.env, ...env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 30_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

describeWithOpa("Gloo's OPA guide through gatehouse run", 'test/opa/gloo-guide.test.ts', () => {
  let petstore: Server;
  let work: string;
  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'opa-guide-'));
    // The guide's petstore: GET /api/pets lists two pets, DELETE answers 204.
    petstore = createServer((req, res) => {
      if (req.method === 'DELETE') return res.writeHead(204).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end('[{"id":1,"name":"Dog","status":"available"},{"id":2,"name":"Cat","status":"pending"}]\n');
    });
    await new Promise<void>((resolve, reject) => petstore.once('error', reject).listen(8080, PETSTORE_ADDR, resolve));
  });
  afterAll(async () => {
    await new Promise((r) => (petstore ? (petstore.closeAllConnections(), petstore.close(r)) : r(undefined)));
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('opa.yaml loads unchanged and answers as "Testing the configuration" says', { timeout: 90_000 }, async () => {
    const dir = await mkdtemp(join(work, 'cfg-'));
    await copyFile(join(FIXTURES, 'opa.yaml'), join(dir, 'opa.yaml'));
    const verdict = await validate(dir);
    expect(verdict.code, verdict.out).toBe(0);
    const gw = await startGatehouse('run', ['--config-dir', dir, '--access-log', 'false', '--resolve', `petstore.default.svc.cluster.local=${PETSTORE_ADDR}`], { env });
    try {
      const call = (method: string, path: string) => send(gw.url, { method, path });
      // The policy is compiled when the AuthConfig loads: until then its requests are denied.
      const pets = await eventually(async () => {
        const r = await call('GET', '/api/pets');
        return r.status === 200 && r;
      }, 60_000);
      expect(pets.status).toBe(200);
      expect(JSON.parse(pets.body)).toHaveLength(2);
      expect((await call('GET', '/api/')).status).toBe(403);
      expect((await call('DELETE', '/api/pets/1')).status).toBe(403);
      expect((await call('DELETE', '/api/pets/2')).status).toBe(204);
      expect((await call('POST', '/api/pets')).status).toBe(403);
    } finally {
      await gw.stop();
    }
  });

  it('a changed policy ConfigMap rebuilds the step; a policy that does not compile fails closed (403) and names the error', { timeout: 90_000 }, async () => {
    const guide = await (await import('node:fs/promises')).readFile(join(FIXTURES, 'opa.yaml'), 'utf8');
    const config = await makeConfigDir({ 'opa.yaml': guide });
    const gw = await startGatehouse('run', ['--config-dir', config.path, '--access-log', 'false', '--resolve', `petstore.default.svc.cluster.local=${PETSTORE_ADDR}`], { env });
    try {
      const pets = () => send(gw.url, { path: '/api/pets' }).then((r) => r.status);
      await eventually(async () => (await pets()) === 200, 60_000);
      // The guide's policy, now allowing only DELETE /api/pets/2: GET /api/pets turns 403.
      await config.write('opa.yaml', guide.replace('input.http_request.method == "GET"\n    }', 'input.http_request.method == "NONE"\n    }'));
      await eventually(async () => (await pets()) === 403, 60_000);
      expect((await send(gw.url, { method: 'DELETE', path: '/api/pets/2' })).status).toBe(204);
      // Rego that does not compile: denied (fail closed), with opa's message in the log.
      await config.write('opa.yaml', guide.replace('default allow = false', 'default allow = '));
      await gw.waitForLog((l) => typeof l.msg === 'string' && /auth config gloo-system\.opa cannot be loaded: .*opa build failed/.test(l.msg), 60_000);
      expect((await send(gw.url, { method: 'DELETE', path: '/api/pets/2' })).status).toBe(403);
    } finally {
      await gw.stop();
      await config.cleanup();
    }
  });

  it('opaServerAuth against opa run --server, after basicAuth: both must allow', { timeout: 90_000 }, async () => {
    const policy = (await import('node:fs/promises')).readFile(join(FIXTURES, 'opa.yaml'), 'utf8');
    const rego = /policy\.rego: \|\n([\s\S]*?)\n---/.exec(await policy)![1]!.replace(/^ {4}/gm, '');
    const server = await startOpaServer({ 'policy.rego': rego });
    const config = await makeConfigDir({
      'all.yaml': [
        {
          apiVersion: 'enterprise.gloo.solo.io/v1',
          kind: 'AuthConfig',
          metadata: { name: 'opa-server', namespace: 'gloo-system' },
          spec: {
            configs: [
              // htpasswd -nbm user password
              { basicAuth: { apr: { users: { user: { salt: 'TYiryv0/', hashedPassword: '8BvzLUO9IfGPGGsPnAgSu1' } } } } },
              { opaServerAuth: { serverAddr: `http://opa.default.svc:${server.address.split(':')[1]}`, package: 'test', ruleName: 'allow' } },
            ],
          },
        },
        {
          apiVersion: 'gateway.solo.io/v1',
          kind: 'VirtualService',
          metadata: { name: 'petstore', namespace: 'gloo-system' },
          spec: { virtualHost: { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { kube: { ref: { name: 'petstore', namespace: 'default' }, port: 8080 } } } }], options: { extauth: { configRef: { name: 'opa-server', namespace: 'gloo-system' } } } } },
        },
      ],
    });
    const gw = await startGatehouse('run', ['--config-dir', config.path, '--access-log', 'false', '--resolve', `petstore.default.svc.cluster.local=${PETSTORE_ADDR}`, '--resolve', 'opa.default.svc=127.0.0.1'], { env });
    try {
      const user = { authorization: `Basic ${Buffer.from('user:password').toString('base64')}` };
      expect((await send(gw.url, { path: '/api/pets', headers: user })).status).toBe(200);
      expect((await send(gw.url, { path: '/api/pets' })).status).toBe(401);
      expect((await send(gw.url, { method: 'DELETE', path: '/api/pets/1', headers: user })).status).toBe(403);
      expect((await send(gw.url, { method: 'DELETE', path: '/api/pets/2', headers: user })).status).toBe(204);
      // The OPA server gone: fail closed.
      await server.stop();
      expect((await send(gw.url, { path: '/api/pets', headers: user })).status).toBe(403);
    } finally {
      await gw.stop();
      await server.stop();
      await config.cleanup();
    }
  });
});
