import { describe, expect, it } from 'vitest';
import { AuthorizedResponse, DeniedResponse, GrpcCode, UnauthenticatedResponse, UnauthorizedResponse } from './responses.ts';

describe('response helpers', () => {
  it('AuthorizedResponse: gRPC OK with headers to set upstream', () => {
    expect(AuthorizedResponse({ 'x-a': '1' })).toEqual({
      CheckResponse: { status: { code: GrpcCode.OK }, ok_response: { headers: [{ header: { key: 'x-a', value: '1' } }], headers_to_remove: [] } },
    });
  });

  it('UnauthorizedResponse is 403 and UnauthenticatedResponse is 401, both with empty bodies', () => {
    expect(UnauthorizedResponse().CheckResponse).toEqual({ status: { code: GrpcCode.PERMISSION_DENIED }, denied_response: { status: { code: 403 }, headers: [], body: '' } });
    expect(UnauthenticatedResponse().CheckResponse).toEqual({ status: { code: GrpcCode.UNAUTHENTICATED }, denied_response: { status: { code: 401 }, headers: [], body: '' } });
  });

  it('DeniedResponse carries status, headers and body', () => {
    expect(DeniedResponse(429, { 'retry-after': '1' }, 'slow down').CheckResponse.denied_response).toEqual({
      status: { code: 429 },
      headers: [{ header: { key: 'retry-after', value: '1' } }],
      body: 'slow down',
    });
  });

  it('each call returns a fresh object (plugins may add headers to it)', () => {
    const a = AuthorizedResponse();
    a.CheckResponse.ok_response!.headers!.push({ header: { key: 'x', value: 'y' } });
    expect(AuthorizedResponse().CheckResponse.ok_response!.headers).toEqual([]);
  });
});
