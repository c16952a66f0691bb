import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { authConfig, captureLogger } from '../../../../test/extauth/support.ts';
import { buildStep } from '../build-step.ts';
import { CheckClient } from '../grpc/check-client.ts';
import { startExtAuthServer, type ExtAuthServer } from '../server.ts';
import type { CheckRequest } from '../step.ts';
import { JWT_FILTER_METADATA } from './jwt-step.ts';

function check(configId: string, filterMetadata?: Record<string, Record<string, unknown>>): CheckRequest {
  return {
    attributes: {
      request: { http: { method: 'GET', path: '/', host: 'h', scheme: 'http', headers: {} } },
      context_extensions: { config_id: configId },
      ...(filterMetadata ? { metadata_context: { filter_metadata: filterMetadata } } : {}),
    },
  };
}

const claims = { 'vhost-provider': { sub: 'alice', team: 'ops', n: 1, admin: true, groups: ['a', 'b'], nested: { x: null } } };

describe('AuthConfig jwt: {} step (Gloo\'s placeholder for the JWT filter)', () => {
  it('allows when the JWT filter left verified claims, 401 otherwise', async () => {
    const { logger } = captureLogger();
    const step = await buildStep({ jwt: {} }, 0, { logger, pluginDir: '/nonexistent' });
    expect(step.name).toBe('jwt[0]');
    expect(await step.authorize(check('x', { [JWT_FILTER_METADATA]: claims }))).toMatchObject({ allowed: true });
    expect(await step.authorize(check('x'))).toEqual({ allowed: false, status: 401, headers: [], body: '' });
    expect(await step.authorize(check('x', { [JWT_FILTER_METADATA]: {} }))).toMatchObject({ allowed: false });
    expect(await step.authorize(check('x', { 'other.filter': claims }))).toMatchObject({ allowed: false });
  });

  describe('over gRPC (gateway → gatehouse extauth): the claims ride in metadata_context as Structs', () => {
    let dir: string;
    let server: ExtAuthServer;
    let client: CheckClient;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'jwt-step-'));
      await writeFile(join(dir, 'auth.yaml'), stringify(authConfig('jwt-or-deny', [{ jwt: {} }])));
      server = await startExtAuthServer({ configDir: dir, port: 0, host: '127.0.0.1', logger: captureLogger().logger });
      client = new CheckClient(`127.0.0.1:${server.port}`);
    });
    afterAll(async () => {
      client?.close();
      await server?.close();
      await rm(dir, { recursive: true, force: true });
    });

    it('allows with the claims and denies without', async () => {
      expect(await client.check(check('default.jwt-or-deny', { [JWT_FILTER_METADATA]: claims }), 5000)).toMatchObject({ allowed: true });
      expect(await client.check(check('default.jwt-or-deny'), 5000)).toMatchObject({ allowed: false, status: 401 });
    });
  });
});
