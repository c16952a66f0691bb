import type { IncomingMessage } from 'node:http';
import { describe, expect, test } from 'vitest';
import { upgradeDecision } from './http2.ts';

const req = (upgrade?: string | string[]) => ({ headers: upgrade === undefined ? {} : { upgrade } }) as unknown as IncomingMessage;

describe('upgradeDecision (issue 29 findings 12, 18)', () => {
  test('h2c is never tunnelled: alone it is no upgrade at all; in a list it is dropped', () => {
    expect(upgradeDecision(req())).toEqual({ kind: 'none' });
    expect(upgradeDecision(req('h2c'))).toEqual({ kind: 'none' });
    expect(upgradeDecision(req(' H2C ,, '))).toEqual({ kind: 'none' });
    expect(upgradeDecision(req('h2c, websocket'))).toEqual({ kind: 'tunnel', protocol: 'websocket' });
    expect(upgradeDecision(req('WebSocket, h2c'))).toEqual({ kind: 'tunnel', protocol: 'websocket' });
  });

  test('only websocket is tunnelled; anything else, or more than one protocol, is refused', () => {
    expect(upgradeDecision(req('websocket'))).toEqual({ kind: 'tunnel', protocol: 'websocket' });
    expect(upgradeDecision(req('foo'))).toEqual({ kind: 'refused', protocol: 'foo' });
    expect(upgradeDecision(req('websocket, foo'))).toEqual({ kind: 'refused', protocol: 'websocket, foo' });
    expect(upgradeDecision(req(['websocket', 'h2c']))).toEqual({ kind: 'tunnel', protocol: 'websocket' });
    expect(upgradeDecision(req('TLS/1.0'))).toMatchObject({ kind: 'refused' });
  });
});
