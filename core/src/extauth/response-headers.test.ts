import { describe, expect, it } from 'vitest';
import { captureLogger, checkRequest } from '../../../test/extauth/support.ts';
import { parseBoolExpr } from './boolean-expr.ts';
import { AuthChain } from './chain.ts';
import { allow, deny } from './decision.ts';
import { checkResponseToMessage, decisionFromMessage } from './grpc/check-messages.ts';
import { sanitizeDecision, type SanitizeReport } from './sanitize-decision.ts';
import type { AuthDecision, AuthStep, HeaderToSet } from './step.ts';

// Client response headers of an allowing decision (Envoy `OkHttpResponse.response_headers_to_add`,
// SPEC 5.3): validated, merged along a chain, carried over gRPC both ways.

const step = (name: string, decision: AuthDecision): AuthStep => ({ type: 'test', name, authorize: async () => decision });
const withResponse = (response: HeaderToSet[], set: HeaderToSet[] = []): AuthDecision => ({ ...allow(set), responseHeaders: response });

describe('client response headers', () => {
  const { logger, lines } = captureLogger();

  it('sanitising drops malformed, hop-by-hop and gateway-owned names, CR/LF values, and more than 64; the allow stands', () => {
    const report: SanitizeReport = { dropped: [] };
    const decision = sanitizeDecision(
      withResponse([
        { key: 'x-ratelimit-remaining', value: '9' },
        { key: 'bad name', value: 'x' },
        { key: 'x-split', value: 'a\r\nset-cookie: evil=1' },
        { key: 'transfer-encoding', value: 'chunked' },
        { key: 'Connection', value: 'close' },
        { key: 'content-length', value: '0' },
        { key: 'set-cookie', value: 'session=new; HttpOnly' },
      ]),
      report,
    );
    expect(decision).toEqual({ allowed: true, headersToSet: [], headersToRemove: [], responseHeaders: [{ key: 'x-ratelimit-remaining', value: '9' }, { key: 'set-cookie', value: 'session=new; HttpOnly' }] });
    expect(report.dropped).toEqual(['bad name', 'x-split', 'transfer-encoding', 'Connection', 'content-length']);
    const many = sanitizeDecision(withResponse(Array.from({ length: 70 }, (_, i) => ({ key: `x-h${i}`, value: 'v' }))));
    expect(many.allowed && many.responseHeaders).toHaveLength(64);
    const none = sanitizeDecision(withResponse([{ key: ':status', value: '500' }]));
    expect(none).toEqual({ allowed: true, headersToSet: [], headersToRemove: [] });
  });

  it('a chain keeps every allowing step\'s response headers (a later step replaces a same-named one unless it appends) and drops them on a denial', async () => {
    const a = step('a', withResponse([{ key: 'x-a', value: '1' }, { key: 'x-both', value: 'a' }, { key: 'set-cookie', value: 'a=1' }], [{ key: 'x-up', value: 'a' }]));
    const b = step('b', withResponse([{ key: 'x-both', value: 'b' }, { key: 'set-cookie', value: 'b=1', append: true }]));
    const chain = new AuthChain('default.cfg', 'v1', [a, b], logger);
    expect(await chain.run(checkRequest('default.cfg'))).toEqual({
      allowed: true,
      headersToSet: [{ key: 'x-up', value: 'a' }],
      headersToRemove: [],
      responseHeaders: [{ key: 'x-a', value: '1' }, { key: 'set-cookie', value: 'a=1' }, { key: 'x-both', value: 'b' }, { key: 'set-cookie', value: 'b=1', append: true }],
    });
    const one = new AuthChain('default.cfg', 'v1', [step('only', withResponse([{ key: 'x-only', value: '1' }]))], logger);
    expect(await one.run(checkRequest('default.cfg'))).toMatchObject({ allowed: true, responseHeaders: [{ key: 'x-only', value: '1' }] });
    const denied = new AuthChain('default.cfg', 'v1', [a, step('no', deny(429, [{ key: 'retry-after', value: '5' }]))], logger);
    expect(await denied.run(checkRequest('default.cfg'))).toEqual({ allowed: false, status: 429, headers: [{ key: 'retry-after', value: '5' }], body: '' });
    const expr = new AuthChain('default.cfg', 'v1', [step('x', withResponse([{ key: 'x-expr', value: '1' }])), step('y', deny(403))], logger, parseBoolExpr('x || y'));
    expect(await expr.run(checkRequest('default.cfg'))).toEqual({ allowed: true, headersToSet: [], headersToRemove: [], responseHeaders: [{ key: 'x-expr', value: '1' }] });
    expect(lines.filter((l) => l.level === 50)).toEqual([]);
  });

  it('crosses gRPC as OkHttpResponse.response_headers_to_add, both ways', () => {
    const message = checkResponseToMessage(withResponse([{ key: 'x-ratelimit-limit', value: '10' }], [{ key: 'x-user', value: 'u' }]));
    expect(message.ok_response?.response_headers_to_add).toEqual([{ header: { key: 'x-ratelimit-limit', value: '10' }, append: { value: false } }]);
    expect(decisionFromMessage(message)).toEqual({ allowed: true, headersToSet: [{ key: 'x-user', value: 'u', append: false }], headersToRemove: [], responseHeaders: [{ key: 'x-ratelimit-limit', value: '10', append: false }] });
    expect(checkResponseToMessage(allow()).ok_response).not.toHaveProperty('response_headers_to_add');
    expect(decisionFromMessage({ status: { code: 0 }, ok_response: {} })).toEqual({ allowed: true, headersToSet: [], headersToRemove: [] });
  });
});
