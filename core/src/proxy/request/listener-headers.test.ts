import { describe, expect, it } from 'vitest';
import { listenerHeadersOf, responseListOf, settleServer, withVia } from './listener-headers.ts';

describe('listener headers (httpConnectionManagerSettings serverName, serverHeaderTransformation, via)', () => {
  it('reads serverName with its transformation (names or proto numbers), and via; nothing set: none', () => {
    expect(listenerHeadersOf({ serverName: 'edge' })).toEqual({ server: { name: 'edge', mode: 'overwrite' } });
    expect(listenerHeadersOf({ serverName: 'edge', serverHeaderTransformation: 'APPEND_IF_ABSENT' })).toEqual({ server: { name: 'edge', mode: 'append-if-absent' } });
    expect(listenerHeadersOf({ serverName: 'edge', serverHeaderTransformation: 1 })).toEqual({ server: { name: 'edge', mode: 'append-if-absent' } });
    // PASS_THROUGH: the upstream's server goes out unchanged, the gateway adds none (Envoy).
    expect(listenerHeadersOf({ serverName: 'edge', serverHeaderTransformation: 'PASS_THROUGH', via: '1.1 edge' })).toEqual({ via: '1.1 edge' });
    expect(listenerHeadersOf({ serverName: 'edge', serverHeaderTransformation: 2 })).toBeUndefined();
    expect(listenerHeadersOf({ requestTimeout: '1s' })).toBeUndefined();
    expect(listenerHeadersOf(undefined)).toBeUndefined();
    expect(responseListOf({ server: { name: 'edge', mode: 'overwrite' }, via: '1.1 edge' })).toEqual(['server', 'edge', 'via', '1.1 edge']);
  });

  it('keeps exactly one server header: the listener\'s over the upstream\'s (overwrite), or the upstream\'s where it sent one (append-if-absent)', () => {
    const forwarded = () => ['server', 'nginx', 'content-type', 'text/plain', 'server', 'edge'];
    const overwritten = forwarded();
    settleServer(overwritten, 'overwrite');
    expect(overwritten).toEqual(['content-type', 'text/plain', 'server', 'edge']);
    const kept = forwarded();
    settleServer(kept, 'append-if-absent');
    expect(kept).toEqual(['server', 'nginx', 'content-type', 'text/plain']);
    const alone = ['content-type', 'text/plain', 'server', 'edge'];
    settleServer(alone, 'append-if-absent');
    expect(alone).toEqual(['content-type', 'text/plain', 'server', 'edge']);
  });

  it("appends the listener's via to the request's (a list, each hop its own)", () => {
    expect(withVia(undefined, '1.1 edge')).toBe('1.1 edge');
    expect(withVia('', '1.1 edge')).toBe('1.1 edge');
    expect(withVia('1.0 fred', '1.1 edge')).toBe('1.0 fred, 1.1 edge');
    expect(withVia(['1.0 fred', '1.1 p.example.net'], '1.1 edge')).toBe('1.0 fred, 1.1 p.example.net, 1.1 edge');
  });
});
