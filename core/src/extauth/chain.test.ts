import { describe, expect, it } from 'vitest';
import { captureLogger, checkRequest } from '../../../test/extauth/support.ts';
import { parseBoolExpr } from './boolean-expr.ts';
import { AuthChain } from './chain.ts';
import { allow, deny } from './decision.ts';
import type { AuthDecision, AuthStep, CheckRequest } from './step.ts';

/** A step that records what it saw and answers with `decide`. */
function recording(name: string, decide: (req: CheckRequest) => AuthDecision | Promise<AuthDecision>): AuthStep & { seen: CheckRequest[]; closed: boolean } {
  return {
    type: 'test',
    name,
    seen: [],
    closed: false,
    async authorize(req) {
      this.seen.push(req);
      return decide(req);
    },
    async close() {
      this.closed = true;
    },
  };
}

describe('AuthChain', () => {
  const { logger, lines } = captureLogger();

  it('runs steps in order and stops at the first denial, returning it unchanged', async () => {
    const order: string[] = [];
    const a = recording('a', () => (order.push('a'), allow()));
    const b = recording('b', () => (order.push('b'), deny(401, [{ key: 'www-authenticate', value: 'Basic realm="x"' }], 'nope')));
    const c = recording('c', () => (order.push('c'), allow()));
    const chain = new AuthChain('default.cfg', 'v1', [a, b, c], logger);
    expect(await chain.run(checkRequest('default.cfg'))).toEqual({ allowed: false, status: 401, headers: [{ key: 'www-authenticate', value: 'Basic realm="x"' }], body: 'nope' });
    expect(order).toEqual(['a', 'b']);
  });

  it('merges headers of allowing steps into the next step’s request and into the final OK response', async () => {
    const a = recording('a', () => allow([{ key: 'X-User-Id', value: 'r;alice' }, { key: 'x-tag', value: 'one' }], ['x-secret']));
    const b = recording('b', (req) => allow([{ key: 'x-tag', value: 'two', append: true }, { key: 'x-seen-user', value: req.attributes.request.http.headers['x-user-id'] ?? 'none' }]));
    const c = recording('c', () => allow([], ['x-drop']));
    const chain = new AuthChain('default.cfg', 'v1', [a, b, c], logger);
    const decision = await chain.run(checkRequest('default.cfg', { 'x-secret': 's', 'x-drop': 'd', 'x-user-id': 'forged' }));

    expect(b.seen[0]!.attributes.request.http.headers).toMatchObject({ 'x-user-id': 'r;alice', 'x-tag': 'one' });
    expect(b.seen[0]!.attributes.request.http.headers['x-secret']).toBeUndefined();
    expect(c.seen[0]!.attributes.request.http.headers).toMatchObject({ 'x-tag': 'one,two', 'x-seen-user': 'r;alice' });
    expect(decision).toEqual({
      allowed: true,
      headersToSet: [
        { key: 'x-user-id', value: 'r;alice', append: false },
        { key: 'x-tag', value: 'one,two', append: false },
        { key: 'x-seen-user', value: 'r;alice', append: false },
      ],
      headersToRemove: ['x-secret', 'x-drop'],
    });
  });

  it('returns a single step’s decision as is', async () => {
    const only = allow([{ key: 'x-a', value: '1', append: true }]);
    const chain = new AuthChain('default.cfg', 'v1', [recording('a', () => only)], logger);
    expect(await chain.run(checkRequest('default.cfg'))).toBe(only);
  });

  it('resolves a step that sets and removes the same header the way Envoy applies it (removal last)', async () => {
    const chain = new AuthChain('default.cfg', 'v1', [recording('a', () => allow([{ key: 'x-a', value: '1' }, { key: 'x-b', value: '2' }], ['x-a']))], logger);
    expect(await chain.run(checkRequest('default.cfg', { 'x-a': 'client' }))).toEqual({ allowed: true, headersToSet: [{ key: 'x-b', value: '2', append: false }], headersToRemove: ['x-a'] });
  });

  it('denies with 403 and logs when a step throws', async () => {
    const boom = recording('boom', () => {
      throw new Error('kaput');
    });
    const after = recording('after', () => allow());
    const chain = new AuthChain('default.cfg', 'v1', [boom, after], logger);
    expect(await chain.run(checkRequest('default.cfg'))).toEqual({ allowed: false, status: 403, headers: [], body: '' });
    expect(after.seen).toHaveLength(0);
    expect(lines.find((l) => l.code === 'GH_EXTAUTH_STEP_FAILED')).toMatchObject({ config_id: 'default.cfg', step: 'boom', level: 50 });
  });

  it('closes its steps only after the checks in flight have finished', async () => {
    let release!: () => void;
    const slow = recording('slow', () => new Promise<AuthDecision>((resolve) => (release = () => resolve(allow()))));
    const chain = new AuthChain('default.cfg', 'v1', [slow], logger);
    const pending = chain.run(checkRequest('default.cfg'));
    await new Promise((r) => setImmediate(r));
    const closing = chain.close();
    await new Promise((r) => setTimeout(r, 20));
    expect(slow.closed).toBe(false);
    release();
    expect((await pending).allowed).toBe(true);
    await closing;
    expect(slow.closed).toBe(true);
  });
});

describe("allowing steps' response headers", () => {
  const cookie = { key: 'set-cookie', value: '__session=new; Path=/', append: true };
  const step = (name: string, decision: AuthDecision): AuthStep => ({ type: 'test', name, authorize: async () => decision });
  const quietLogger = { info() {}, warn() {}, error() {}, debug() {} } as never;
  const req = { attributes: { request: { http: { method: 'GET', path: '/', host: 'h', scheme: 'http', headers: {} } }, context_extensions: {} } } as CheckRequest;

  it('reach the answer of a chain whichever step set them, with booleanExpr too', async () => {
    const refreshed: AuthDecision = { allowed: true, headersToSet: [], headersToRemove: [], responseHeaders: [cookie] };
    const other: AuthDecision = { allowed: true, headersToSet: [{ key: 'x-user', value: 'a' }], headersToRemove: [] };
    const chain = new AuthChain('ns.c', 'v', [step('oidc', refreshed), step('other', other)], quietLogger);
    expect(await chain.run(req)).toMatchObject({ allowed: true, headersToSet: [{ key: 'x-user', value: 'a' }], responseHeaders: [cookie] });
    const expr = new AuthChain('ns.c', 'v', [step('oidc', refreshed), step('other', other)], quietLogger, parseBoolExpr('oidc && other'));
    expect(await expr.run(req)).toMatchObject({ allowed: true, responseHeaders: [cookie] });
  });
});
