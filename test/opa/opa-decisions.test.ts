/**
 * Every decision of `opaAuth` (Rego compiled to Wasm by the real opa, evaluated with OPA's Wasm
 * runtime) and of `opaServerAuth` (a real `opa run --server`) equals Gloo's rule applied to
 * `opa eval` of the same query on the same input.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { opaInput } from '../../core/src/extauth/opa/opa-input.ts';
import { OpaAuthStep, OpaServerAuthStep, opaDataUrl } from '../../core/src/extauth/opa/opa-step.ts';
import { compileOpaWasm } from '../../core/src/extauth/opa/opa-wasm.ts';
import type { CheckRequest } from '../../core/src/extauth/step.ts';
import { OPA, describeWithOpa, glooDecision, opaEval, startOpaServer, type OpaServer } from './opa.ts';

/**
 * Gloo's OPA guide's policy.rego and check-jwt.rego, and policies with non-boolean and array
 * answers. check-jwt.rego's package-level `[header, payload, signature] := io.jwt.decode(…)` does
 * not parse in OPA 1.x, even with --v0-compatible ("array cannot be used for rule name"): its
 * payload is taken by index here, which OPA 0.x and 1.x both accept.
 */
const MODULES: Record<string, string> = {
  'policy.rego': `package test

default allow = false
allow {
    startswith(input.http_request.path, "/api/pets")
    input.http_request.method == "GET"
}
allow {
    input.http_request.path == "/api/pets/2"
    any({input.http_request.method == "GET",
        input.http_request.method == "DELETE"
    })
}
`,
  'jwt.rego': `package jwtcheck

default allow = false
payload := io.jwt.decode(input.state.jwt)[1]

allow {
    payload["email"] == "admin@example.com"
}
allow {
    payload["email"] == "user@example.com"
    not startswith(input.http_request.path, "/owners")
}
`,
  'other.rego': `package other

import future.keywords.in

yes := "yes"
reason := [true, "matched"] { input.http_request.headers["x-team"] == "blue" }
reason := [false, "no"] { input.http_request.headers["x-team"] != "blue" }
teams := {"blue", "green"}
member { input.http_request.headers["x-team"] in teams }
count_ok { count(input.http_request.headers) > 2 }
`,
};

const QUERIES = [
  'data.test.allow == true',
  'data.test.allow',
  'data.jwtcheck.allow == true',
  'data.other.yes',
  'data.other.yes == "yes"',
  'data.other.reason',
  'data.other.member',
  'not data.other.member',
  'data.other.count_ok; input.http_request.method == "GET"',
  'data.test.missing == true',
];

