import { describe, expect, test } from 'vitest';
import { HOP_BY_HOP, NO_HEADER_OPS, compileHeaderOps } from './header-ops.ts';

describe('compileHeaderOps', () => {
  test('nothing to do compiles to the shared empty ops', () => {
    expect(compileHeaderOps([undefined, {}], 'request')).toBe(NO_HEADER_OPS);
    expect(compileHeaderOps([{ requestHeadersToAdd: [{ header: { key: 'x', value: '1' } }] }], 'response')).toBe(NO_HEADER_OPS);
  });

  test('virtual host first, route last; names lower-cased; append defaults to true (Gloo)', () => {
    const ops = compileHeaderOps(
      [
        { requestHeadersToAdd: [{ header: { key: 'X-Host', value: 'vh' } }], requestHeadersToRemove: ['X-Secret'] },
        { requestHeadersToAdd: [{ header: { key: 'x-route', value: 'r' }, append: false }], requestHeadersToRemove: ['cookie'] },
      ],
      'request',
    );
    expect(ops.add).toEqual([
      { name: 'x-host', value: 'vh', append: true },
      { name: 'x-route', value: 'r', append: false },
    ]);
    expect([...ops.remove].sort()).toEqual(['cookie', 'x-secret']);
  });

  test('response direction reads the response fields only', () => {
    const ops = compileHeaderOps([{ requestHeadersToRemove: ['a'], responseHeadersToRemove: ['Server'], responseHeadersToAdd: [{ header: { key: 'x-r', value: '1' }, append: true }] }], 'response');
    expect([...ops.remove]).toEqual(['server']);
    expect(ops.add).toEqual([{ name: 'x-r', value: '1', append: true }]);
  });
});

test('hop-by-hop headers (RFC 9110 7.6.1) are listed lower-case; proxy-authorization is not among them', () => {
  for (const name of ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade']) expect(HOP_BY_HOP.has(name)).toBe(true);
  expect(HOP_BY_HOP.has('proxy-authorization')).toBe(false);
});
