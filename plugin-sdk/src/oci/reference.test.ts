import { describe, expect, it } from 'vitest';
import { OciCodes } from './errors.ts';
import { formatReference, parseReference } from './reference.ts';

describe('parseReference', () => {
  it.each([
    ['127.0.0.1:5000/plugins/auth:0.1.0', { registry: '127.0.0.1:5000', apiHost: '127.0.0.1:5000', repository: 'plugins/auth', tag: '0.1.0' }],
    ['localhost/a/b/c:v1', { registry: 'localhost', apiHost: 'localhost', repository: 'a/b/c', tag: 'v1' }],
    ['ghcr.io/acme/my-plugin:1.2.3-rc.1', { registry: 'ghcr.io', apiHost: 'ghcr.io', repository: 'acme/my-plugin', tag: '1.2.3-rc.1' }],
    ['alpine:3', { registry: 'docker.io', apiHost: 'registry-1.docker.io', repository: 'library/alpine', tag: '3' }],
    ['acme/plugin:1', { registry: 'docker.io', apiHost: 'registry-1.docker.io', repository: 'acme/plugin', tag: '1' }],
    ['[::1]:5000/x:1', { registry: '[::1]:5000', apiHost: '[::1]:5000', repository: 'x', tag: '1' }],
  ])('parses %s', (input, expected) => {
    expect(parseReference(input)).toEqual(expected);
  });

  it('parses a digest, with or without a tag', () => {
    const digest = `sha256:${'a'.repeat(64)}`;
    expect(parseReference(`r.io/x@${digest}`)).toEqual({ registry: 'r.io', apiHost: 'r.io', repository: 'x', digest });
    expect(parseReference(`r.io:443/x:1@${digest}`)).toMatchObject({ registry: 'r.io:443', tag: '1', digest });
    expect(formatReference(parseReference(`r.io:443/x:1@${digest}`))).toBe(`r.io:443/x:1@${digest}`);
  });

  it.each([
    ['', 'empty'],
    ['http://r.io/x:1', 'scheme'],
    ['r.io/UPPER:1', 'lowercase'],
    ['r.io/x:-bad', 'tag'],
    ['r.io/x@sha256:abc', 'digest'],
    ['r.io/x//y:1', 'component'],
  ])('refuses %j (%s) with GH_OCI_BAD_REFERENCE', (input, mention) => {
    expect(() => parseReference(input)).toThrow(expect.objectContaining({ code: OciCodes.BAD_REFERENCE, message: expect.stringMatching(new RegExp(mention === 'component' ? 'component' : mention, 'i')) }));
  });
});