function jwt(claims: object): string {
  const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}.c2ln`;
}

function request(method: string, path: string, headers: Record<string, string> = {}): CheckRequest {
  return { attributes: { request: { http: { method, path, host: 'petstore', scheme: 'http', headers: { ':authority': 'petstore', ...headers } } }, context_extensions: { config_id: 'gloo-system.opa' } } };
}

const CASES: { request: CheckRequest; state: Record<string, unknown> }[] = [
  { request: request('GET', '/api/pets'), state: {} },
  { request: request('GET', '/api/'), state: {} },
  { request: request('DELETE', '/api/pets/1'), state: {} },
  { request: request('DELETE', '/api/pets/2'), state: {} },
  { request: request('POST', '/api/pets/2', { 'x-team': 'blue' }), state: {} },
  { request: request('GET', '/owners/1', { 'x-team': 'green', a: '1' }), state: { jwt: jwt({ email: 'user@example.com' }) } },
  { request: request('GET', '/vets', { 'x-team': 'red' }), state: { jwt: jwt({ email: 'user@example.com' }) } },
  { request: request('GET', '/owners', {}), state: { jwt: jwt({ email: 'admin@example.com' }) } },
  { request: request('GET', '/x', {}), state: { jwt: 'not-a-jwt' } },
];

describeWithOpa('OPA decisions equal opa eval', 'test/opa/opa-decisions.test.ts', () => {
  let server: OpaServer;
  beforeAll(async () => {
    process.env.GATEHOUSE_OPA_PATH = OPA;
    server = await startOpaServer(MODULES);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  for (const query of QUERIES) {
    it(`opaAuth (Wasm): ${query}`, { timeout: 120_000 }, async () => {
      const step = new OpaAuthStep(await compileOpaWasm(MODULES, query), { name: 'opa', fastInputConversion: false });
      for (const { request: req, state } of CASES) {
        const expected = glooDecision(await opaEval(MODULES, query, opaInput(req, state, false)));
        // A built-in error (io.jwt.decode of a malformed token) fails the step, which the chain
        // turns into a 403: a deny, where OPA makes the expression undefined (also a deny here).
        const actual = await step.authorize(req, { state }).then((d) => d.allowed, () => 'failed' as const);
        if (actual === 'failed') {
          expect(expected, 'the step failed where opa eval allows').toBe(false);
          continue;
        }
        expect(actual, `${req.attributes.request.http.method} ${req.attributes.request.http.path} ${JSON.stringify(state)}`).toBe(expected);
      }
    });
  }

  it('the guide policy allows and denies as the guide says (and not everything the same way)', async () => {
    const step = new OpaAuthStep(await compileOpaWasm(MODULES, 'data.test.allow == true'), { name: 'opa', fastInputConversion: false });
    const decide = async (m: string, p: string) => (await step.authorize(request(m, p), { state: {} })).allowed;
    expect(await decide('GET', '/api/')).toBe(false);
    expect(await decide('DELETE', '/api/pets/1')).toBe(false);
    expect(await decide('DELETE', '/api/pets/2')).toBe(true);
    expect(await decide('GET', '/api/pets')).toBe(true);
  }, 120_000);

  for (const [pkg, rule] of [['test', 'allow'], ['other', 'reason'], ['other', 'yes'], ['other', 'member'], ['jwtcheck', 'allow'], ['test', 'missing']] as const) {
    it(`opaServerAuth (opa run --server): ${pkg}/${rule}`, { timeout: 60_000 }, async () => {
      const step = new OpaServerAuthStep(opaDataUrl(server.address, pkg, rule)!, { name: 'opa-server', fastInputConversion: false });
      try {
        for (const { request: req, state } of CASES) {
          const expected = glooDecision(await opaEval(MODULES, `data.${pkg}.${rule}`, opaInput(req, state, false)));
          expect((await step.authorize(req, { state })).allowed, `${req.attributes.request.http.method} ${req.attributes.request.http.path}`).toBe(expected);
        }
      } finally {
        await step.close();
      }
    });
  }

  it('fastInputConversion drops what Gloo drops, and decisions still equal opa eval on that input', { timeout: 60_000 }, async () => {
    const modules = { 'f.rego': 'package fast\n\nallow { input.state.roles[_] == "admin" }\nhas_nested { input.state.nested.list[0].x == 1 }\n' };
    const state = { roles: ['admin'], nested: { list: [{ x: 1 }] } };
    const input = opaInput(request('GET', '/'), state, true);
    expect(input.state).toEqual({ roles: ['admin'], nested: {} });
    for (const query of ['data.fast.allow', 'data.fast.has_nested']) {
      const step = new OpaAuthStep(await compileOpaWasm(modules, query), { name: 'f', fastInputConversion: true });
      expect((await step.authorize(request('GET', '/'), { state })).allowed).toBe(glooDecision(await opaEval(modules, query, input)));
    }
    const slow = new OpaAuthStep(await compileOpaWasm(modules, 'data.fast.has_nested'), { name: 's', fastInputConversion: false });
    expect((await slow.authorize(request('GET', '/'), { state })).allowed).toBe(true);
  });

  it('a policy that does not compile is an error naming opa\'s message', async () => {
    await expect(compileOpaWasm({ 'bad.rego': 'package bad\nallow { input.x == }\n' }, 'data.bad.allow')).rejects.toThrow(/opa build failed: .*(parse|rego_parse_error)/);
    await expect(compileOpaWasm({}, 'data.x.y', '/nonexistent/opa')).rejects.toThrow(/not installed/);
    // A built-in the Wasm runtime cannot run is refused at load, named, not per request.
    await expect(compileOpaWasm({ 'h.rego': 'package h\nallow { http.send({"method": "get", "url": "http://127.0.0.1:1"}).status_code == 200 }\n' }, 'data.h.allow')).rejects.toThrow(/opa build failed: .*http\.send/);
  }, 60_000);
});
