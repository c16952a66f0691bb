/**
 * OIDC sessions in a real Redis (`session.redis`): the cookie holds a random id only, the tokens
 * live in Redis, two `gatehouse run` processes share the session, logout deletes it everywhere;
 * and providers that hang or answer garbage: requests are denied (fail closed) with a
 * GH_OAUTH2_PROVIDER log line, within the deadline, and the gateway keeps serving.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeWithRedis, startRedis, type RedisServer } from '../ratelimit/redis.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { Browser } from './browser.ts';
import { appFiles, login, oidcAuthConfig } from './app.ts';
import { startProvider, type TestProvider } from './provider.ts';

const APP = 'http://app.test';

describeWithRedis('OIDC sessions in Redis', 'test/oauth2/oidc-sessions.test.ts', (binary) => {
  let redis: RedisServer;
  let provider: TestProvider;
  let echo: TestServer;
  let dir: ConfigDir;
  const gateways: GatehouseProcess[] = [];
  beforeAll(async () => {
    redis = await startRedis(binary);
    provider = await startProvider({ redirectUris: [`${APP}/callback`], postLogoutUris: [`${APP}/`] });
    echo = await startEcho('app');
    const auth = oidcAuthConfig(provider.issuer, { session: { failOnFetchFailure: true, cookieOptions: { notSecure: true }, redis: { cookieName: 'session', options: { host: `127.0.0.1:${redis.port}` } } } });
    dir = await makeConfigDir(appFiles(echo.port, auth));
    for (let i = 0; i < 2; i++) gateways.push(await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false', '--extauth-timeout', '5s']));
  });
  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await dir?.cleanup();
    await echo?.close();
    await provider?.close();
    await redis?.stop();
  });

  it('keeps only a random id in the cookie, shares the session between two processes, and logout deletes it', { timeout: 60_000 }, async () => {
    const [a, b] = gateways as [GatehouseProcess, GatehouseProcess];
    const browser = new Browser({ 'app.test': a.url });
    const { steps } = await login(browser, `${APP}/orders`);
    const page = steps[steps.length - 1]!;
    expect(page.reply.status).toBe(200);
    const sid = browser.cookies('app.test').get('session')!;
    expect(sid).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const idToken = (JSON.parse(page.reply.body) as Echo).headers['x-id-token'];
    // The other process knows the session from Redis.
    const other = await send(b.url, { path: '/orders', headers: { host: 'app.test', cookie: `session=${sid}` } });
    expect(other.status).toBe(200);
    expect((JSON.parse(other.body) as Echo).headers['x-id-token']).toBe(idToken);
    // An unknown id is no session: a new login.
    expect((await send(b.url, { path: '/orders', headers: { host: 'app.test', cookie: `session=${'x'.repeat(43)}` } })).status).toBe(302);
    // Logout on one process; the other stops accepting the id once its short cache lapses (≤ 5 s).
    const out = await browser.request(`${APP}/logout`);
    expect(out.status).toBe(302);
    const deadline = Date.now() + 15_000;
    let status = 200;
    while (Date.now() < deadline && status === 200) {
      status = (await send(b.url, { path: '/orders', headers: { host: 'app.test', cookie: `session=${sid}` } })).status;
      if (status === 200) await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe(302);
  });

  it('with failOnFetchFailure, a Redis outage denies (503) instead of starting logins; the gateway keeps serving', { timeout: 60_000 }, async () => {
    const [a] = gateways as [GatehouseProcess];
    const browser = new Browser({ 'app.test': a.url });
    await login(browser, `${APP}/x`);
    const sid = browser.cookies('app.test').get('session')!;
    await redis.stop();
    // The decision cache may answer for up to 5 s; then the store is asked and is down.
    const deadline = Date.now() + 15_000;
    let r = await send(a.url, { path: '/y', headers: { host: 'app.test', cookie: `session=${sid}` } });
    while (r.status === 200 && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 200));
      r = await send(a.url, { path: '/y', headers: { host: 'app.test', cookie: `session=${sid}` } });
    }
    expect(r.status).toBe(503);
    await a.waitForLog((l) => l.code === 'GH_OAUTH2_SESSION_STORE');
  });
});

describe('a provider that hangs or answers garbage', () => {
  let hang: Server;
  let garbage: Server;
  let echo: TestServer;
  const dirs: ConfigDir[] = [];
  beforeAll(async () => {
    // Accepts and never answers.
    hang = createServer(() => {});
    // Answers discovery with HTML, a JWKS with nonsense, everything else with a huge body.
    garbage = createServer((req, res) => {
      if (req.url?.startsWith('/.well-known')) return res.writeHead(200, { 'content-type': 'application/json' }).end('<html>not json');
      res.writeHead(200).end(Buffer.alloc(2 * 1024 * 1024, 'x'));
    });
    await Promise.all([hang, garbage].map((s) => new Promise<void>((r) => s.listen(0, '127.0.0.1', r))));
    echo = await startEcho('app');
  });
  afterAll(async () => {
    for (const s of [hang, garbage]) await new Promise((r) => (s.closeAllConnections(), s.close(r)));
    await echo?.close();
    for (const d of dirs) await d.cleanup();
  });

  for (const which of ['hang', 'garbage'] as const) {
    it(`${which}: every request is denied with 503 and a GH_OAUTH2_PROVIDER log line; nothing stalls past the deadline`, { timeout: 60_000 }, async () => {
      const server = which === 'hang' ? hang : garbage;
      const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const dir = await makeConfigDir(appFiles(echo.port, oidcAuthConfig(issuer)));
      dirs.push(dir);
      const gw = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false', '--extauth-timeout', '10s']);
      try {
        const answers = await Promise.all(Array.from({ length: 8 }, () => send(gw.url, { path: '/x', headers: { host: 'app.test' }, timeoutMs: 15_000 })));
        for (const r of answers) expect(r.status).toBe(503);
        await gw.waitForLog((l) => l.code === 'GH_OAUTH2_PROVIDER');
        // A callback with a well-formed state and no cookie never reaches the provider.
        expect((await send(gw.url, { path: `/callback?code=x&state=${'A'.repeat(32)}`, headers: { host: 'app.test' } })).status).toBe(403);
        // Still serving: the next request gets its answer too.
        expect((await send(gw.url, { path: '/y', headers: { host: 'app.test' }, timeoutMs: 15_000 })).status).toBe(503);
      } finally {
        await gw.stop();
      }
    });
  }
});
