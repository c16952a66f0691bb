/**
 * hmacAuth through a real `gatehouse run`: the corpus manifest
 * (test/proxy/fixtures/gloo-guides/security/hmac.yaml) as written, and hmacAuth chained with
 * basicAuth under a booleanExpr, with x-user-id reaching the upstream.
 */
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { makeConfigDir, manifests } from '../support/config-dir.ts';
import { startGatehouse } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../proxy/fixtures/gloo-guides/security/', import.meta.url));
const PETSTORE_ADDR = '127.77.1.7';

/** A draft-cavage HMAC signature over `date` and the request target, as a client computes it. */
function authorization(keyId: string, secret: string, method: string, path: string, date: string): string {
  const signature = createHmac('sha1', secret).update(`date: ${date}\n(request-target): ${method.toLowerCase()} ${path}`).digest('base64');
  return `hmac username="${keyId}", algorithm="hmac-sha1", headers="date (request-target)", signature="${signature}"`;
}

function validate(dir: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...NODE_FLAGS, CLI, 'validate', dir], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 30_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

describe('hmacAuth through gatehouse run', () => {
  let petstore: Server;
  let work: string;
  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'hmac-'));
    petstore = createServer((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ url: req.url, user: req.headers['x-user-id'] ?? null })));
    await new Promise<void>((resolve, reject) => petstore.once('error', reject).listen(8080, PETSTORE_ADDR, resolve));
  });
  afterAll(async () => {
    await new Promise((r) => (petstore ? (petstore.closeAllConnections(), petstore.close(r)) : r(undefined)));
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('hmac.yaml loads unchanged; a signed request passes with x-user-id, a forged, stale or replayed-elsewhere one gets 401', { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(join(work, 'cfg-'));
    await copyFile(join(FIXTURES, 'hmac.yaml'), join(dir, 'hmac.yaml'));
    const verdict = await validate(dir);
    expect(verdict.code, verdict.out).toBe(0);
    const gw = await startGatehouse('run', ['--config-dir', dir, '--access-log', 'false', '--resolve', `petstore.default.svc.cluster.local=${PETSTORE_ADDR}`]);
    try {
      const date = new Date().toUTCString();
      const get = (path: string, headers: Record<string, string>, method = 'GET') => send(gw.url, { path, method, headers });
      const ok = await get('/api/pets?x=1', { date, authorization: authorization('alice123', 'secret-a', 'GET', '/api/pets?x=1', date) });
      expect(ok.status).toBe(200);
      expect(JSON.parse(ok.body)).toEqual({ url: '/api/pets?x=1', user: 'alice123' });
      expect((await get('/api/pets', {})).status).toBe(401);
      expect((await get('/api/pets?x=1', { date, authorization: authorization('alice123', 'wrong', 'GET', '/api/pets?x=1', date) })).status).toBe(401);
      // The same signature on another path or method is not valid there.
      expect((await get('/api/pets?x=2', { date, authorization: authorization('alice123', 'secret-a', 'GET', '/api/pets?x=1', date) })).status).toBe(401);
      expect((await get('/api/pets?x=1', { date, authorization: authorization('alice123', 'secret-a', 'GET', '/api/pets?x=1', date) }, 'DELETE')).status).toBe(401);
      const stale = new Date(Date.now() - 600_000).toUTCString();
      expect((await get('/api/pets?x=1', { date: stale, authorization: authorization('alice123', 'secret-a', 'GET', '/api/pets?x=1', stale) })).status).toBe(401);
      // A client-sent x-user-id never survives: the step overwrites it.
      const spoof = await get('/api/pets?x=1', { date, 'x-user-id': 'admin', authorization: authorization('alice123', 'secret-a', 'GET', '/api/pets?x=1', date) });
      expect(JSON.parse(spoof.body).user).toBe('alice123');
    } finally {
      await gw.stop();
    }
  });

  it('chains like the other steps: booleanExpr "hmac || basic" allows either, the allowing step sets x-user-id', { timeout: 60_000 }, async () => {
    const echo: TestServer = await startEcho('echo');
    // htpasswd -nbm user password: $apr1$TYiryv0/$8BvzLUO9IfGPGGsPnAgSu1
    const config = await makeConfigDir({
      'secret.yaml': { apiVersion: 'v1', kind: 'Secret', type: 'extauth.solo.io/accountcredentials', metadata: { name: 'alice' }, stringData: { username: 'alice123', password: 'secret-a' } },
      'auth.yaml': {
        apiVersion: 'enterprise.gatehouse.dev/v1',
        kind: 'AuthConfig',
        metadata: { name: 'either' },
        spec: {
          configs: [
            { name: 'hmac', hmacAuth: { secret_refs: { secret_refs: [{ name: 'alice' }] }, parameters_in_headers: {} } },
            { name: 'basic', basicAuth: { apr: { users: { user: { salt: 'TYiryv0/', hashedPassword: '8BvzLUO9IfGPGGsPnAgSu1' } } } } },
          ],
          booleanExpr: 'hmac || basic',
        },
      },
      'up.yaml': manifests.upstream('echo', [{ addr: '127.0.0.1', port: echo.port }]),
      'vs.yaml': manifests.virtualService('vs', { domains: ['*'], options: { extauth: { configRef: { name: 'either' } } }, routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'echo' } } } }] }),
    });
    const gw = await startGatehouse('run', ['--config-dir', config.path, '--access-log', 'false']);
    try {
      const date = new Date().toUTCString();
      const viaHmac = await send(gw.url, { path: '/a', headers: { date, authorization: authorization('alice123', 'secret-a', 'GET', '/a', date) } });
      expect(viaHmac.status).toBe(200);
      expect(JSON.parse(viaHmac.body).headers['x-user-id']).toBe('alice123');
      const viaBasic = await send(gw.url, { path: '/a', headers: { authorization: `Basic ${Buffer.from('user:password').toString('base64')}` } });
      expect(viaBasic.status).toBe(200);
      expect(JSON.parse(viaBasic.body).headers['x-user-id']).toBe(';user');
      expect((await send(gw.url, { path: '/a' })).status).toBe(401);
    } finally {
      await gw.stop();
      await config.cleanup();
      await echo.close();
    }
  });
});
