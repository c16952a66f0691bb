import { describe, expect, it } from 'vitest';
import { AuthorizedResponse, DeniedResponse, UnauthenticatedResponse, UnauthorizedResponse } from '../contract/responses.ts';
import { toDecision } from './to-decision.ts';

describe('toDecision', () => {
  it('maps the helpers', () => {
    expect(toDecision(AuthorizedResponse())).toEqual({ allowed: true, headersToSet: [], headersToRemove: [] });
    expect(toDecision(AuthorizedResponse({ 'x-user': 'a' }))).toEqual({ allowed: true, headersToSet: [{ key: 'x-user', value: 'a' }], headersToRemove: [] });
    expect(toDecision(UnauthorizedResponse())).toEqual({ allowed: false, status: 403, headers: [], body: '' });
    expect(toDecision(UnauthenticatedResponse())).toEqual({ allowed: false, status: 401, headers: [], body: '' });
    expect(toDecision(DeniedResponse(302, { location: '/login' }, 'go'))).toEqual({ allowed: false, status: 302, headers: [{ key: 'location', value: '/login' }], body: 'go' });
  });

  it('keeps append and lowercases headers_to_remove', () => {
    const response = { CheckResponse: { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-a', value: '1' }, append: true }], headers_to_remove: ['X-Secret'] } } };
    expect(toDecision(response)).toEqual({ allowed: true, headersToSet: [{ key: 'x-a', value: '1', append: true }], headersToRemove: ['x-secret'] });
  });

  it('a denial without denied_response is a 403 with an empty body (Envoy default)', () => {
    expect(toDecision({ CheckResponse: { status: { code: 7 } } })).toEqual({ allowed: false, status: 403, headers: [], body: '' });
    expect(toDecision({ CheckResponse: { status: { code: 16 }, denied_response: { status: { code: 0 } } } })).toMatchObject({ status: 403 });
  });

  it.each([
    [42, 'response: expected an AuthorizationResponse object, got a number'],
    [null, 'response: expected an AuthorizationResponse object, got null'],
    [[], 'response: expected an AuthorizationResponse object, got an array'],
    [{}, 'response.CheckResponse: expected an object, got nothing'],
    [{ CheckResponse: { status: { code: -1 } } }, 'response.CheckResponse.status.code: expected a gRPC status code (0 allows), got a number'],
    [{ CheckResponse: { status: { code: 0 }, ok_response: { headers: {} } } }, 'response.CheckResponse.ok_response.headers: expected an array of {header: {key, value}, append?}, got an object'],
    [{ CheckResponse: { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'a b', value: '' } }] } } }, 'response.CheckResponse.ok_response.headers[0].header.key: expected a header name, got "a b"'],
    [{ CheckResponse: { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'a', value: 'x\ny' } }] } } }, 'response.CheckResponse.ok_response.headers[0].header.value: contains CR, LF or NUL'],
    [{ CheckResponse: { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'a', value: 1 } }] } } }, 'response.CheckResponse.ok_response.headers[0].header.value: expected a string, got a number'],
    [{ CheckResponse: { status: { code: 0 }, ok_response: { headers_to_remove: [':path'] } } }, 'response.CheckResponse.ok_response.headers_to_remove[0]: expected a header name'],
    [{ CheckResponse: { status: { code: 7 }, denied_response: { status: { code: 700 } } } }, 'response.CheckResponse.denied_response.status.code: expected an HTTP status 200-599, got 700'],
    [{ CheckResponse: { status: { code: 7 }, denied_response: { body: 5 } } }, 'response.CheckResponse.denied_response.body: expected a string, got a number'],
  ])('rejects %j: %s', (response, message) => {
    expect(() => toDecision(response)).toThrow(message);
  });
});
