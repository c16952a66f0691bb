import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import { describe, expect, test } from 'vitest';
import { compileJsonFormat, compileStringFormat, ENVOY_DEFAULT_FORMAT, FormatError, type FormatNotes } from './access-format.ts';
import type { AccessEntry } from './access-log.ts';

const entry = (extra: Partial<AccessEntry> = {}): AccessEntry => ({ reqId: 'r1', method: 'GET', path: '/p?q=1', protocol: 'HTTP/1.1', status: 200, durationMs: 12.6, virtualHost: 'default/vs', route: 'main', upstream: 'http://10.0.0.7:8080', ...extra });
const END = Date.UTC(2026, 10, 29, 1, 2, 3, 456);

/**
 * A real request/response pair (headers as Node keeps them), answered with `headers` written as
 * a raw list, as the proxy writes them. The addresses are read while the socket is open, as the
 * access log does when an entry is written.
 */
async function exchange(reqHeaders: Record<string, string>, resHeaders: string[]): Promise<{ req: IncomingMessage; res: ServerResponse }> {
  let pair!: { req: IncomingMessage; res: ServerResponse };
  const server = createServer((req, res) => {
    pair = { req, res };
    void req.socket.remoteAddress;
    res.writeHead(201, resHeaders);
    res.end('hello');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  await new Promise<void>((resolve, reject) => {
    const r = request({ port: (server.address() as AddressInfo).port, path: '/x?y=2', headers: reqHeaders }, (res) => res.resume().on('end', resolve));
    r.on('error', reject);
    r.end();
  });
  server.close();
  return pair;
}

describe('compileStringFormat', () => {
  test('status, duration, protocol, upstream host, route, literal text and %%', () => {
    const f = compileStringFormat('%RESPONSE_CODE% %DURATION%ms %PROTOCOL% %UPSTREAM_HOST% %ROUTE_NAME% %VIRTUAL_HOST_NAME% 100%%');
    expect(f({ entry: entry(), endMs: END })).toBe('200 13ms HTTP/1.1 10.0.0.7:8080 main default/vs 100%');
  });

  test('START_TIME is the request start (end minus duration), ISO by default, strftime with fractions when given', () => {
    expect(compileStringFormat('%START_TIME%')({ entry: entry({ durationMs: 1000 }), endMs: END })).toBe('2026-11-29T01:02:02.456Z');
    expect(compileStringFormat('%START_TIME(%Y/%m/%d %H:%M:%S.%3f %z|%s|%6f)%')({ entry: entry({ durationMs: 0 }), endMs: END })).toBe(`2026/11/29 01:02:03.456 +0000|${Math.floor(END / 1000)}|456000`);
  });

  test('request and response headers as sent, pseudo-headers, fallbacks, truncation, and "-" for missing values', async () => {
    const { req, res } = await exchange({ 'user-agent': 'curl/8.5.0', 'x-forwarded-for': '1.2.3.4' }, ['x-upstream', 'a', 'Set-Cookie', 'a=1', 'set-cookie', 'b=2']);
    const f = compileStringFormat('%REQ(:METHOD)% %REQ(:PATH)% %REQ_WITHOUT_QUERY(:PATH)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %REQ(:AUTHORITY)% %REQ(USER-AGENT):4% %REQ(X-NONE)% %RESP(X-UPSTREAM)% %RESP(SET-COOKIE)% %RESP(X-NONE?X-UPSTREAM)% %BYTES_SENT% %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%');
    expect(f({ entry: entry({ req, res }), endMs: END })).toMatch(/^GET \/x\?y=2 \/x \/x\?y=2 localhost:\d+ curl - a a=1,b=2 a - 127\.0\.0\.1$/);
  });

  test('BYTES_SENT from content-length when the response has one; BYTES_RECEIVED 0 for a request without a body (Envoy), unknown when chunked', async () => {
    const { req, res } = await exchange({}, ['content-length', '5']);
    expect(compileStringFormat('%BYTES_SENT% %BYTES_RECEIVED%')({ entry: entry({ req, res }), endMs: END })).toBe('5 0');
    const chunked = await exchange({ 'transfer-encoding': 'chunked' }, []);
    expect(compileStringFormat('%BYTES_RECEIVED%')({ entry: entry(chunked), endMs: END })).toBe('-');
  });

  test('UPSTREAM_CLUSTER is the Upstream cluster that served, else the origin', () => {
    const f = compileStringFormat('%UPSTREAM_CLUSTER%');
    expect(f({ entry: entry({ cluster: 'gloo-system/default-petstore-8080', upstream: 'http://10.0.0.1:8080' }), endMs: END })).toBe('gloo-system/default-petstore-8080');
    expect(f({ entry: entry({ upstream: 'http://10.0.0.1:8080' }), endMs: END })).toBe('http://10.0.0.1:8080');
  });

  test("Envoy's default format compiles", () => {
    const notes: FormatNotes = { unsupported: [] };
    expect(compileStringFormat(ENVOY_DEFAULT_FORMAT, notes)({ entry: entry(), endMs: END })).toMatch(/^\[2026-11-29T01:02:03\.443Z\] "GET \/p\?q=1 HTTP\/1\.1" 200 - - - 13 - "-" "-" "-" "-" "10\.0\.0\.7:8080"\n$/);
    expect(notes.unsupported).toEqual([]);
  });

  test('operators Envoy has and Gatehouse has no value for print "-" and are noted', () => {
    const notes: FormatNotes = { unsupported: [] };
    const f = compileStringFormat('%REQUEST_DURATION% %DYNAMIC_METADATA(ns:key)% %UPSTREAM_TRANSPORT_FAILURE_REASON% %REQUEST_DURATION%', notes);
    expect(f({ entry: entry(), endMs: END })).toBe('- - - -');
    expect(notes.unsupported).toEqual(['REQUEST_DURATION', 'DYNAMIC_METADATA', 'UPSTREAM_TRANSPORT_FAILURE_REASON']);
  });

  test.each([
    ['%NOT_AN_OPERATOR%', 0, /unknown command operator %NOT_AN_OPERATOR%/],
    ['ok %DURATION% 50% off', 16, /does not start a command operator/],
    ['%REQ%', 0, /needs a header name/],
    ['%REQ()%', 0, /needs a header name/],
    ['%REQ(X', 0, /does not start/],
    ['%DURATION(x)%', 0, /takes no argument/],
    ['%lower%', 0, /does not start/],
    ['%START_TIME(%Q)%', 0, /does not support the time field "%Q"/],
    ['trailing %', 9, /does not start/],
  ])('rejects %j at offset %i', (format, offset, message) => {
    let caught: unknown;
    try {
      compileStringFormat(format);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(FormatError);
    expect((caught as FormatError).message).toMatch(message);
    expect((caught as FormatError).offset).toBe(offset);
  });

  test('long formats: many operators compile; an argument past its bound or never closed is refused', () => {
    const many = compileStringFormat('%REQ(:METHOD)% ('.repeat(20_000));
    expect(many({ entry: entry(), endMs: END })).toBe('GET ('.repeat(20_000));
    expect(() => compileStringFormat(`%REQ(${'x'.repeat(600)})%`)).toThrow(FormatError);
    expect(() => compileStringFormat(`${'%REQ(a '.repeat(20_000)}`)).toThrow(FormatError);
  });
});

describe('compileJsonFormat', () => {
  test('lone operators keep their type, mixed strings are text, nested objects nest, missing values are null', () => {
    const f = compileJsonFormat({ status: '%RESPONSE_CODE%', duration: '%DURATION%', line: '%REQ(:METHOD)% %REQ(:PATH)%', nested: { upstream: '%UPSTREAM_HOST%', agent: '%REQ(USER-AGENT)%' }, fixed: 7, flag: true, list: [1, 'x'] });
    const line = f({ entry: entry(), endMs: END });
    expect(line.endsWith('\n')).toBe(true);
    expect(JSON.parse(line)).toEqual({ status: 200, duration: 13, line: 'GET /p?q=1', nested: { upstream: '10.0.0.7:8080', agent: null }, fixed: 7, flag: true, list: [1, 'x'] });
  });

  test('a bad operator inside says which key', () => {
    let caught: (FormatError & { path?: unknown[] }) | undefined;
    try {
      compileJsonFormat({ ok: '%DURATION%', nested: { bad: '%NOPE%' } });
    } catch (error) {
      caught = error as FormatError & { path?: unknown[] };
    }
    expect(caught).toBeInstanceOf(FormatError);
    expect(caught!.path).toEqual(['nested', 'bad']);
  });
});

describe('compiled lines', () => {
  test('response headers as sent: names compared ignoring case and whole, repeated ones joined', async () => {
    const { req, res } = await exchange({}, ['X-Up-Long', 'no', 'x-up', 'a', 'X-UP', 'b', 'X-U', 'no']);
    expect(compileStringFormat('%RESP(X-UP)% %RESP(X-U)% %RESP(X-NONE)% %RESP(CONTENT-LENGTH)% %BYTES_SENT%')({ entry: entry({ req, res }), endMs: END })).toBe('a,b no - - -');
  });

  test('BYTES_SENT when Node wrote the content-length from the body given to end, or from setHeader', async () => {
    for (const [answer, expected] of [
      [(res: ServerResponse) => res.end('hello!'), '6'],
      [(res: ServerResponse) => res.setHeader('content-length', 3).end('abc'), '3'],
      [(res: ServerResponse) => res.writeHead(200, ['Content-Length', '2']).end('ab'), '2'],
    ] as const) {
      let pair!: { req: IncomingMessage; res: ServerResponse };
      const server = createServer((q, s) => {
        pair = { req: q, res: s };
        answer(s);
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      await new Promise<void>((resolve, reject) => request({ port: (server.address() as AddressInfo).port }, (r) => r.resume().on('end', resolve)).on('error', reject).end());
      server.close();
      expect(compileStringFormat('%BYTES_SENT%')({ entry: entry(pair), endMs: END })).toBe(expected);
    }
  });

  test('text that is not ASCII is written as UTF-8; numbers as String writes them; constants and truncation fold at load', () => {
    process.env.GH_FORMAT_TEST = 'constant-value';
    const f = compileStringFormat('%ROUTE_NAME% %VIRTUAL_HOST_NAME%:3 %DURATION% %RESPONSE_CODE% %ENVIRONMENT(GH_FORMAT_TEST):8% %ENVIRONMENT(GH_FORMAT_NONE)% %HOSTNAME% %UPSTREAM_HOST%');
    delete process.env.GH_FORMAT_TEST;
    const line = f({ entry: entry({ route: 'ruta-ñ-路由', virtualHost: 'v', status: -1, durationMs: 2.5, upstream: 'http://[::1]:80' }), endMs: END });
    expect(line).toBe(`ruta-ñ-路由 v:3 3 -1 constant - ${hostname()} [::1]:80`);
    // The same format, another upstream: the host follows the entry.
    expect(f({ entry: entry({ upstream: 'https://10.1.1.1:8443' }), endMs: END }).endsWith(' 10.1.1.1:8443')).toBe(true);
    expect(compileStringFormat('%RESPONSE_CODE%')({ entry: entry({ status: 1.5 }), endMs: END })).toBe('1.5');
  });

  test('START_TIME pads milliseconds and changes second across lines of one format', () => {
    const f = compileStringFormat('%START_TIME%');
    expect(f({ entry: entry({ durationMs: 0 }), endMs: Date.UTC(2026, 0, 1, 0, 0, 0, 5) })).toBe('2026-01-01T00:00:00.005Z');
    expect(f({ entry: entry({ durationMs: 0.5 }), endMs: Date.UTC(2026, 0, 1, 0, 0, 1, 40) })).toBe('2026-01-01T00:00:01.039Z');
    expect(f({ entry: entry({ durationMs: 0 }), endMs: Date.UTC(2026, 0, 1, 0, 0, 0, 999) })).toBe('2026-01-01T00:00:00.999Z');
  });
});
