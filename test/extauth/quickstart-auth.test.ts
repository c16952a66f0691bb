/** The quickstart's Basic-Auth manifests: their hashes match the documented passwords. */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigLoader } from '../../core/src/config/loader.ts';
import type { Resource } from '../../core/src/config/resource.ts';
import { extAuthChecks } from '../../core/src/extauth/checks.ts';
import { AuthEngine } from '../../core/src/extauth/engine.ts';
import { basic, captureLogger, checkRequest, opensslSha1 } from './support.ts';

const CONFIG = fileURLToPath(new URL('../../examples/quickstart/config', import.meta.url));

describe('quickstart Basic Auth', () => {
  it('holds hashes the real tools accept for alice/wonderland (APR1) and bob/builder (SHA1), and the engine serves them', async () => {
    const { logger } = captureLogger();
    const loader = new ConfigLoader({ dir: CONFIG, apiGroupDomain: 'gatehouse.dev', checks: extAuthChecks, logger, watch: false });
    const snapshot = await loader.start();
    const apr = snapshot.resources.get('AuthConfig/default/basic-auth') as Resource<'AuthConfig'>;
    const sha = snapshot.resources.get('AuthConfig/default/basic-auth-sha1') as Resource<'AuthConfig'>;
    const aliceEntry = apr.spec.configs[0]!.basicAuth!.apr!.users.alice!;
    const bobEntry = sha.spec.configs[0]!.basicAuth!.userList!.users.bob!;

    // htpasswd itself verifies the APR1 entry.
    const dir = await mkdtemp(join(tmpdir(), 'htpasswd-'));
    try {
      await writeFile(join(dir, 'users'), `alice:$apr1$${aliceEntry.salt}$${aliceEntry.hashedPassword}\n`);
      expect(() => execFileSync('htpasswd', ['-vb', join(dir, 'users'), 'alice', 'wonderland'], { stdio: 'pipe' })).not.toThrow();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(bobEntry.hashedPassword).toBe(opensslSha1('builder', bobEntry.salt));

    const engine = new AuthEngine({ logger });
    await engine.update(snapshot);
    try {
      expect((await engine.check(checkRequest('default.basic-auth', { authorization: basic('alice', 'wonderland') }))).allowed).toBe(true);
      expect((await engine.check(checkRequest('default.basic-auth-sha1', { authorization: basic('bob', 'builder') }))).allowed).toBe(true);
    } finally {
      await engine.close();
    }
  });
});
