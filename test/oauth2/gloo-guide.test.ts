/**
 * Gloo's OAuth guides through a real `gatehouse run`, manifests as printed
 * (test/proxy/fixtures/gloo-guides/security/oidc-*.yaml, access-token-introspection.yaml):
 * "Authenticate with Dex" with oidc-provider standing in for Dex at the guide's issuer URL (its
 * login form filled in by the test), the petclinic app behind it; "Authenticate with an Access
 * Token" with oidc-provider's introspection endpoint at the guide's Hydra admin URL. Hosts are
 * the guide's, reached through `--resolve` on their own loopback addresses and the guide's ports.
 * The Keycloak-shaped manifest loads with warnings naming the fields Gatehouse does not honour.
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { startGatehouse } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { Browser } from './browser.ts';
import { startProvider, USER, type TestProvider } from './provider.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../proxy/fixtures/gloo-guides/security/', import.meta.url));
const DEX = { host: 'dex.gloo-system.svc.cluster.local', addr: '127.77.1.8', port: 32000 };
const PETCLINIC = { host: 'petclinic.default.svc.cluster.local', addr: '127.77.1.9', port: 80 };
const HYDRA = { host: 'hydra-example-admin.default', addr: '127.77.1.10', port: 4445 };
const HTTPBIN = { host: 'httpbin.httpbin.svc.cluster.local', addr: '127.77.1.11', port: 8000 };

function validate(dir: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...NODE_FLAGS, CLI, 'validate', dir], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 30_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

async function serve(at: { addr: string; port: number }, name: string): Promise<Server> {
  const server = createServer((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ app: name, url: req.url, headers: req.headers })));
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(at.port, at.addr, resolve));
  return server;
}

describe("Gloo's OAuth guides through gatehouse run", () => {
  let work: string;
  const servers: Server[] = [];
  const providers: TestProvider[] = [];
  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'oauth-guide-'));
    servers.push(await serve(PETCLINIC, 'petclinic'), await serve(HTTPBIN, 'httpbin'));
  });
  afterAll(async () => {
    for (const p of providers) await p.close();
    for (const s of servers) await new Promise((r) => (s.closeAllConnections(), s.close(r)));
    if (work) await rm(work, { recursive: true, force: true });
  });

  async function guideDir(file: string): Promise<string> {
    const dir = await mkdtemp(join(work, 'cfg-'));
    await copyFile(join(FIXTURES, file), join(dir, file));
    const verdict = await validate(dir);
    expect(verdict.code, verdict.out).toBe(0);
    expect(verdict.out).not.toContain('Rejected');
    return dir;
  }

  it('oidc-dex.yaml: loads unchanged; the browser is sent to Dex, logs in as admin@example.com, and reaches petclinic', { timeout: 60_000 }, async () => {
    const dex = await startProvider({ host: DEX.addr, port: DEX.port, issuer: `http://${DEX.host}:${DEX.port}`, redirectUris: ['http://localhost:8080/callback'], postLogoutUris: [] });
    providers.push(dex);
    const dir = await guideDir('oidc-dex.yaml');
    const gw = await startGatehouse('run', ['--config-dir', dir, '--access-log', 'false', '--extauth-timeout', '5s', '--resolve', `${DEX.host}=${DEX.addr}`, '--resolve', `${PETCLINIC.host}=${PETCLINIC.addr}`]);
    try {
      const browser = new Browser({ 'localhost:8080': gw.url, [`${DEX.host}:${DEX.port}`]: `http://${DEX.addr}:${DEX.port}` });
      const toLogin = await browser.follow('http://localhost:8080/');
      expect(toLogin[0]!.reply.status).toBe(302);
      expect(toLogin[0]!.reply.headers.location).toMatch(new RegExp(`^http://${DEX.host}:${DEX.port}/auth\\?`));
      const signIn = toLogin[toLogin.length - 1]!;
      const consent = await browser.submit(signIn, { username: USER.name, password: USER.password });
      const back = await browser.submit(consent[consent.length - 1]!, {});
      const home = back[back.length - 1]!;
      expect(home.url).toBe('http://localhost:8080/');
      expect(home.reply.status).toBe(200);
      expect(JSON.parse(home.reply.body).app).toBe('petclinic');
      // The guide's cookieOptions.notSecure: the session cookie works over plain http.
      expect(back.find((s) => s.url.startsWith('http://localhost:8080/callback'))!.reply.headers['set-cookie']!.join('\n')).not.toMatch(/Secure/);
    } finally {
      await gw.stop();
    }
  });

  it('access-token-introspection.yaml: loads unchanged; no token and a made-up token get 403, a token from the provider gets 200', { timeout: 60_000 }, async () => {
    const hydra = await startProvider({ host: HYDRA.addr, port: HYDRA.port, issuer: 'http://public.hydra.localhost', client: { id: 'my-client', secret: 'secret' }, routes: { introspection: '/admin/oauth2/introspect' }, redirectUris: ['http://localhost/callback'], postLogoutUris: [] });
    providers.push(hydra);
    const dir = await guideDir('access-token-introspection.yaml');
    const gw = await startGatehouse('run', ['--config-dir', dir, '--access-log', 'false', '--extauth-timeout', '5s', '--resolve', `${HYDRA.host}=${HYDRA.addr}`, '--resolve', `${HTTPBIN.host}=${HTTPBIN.addr}`]);
    try {
      expect((await send(gw.url, { path: '/headers' })).status).toBe(403);
      expect((await send(gw.url, { path: '/headers', headers: { authorization: 'Bearer qwertyuio23456789' } })).status).toBe(403);
      const token = await hydra.clientCredentialsToken();
      const ok = await send(gw.url, { path: '/headers', headers: { authorization: `Bearer ${token}` } });
      expect(ok.status).toBe(200);
      expect(JSON.parse(ok.body)).toMatchObject({ app: 'httpbin', url: '/headers' });
    } finally {
      await gw.stop();
    }
  });

  it('oidc-keycloak.yaml: loads (snake_case and camelCase spellings) with warnings naming every field not honoured', { timeout: 60_000 }, async () => {
    const dir = await guideDir('oidc-keycloak.yaml');
    const out = (await validate(dir)).out;
    expect(out).toMatch(/Warning\s+AuthConfig gloo-system\/oidc-keycloak/);
    // Proto names are renamed to JSON names before validation (config/proto-names.ts): the paths name the JSON names.
    expect(out).toContain('spec.configs[0].oauth2.oidcAuthorizationCode.frontChannelLogout: frontChannelLogout is not applied: ');
    expect(out).toContain('spec.configs[0].oauth2.oidcAuthorizationCode.dynamicMetadataFromClaims: dynamicMetadataFromClaims is not applied: ');
  });
});
