/**
 * opaAuth as a chain step: it reads the State the previous allowing step left (`input.state`,
 * where Gloo's OIDC step puts `jwt`), and its decision combines under booleanExpr like any step.
 */
import { expect, it } from 'vitest';
import { parseBoolExpr } from '../../core/src/extauth/boolean-expr.ts';
import { AuthChain } from '../../core/src/extauth/chain.ts';
import { allow } from '../../core/src/extauth/decision.ts';
import { OpaAuthStep } from '../../core/src/extauth/opa/opa-step.ts';
import { compileOpaWasm } from '../../core/src/extauth/opa/opa-wasm.ts';
import type { AuthStep, CheckRequest } from '../../core/src/extauth/step.ts';
import { createLogger } from '../../core/src/log/logger.ts';
import { OPA, describeWithOpa } from './opa.ts';

const POLICY = `package test

default allow = false
payload := io.jwt.decode(input.state.jwt)[1]
allow { payload.email == "admin@example.com" }
`;

/** A step that authenticates by header and leaves the token in State, as an OIDC step does. */
const tokenStep = (name: string): AuthStep => ({
  type: 'test',
  name,
  async authorize(request) {
    const token = request.attributes.request.http.headers['x-token'];
    return token ? { ...allow([{ key: 'x-user-id', value: 'someone' }]), state: { jwt: token } } : { allowed: false, status: 401, headers: [], body: '' };
  },
});

const jwt = (claims: object) => `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;
const request = (headers: Record<string, string>): CheckRequest => ({ attributes: { request: { http: { method: 'GET', path: '/', host: 'h', scheme: 'http', headers } }, context_extensions: { config_id: 'x' } } });

describeWithOpa('opaAuth in a chain', 'test/opa/opa-chain.test.ts', () => {
  it('reads input.state.jwt from the previous step; 403 when the policy says no; the earlier headers stay', { timeout: 60_000 }, async () => {
    process.env.GATEHOUSE_OPA_PATH = OPA;
    const opa = new OpaAuthStep(await compileOpaWasm({ 'p.rego': POLICY }, 'data.test.allow == true'), { name: 'opa', fastInputConversion: false });
    const chain = new AuthChain('x', '1', [tokenStep('oidc'), opa], createLogger('test', { level: 'silent' }));
    const admin = await chain.run(request({ 'x-token': jwt({ email: 'admin@example.com' }) }));
    expect(admin).toMatchObject({ allowed: true, headersToSet: [{ key: 'x-user-id', value: 'someone' }] });
    expect(await chain.run(request({ 'x-token': jwt({ email: 'user@example.com' }) }))).toMatchObject({ allowed: false, status: 403 });
    expect(await chain.run(request({}))).toMatchObject({ allowed: false, status: 401 });
    // booleanExpr: "oidc && opa" is the default chain; "!opa" inverts the policy's answer.
    const inverted = new AuthChain('x', '1', [tokenStep('oidc'), opa], createLogger('test', { level: 'silent' }), parseBoolExpr('oidc && !opa'));
    expect((await inverted.run(request({ 'x-token': jwt({ email: 'user@example.com' }) }))).allowed).toBe(true);
    expect((await inverted.run(request({ 'x-token': jwt({ email: 'admin@example.com' }) }))).allowed).toBe(false);
  });
});
