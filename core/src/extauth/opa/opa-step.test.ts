import { createServer, type RequestListener, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { CheckRequest } from '../step.ts';
import { OpaServerAuthStep, opaDataUrl } from './opa-step.ts';

const request: CheckRequest = { attributes: { request: { http: { method: 'GET', path: '/a', host: 'h', scheme: 'http', headers: {} } }, context_extensions: {} } };
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => (s.closeAllConnections(), s.close(r)))));
});

async function serve(handler: RequestListener): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `127.0.0.1:${(server.address() as { port: number }).port}`;
}

describe('opaServerAuth against hostile or broken servers', () => {
  it('posts {input} to /v1/data/<package path>/<rule> and allows only on result true', async () => {
    const seen: { url?: string; body?: string }[] = [];
    const address = await serve((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c)).on('end', () => {
        seen.push({ url: req.url!, body });
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ result: req.url!.endsWith('/yes') ? true : 'true' }));
      });
    });
    const yes = new OpaServerAuthStep(opaDataUrl(address, 'authz.http', 'yes')!, { name: 'o', fastInputConversion: false });
    const no = new OpaServerAuthStep(opaDataUrl(address, 'authz.http', 'no')!, { name: 'o', fastInputConversion: false });
    expect((await yes.authorize(request, { state: { jwt: 'x' } })).allowed).toBe(true);
    expect((await no.authorize(request)).allowed).toBe(false);
    expect(seen[0]!.url).toBe('/v1/data/authz/http/yes');
    expect(JSON.parse(seen[0]!.body!).input).toMatchObject({ http_request: { method: 'GET', path: '/a' }, state: { jwt: 'x' }, check_request: request });
    await yes.close();
    await no.close();
  });

  it('a server that never answers, answers 500, junk or a huge body: the step fails (the chain denies), within the deadline', async () => {
    const hang = await serve(() => {});
    const fail = await serve((_q, res) => res.writeHead(500).end('{"result": true}'));
    const junk = await serve((_q, res) => res.writeHead(200).end('{"result": tru'));
    const huge = await serve((_q, res) => res.writeHead(200).end(`{"result": true, "x": "${'a'.repeat(2 * 1024 * 1024)}"}`));
    for (const address of [hang, fail, junk, huge]) {
      const step = new OpaServerAuthStep(opaDataUrl(address, 'p', 'r')!, { name: 'o', fastInputConversion: false, timeoutMs: 300 });
      const started = Date.now();
      await expect(step.authorize(request)).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(10_000);
      await step.close();
    }
  });

  it('package and rule names cannot leave the data API path', () => {
    expect(opaDataUrl('opa:8181', 'test/../../v1/policies', undefined)).toBeUndefined();
    expect(opaDataUrl('opa:8181', 'test', '../x')).toBeUndefined();
    expect(opaDataUrl('opa:8181', 'a.b', 'c/d')).toBe('http://opa:8181/v1/data/a/b/c/d');
    expect(opaDataUrl(undefined, 'a', undefined)).toBe('http://localhost:8181/v1/data/a');
    expect(opaDataUrl('http://u:p@opa:8181', 'a', undefined)).toBeUndefined();
  });
});
