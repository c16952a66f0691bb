/**
 * Gloo's LDAP guide through a real `gatehouse run`: the guide's AuthConfigs and VirtualService
 * as printed (test/proxy/fixtures/gloo-guides/security/ldap-*.yaml), its directory in a real
 * slapd, and its http-echo service, reached by the names the guide uses through `--resolve`
 * (slapd on the guide's port 389 and http-echo on 5678, each on its own loopback address).
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { startGatehouse } from '../support/gatehouse.ts';
import { send } from '../support/http.ts';
import { describeWithSlapd, startSlapd, type Slapd } from './slapd.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../proxy/fixtures/gloo-guides/security/', import.meta.url));
const LDAP_ADDR = '127.77.1.6';
const ECHO_ADDR = '127.77.1.5';
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

function validate(dir: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...NODE_FLAGS, CLI, 'validate', dir], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 30_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

describeWithSlapd("Gloo's LDAP guide through gatehouse run", 'test/ldap/gloo-guide.test.ts', () => {
  let slapd: Slapd;
  let echo: Server;
  let work: string;
  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'ldap-guide-'));
    slapd = await startSlapd({ host: LDAP_ADDR, port: 389 });
    // hashicorp/http-echo with -text='Hello World!', as the guide deploys it.
    echo = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end("'Hello World!'\n"));
    await new Promise<void>((resolve, reject) => echo.once('error', reject).listen(5678, ECHO_ADDR, resolve));
  });
  afterAll(async () => {
    await new Promise((r) => (echo ? (echo.closeAllConnections(), echo.close(r)) : r(undefined)));
    await slapd?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  for (const file of ['ldap-user-binding.yaml', 'ldap-service-account.yaml']) {
    it(`${file}: loads unchanged and answers as the guide's step 4 says`, { timeout: 60_000 }, async () => {
      const dir = await mkdtemp(join(work, 'cfg-'));
      await copyFile(join(FIXTURES, file), join(dir, file));
      const verdict = await validate(dir);
      expect(verdict.code, verdict.out).toBe(0);
      const gw = await startGatehouse('run', ['--config-dir', dir, '--access-log', 'false', '--resolve', `ldap.default.svc.cluster.local=${LDAP_ADDR}`, '--resolve', `http-echo.default.svc.cluster.local=${ECHO_ADDR}`]);
      try {
        const get = (authorization?: string) => send(gw.url, { path: '/echo', headers: authorization ? { authorization } : {} });
        const none = await get();
        expect(none.status).toBe(401);
        expect(none.headers['content-length']).toBe('0');
        // The guide's table: john/doe is unknown (401), marco is a developer (403), rick a manager.
        expect((await get('Basic am9objpkb2U=')).status).toBe(401);
        expect((await get('Basic bWFyY286bWFyY29wd2Q=')).status).toBe(403);
        const rick = await get('Basic cmljazpyaWNrcHdk');
        expect(rick.status).toBe(200);
        expect(rick.body).toBe("'Hello World!'\n");
        expect((await get(basic('rick', 'wrong'))).status).toBe(401);
        expect((await get(basic('rick,ou=people,dc=solo,dc=io', 'rickpwd'))).status).toBe(401);
      } finally {
        await gw.stop();
      }
    });
  }
});
