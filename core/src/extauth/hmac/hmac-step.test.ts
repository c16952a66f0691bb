import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { CheckRequest } from '../step.ts';
import { HmacAuthStep, compileHmacAuth, parseSignatureHeader } from './hmac-step.ts';

const NOW = Date.parse('2026-11-26T12:00:00Z');
const SECRETS: Record<string, Record<string, string>> = {
  'default/alice': { username: 'alice123', password: 'secret-a' },
  'default/bob': { username: 'bob', password: 'secret-b' },
};

function build(): HmacAuthStep {
  const { compiled, problems } = compileHmacAuth({ secretRefs: { secretRefs: [{ name: 'alice' }, { name: 'bob' }] }, parametersInHeaders: {} }, 'default', (ref) => SECRETS[`${ref.namespace}/${ref.name}`]);
  expect(problems).toEqual([]);
  return new HmacAuthStep(compiled!, { name: 'hmac', now: () => NOW });
}

function request(headers: Record<string, string>, method = 'GET', path = '/api/pets?x=1'): CheckRequest {
  return { attributes: { request: { http: { method, path, host: 'h', scheme: 'http', headers } }, context_extensions: {} } };
}

/** What a client computes (draft-cavage-http-signatures 2.3). */
function sign(secret: string, lines: string[], algorithm = 'sha1'): string {
  return createHmac(algorithm, secret).update(lines.join('\n')).digest('base64');
}

function signed(options: { keyId?: string; secret?: string; date?: string; method?: string; path?: string; algorithm?: string; headers?: string } = {}): CheckRequest {
  const date = options.date ?? new Date(NOW).toUTCString();
  const method = options.method ?? 'GET';
  const path = options.path ?? '/api/pets?x=1';
  const algorithm = options.algorithm ?? 'hmac-sha1';
  const signature = sign(options.secret ?? 'secret-a', [`date: ${date}`, `(request-target): ${method.toLowerCase()} ${path}`], algorithm.slice(5));
  return request({ date, authorization: `hmac username="${options.keyId ?? 'alice123'}", algorithm="${algorithm}", headers="${options.headers ?? 'date (request-target)'}", signature="${signature}"` }, method, path);
}

describe('hmacAuth', () => {
  it('allows a correct signature and sets x-user-id to the key id', async () => {
    expect(await build().authorize(signed())).toMatchObject({ allowed: true, headersToSet: [{ key: 'x-user-id', value: 'alice123' }] });
    expect(await build().authorize(signed({ algorithm: 'hmac-sha256' }))).toMatchObject({ allowed: true });
  });

  it('401 for a wrong secret, an unknown key id, another method or path than signed, no header', async () => {
    const step = build();
    expect(await step.authorize(signed({ secret: 'wrong' }))).toMatchObject({ allowed: false, status: 401 });
    expect(await step.authorize(signed({ keyId: 'mallory' }))).toMatchObject({ allowed: false, status: 401 });
    // bob's key id with alice's secret: keys are per id.
    expect(await step.authorize(signed({ keyId: 'bob' }))).toMatchObject({ allowed: false, status: 401 });
    const good = signed();
    const otherPath = request(good.attributes.request.http.headers, 'GET', '/api/pets?x=2');
    expect(await step.authorize(otherPath)).toMatchObject({ allowed: false, status: 401 });
    const otherMethod = request(good.attributes.request.http.headers, 'DELETE', '/api/pets?x=1');
    expect(await step.authorize(otherMethod)).toMatchObject({ allowed: false, status: 401 });
    expect(await step.authorize(request({}))).toMatchObject({ allowed: false, status: 401 });
  });

  it('the date must be signed and within 300 s of the clock (replay window)', async () => {
    const step = build();
    expect(await step.authorize(signed({ date: new Date(NOW - 299_000).toUTCString() }))).toMatchObject({ allowed: true });
    expect(await step.authorize(signed({ date: new Date(NOW - 301_000).toUTCString() }))).toMatchObject({ allowed: false, status: 401 });
    expect(await step.authorize(signed({ date: new Date(NOW + 301_000).toUTCString() }))).toMatchObject({ allowed: false, status: 401 });
    expect(await step.authorize(signed({ date: 'yesterday' }))).toMatchObject({ allowed: false, status: 401 });
    // A signature over the request target only, without the date, could be replayed forever.
    const path = '/api/pets?x=1';
    const noDate = request({ date: new Date(NOW).toUTCString(), authorization: `hmac username="alice123", algorithm="hmac-sha1", headers="(request-target)", signature="${sign('secret-a', [`(request-target): get ${path}`])}"` });
    expect(await step.authorize(noDate)).toMatchObject({ allowed: false, status: 401 });
  });

  it('malformed, duplicated and oversized parameters are a 401, never an exception', async () => {
    const step = build();
    const good = signed().attributes.request.http.headers;
    const variants = [
      good.authorization!.replace('hmac ', 'Basic '),
      good.authorization!.replace('algorithm="hmac-sha1"', 'algorithm="hmac-md5"'),
      good.authorization!.replace('algorithm="hmac-sha1"', 'algorithm="none"'),
      `${good.authorization}, username="bob"`,
      good.authorization!.replace('signature="', 'signature="!!'),
      good.authorization!.replace(/signature="[^"]*"/, 'signature=""'),
      good.authorization!.replace(/headers="[^"]*"/, 'headers="date date"'),
      good.authorization!.replace(/headers="[^"]*"/, 'headers="date x-missing"'),
      'hmac',
      'hmac ',
      `hmac username="alice123", ${'x="y", '.repeat(2000)}signature="AAAA"`,
      good.authorization!.replace(/"/g, ''),
    ];
    for (const authorization of variants) {
      expect(await step.authorize(request({ ...good, authorization })), authorization.slice(0, 80)).toMatchObject({ allowed: false, status: 401 });
    }
  });

  it('accepts the draft-cavage spellings: Signature scheme, keyId, @request-target', () => {
    expect(parseSignatureHeader('Signature keyId="k",algorithm="hmac-sha256",headers="@request-target date",signature="AAAA"')).toMatchObject({ keyId: 'k', headers: ['@request-target', 'date'] });
    expect(parseSignatureHeader('Signature keyId="k",username="k",signature="AAAA"')).toBeUndefined();
  });

  it('a Secret without username/password, and two Secrets with one key id, are configuration errors', () => {
    expect(compileHmacAuth({ secretRefs: { secretRefs: [{ name: 'x' }] } }, 'default', () => ({ password: 'p' })).problems[0]?.message).toMatch(/username/);
    // Proto names (secret_refs) are renamed before the compiler sees the spec (config/proto-names.ts; test/hmac/hmac.test.ts loads them).
    expect(compileHmacAuth({ secretRefs: { secretRefs: [{ name: 'a' }, { name: 'b' }] } }, 'default', () => ({ username: 'same', password: 'p' })).problems[0]).toMatchObject({ path: ['secretRefs', 'secretRefs', 1], message: expect.stringMatching(/two Secrets/) });
  });
});
