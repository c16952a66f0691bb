import { describe, expect, it } from 'vitest';
import { parseChallenge } from './www-authenticate.ts';

describe('parseChallenge', () => {
  it('reads a Docker Hub style Bearer challenge', () => {
    expect(parseChallenge('Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/alpine:pull"')).toEqual({
      scheme: 'bearer',
      params: { realm: 'https://auth.docker.io/token', service: 'registry.docker.io', scope: 'repository:library/alpine:pull' },
    });
  });

  it('reads Basic, unquoted values and escapes', () => {
    expect(parseChallenge('Basic realm="a \\"quoted\\" realm", charset=UTF-8')).toEqual({ scheme: 'basic', params: { realm: 'a "quoted" realm', charset: 'UTF-8' } });
  });

  it('prefers Bearer when several challenges are offered, ignores unknown schemes', () => {
    expect(parseChallenge('Negotiate, Basic realm="r", Bearer realm="t"')?.scheme).toBe('bearer');
    expect(parseChallenge('Negotiate')).toBeUndefined();
    expect(parseChallenge(undefined)).toBeUndefined();
  });
});
