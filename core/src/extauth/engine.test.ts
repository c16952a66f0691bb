import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { afterEach, describe, expect, it } from 'vitest';
import { authConfig, basic, captureLogger, checkRequest, htpasswdApr1, snapshotter } from '../../../test/extauth/support.ts';
import { extAuthChecks } from './checks.ts';
import { AuthEngine } from './engine.ts';
import { pluginDir } from './plugins/test-support.ts';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const alice = htpasswdApr1('alice', 'wonderland');
const alice2 = htpasswdApr1('alice', 'looking-glass');
const basicStep = (user: { salt: string; hashedPassword: string }) => ({ basicAuth: { realm: 'r', apr: { users: { alice: { salt: user.salt, hashedPassword: user.hashedPassword } } } } });
const FORBIDDEN = { allowed: false, status: 403, headers: [], body: '' };

describe('AuthEngine', () => {
  let engine: AuthEngine | undefined;
  afterEach(async () => {
    await engine?.close();
    engine = undefined;
  });

  it('serves each AuthConfig by config_id = <namespace>.<name> and logs every new configuration', async () => {
    const { logger, lines } = captureLogger();
    engine = new AuthEngine({ logger });
    const load = snapshotter();
    expect(engine.ready).toBe(false);
    await engine.update(load([authConfig('basic', [basicStep(alice)], 'team-a'), authConfig('other', [basicStep(alice2)])]));
    expect(engine.ready).toBe(true);
    expect(lines.filter((l) => l.msg === 'received new auth configuration')).toEqual([expect.objectContaining({ count: 2, ids: ['default.other', 'team-a.basic'] })]);

    expect((await engine.check(checkRequest('team-a.basic', { authorization: basic('alice', 'wonderland') }))).allowed).toBe(true);
    expect((await engine.check(checkRequest('default.other', { authorization: basic('alice', 'wonderland') }))).allowed).toBe(false);
    expect((await engine.check(checkRequest('default.other', { authorization: basic('alice', 'looking-glass') }))).allowed).toBe(true);
  });

  it('denies an unknown or missing config_id with 403 and an error log', async () => {
    const { logger, lines } = captureLogger();
    engine = new AuthEngine({ logger });
    await engine.update(snapshotter()([]));
    expect(await engine.check(checkRequest('default.nope'))).toEqual(FORBIDDEN);
    const noId = checkRequest('x');
    noId.attributes.context_extensions = {};
    expect(await engine.check(noId)).toEqual(FORBIDDEN);
    expect(lines.filter((l) => l.code === 'GH_EXTAUTH_UNKNOWN_CONFIG').map((l) => l.msg)).toEqual([
      'request denied: no AuthConfig default.nope is served (config_id is <namespace>.<name>)',
      'request denied: the CheckRequest has no context_extensions.config_id',
    ]);
  });

  it('rebuilds a changed config (fresh credential cache), keeps an unchanged one, closes a removed one', async () => {
    const { logger } = captureLogger();
    engine = new AuthEngine({ logger });
    const load = snapshotter();
    await engine.update(load([authConfig('a', [basicStep(alice)]), authConfig('b', [basicStep(alice)])]));
    const a1 = engine.chain('default.a')!;
    const b1 = engine.chain('default.b')!;
    expect((await engine.check(checkRequest('default.a', { authorization: basic('alice', 'wonderland') }))).allowed).toBe(true);

    await engine.update(load([authConfig('a', [basicStep(alice2)]), authConfig('b', [basicStep(alice)])]));
    expect(engine.chain('default.b')).toBe(b1);
    expect(engine.chain('default.a')).not.toBe(a1);
    // The old password was verified and cached before: the new chain must not know it.
    expect((await engine.check(checkRequest('default.a', { authorization: basic('alice', 'wonderland') }))).allowed).toBe(false);
    expect((await engine.check(checkRequest('default.a', { authorization: basic('alice', 'looking-glass') }))).allowed).toBe(true);
    const oldStep = a1.steps[0] as unknown as { cachedCredentials: number };
    await new Promise((r) => setImmediate(r));
    expect(oldStep.cachedCredentials).toBe(0);

    await engine.update(load([authConfig('a', [basicStep(alice2)])]));
    expect(engine.configIds).toEqual(['default.a']);
    expect(await engine.check(checkRequest('default.b', { authorization: basic('alice', 'wonderland') }))).toEqual(FORBIDDEN);
  });

  it('denies a config whose step cannot be built, naming the cause in the load log and in each denial', async () => {
    const { logger, lines } = captureLogger();
    engine = new AuthEngine({ logger });
    await engine.update(snapshotter()([authConfig('pt', [basicStep(alice), { passThroughAuth: { grpc: { address: 'localhost:99999' } } }])]));
    const load = lines.find((l) => l.config_id === 'default.pt' && l.code === 'GH_EXTAUTH_STEP_BUILD');
    expect(load?.msg).toBe('auth config default.pt cannot be loaded: spec.configs[1].passThroughAuth.grpc.address: ext_authz address "localhost:99999" must be host:port, e.g. 127.0.0.1:8083');
    expect(await engine.check(checkRequest('default.pt', { authorization: basic('alice', 'wonderland') }))).toEqual(FORBIDDEN);
    expect(lines.find((l) => l.code === 'GH_EXTAUTH_CONFIG_UNAVAILABLE')?.msg).toBe(`request denied: ${load!.msg}`);
  });

  it('denies a pluginAuth config whose plugin file is missing, then serves it once the file arrives', async () => {
    const pluginDir = await mkdtemp(join(tmpdir(), 'plugins-'));
    try {
      const { logger, lines } = captureLogger();
      engine = new AuthEngine({ logger, pluginDir });
      const step = { pluginAuth: { name: 'RequiredHeader', config: { RequiredHeader: 'x-team', AllowedValues: ['blue'] } } };
      await engine.update(snapshotter()([authConfig('plug', [basicStep(alice), step])]));
      const request = checkRequest('default.plug', { authorization: basic('alice', 'wonderland'), 'x-team': 'blue' });
      expect(await engine.check(request)).toEqual(FORBIDDEN);
      expect(lines.find((l) => l.config_id === 'default.plug' && l.code === 'GH_PLUGIN_NOT_FOUND')?.msg).toBe(
        `auth config default.plug cannot be loaded: spec.configs[1].pluginAuth: pluginAuth RequiredHeader: plugin file ${pluginDir}/RequiredHeader.js does not exist; build it with "gatehouse-plugin build ENTRY --name RequiredHeader" into the plugin directory (--plugin-dir), or fix pluginFileName`,
      );

      await buildPlugin({ entry: fileURLToPath(new URL('../../../plugins/required-header/src/index.ts', import.meta.url)), name: 'RequiredHeader', outDir: pluginDir });
      await engine.pluginFilesChanged(['RequiredHeader.js']);
      expect(await engine.check(request)).toEqual({
        allowed: true,
        headersToSet: [
          { key: 'x-user-id', value: 'r;alice', append: false },
          { key: 'matched-allowed-headers', value: 'true', append: false },
        ],
        headersToRemove: [],
      });
      expect((await engine.check(checkRequest('default.plug', { authorization: basic('alice', 'wonderland'), 'x-team': 'red' }))).allowed).toBe(false);
    } finally {
      await engine?.close();
      engine = undefined;
      await rm(pluginDir, { recursive: true, force: true });
    }
  });

  it('builds an AuthConfig whose plugin Start failed again with backoff, and serves it once Start succeeds, with no config change', async () => {
    // A JWKS-like document server that is down at first (Start's fetch is refused).
    let up = false;
    const server = createServer((_req, res) => (up ? res.end('keys') : res.destroy()));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const plugins = await pluginDir([{ entry: new URL('./plugins/fixtures/host-api.ts', import.meta.url), name: 'HostApi' }]);
    try {
      const { logger, lines } = captureLogger();
      engine = new AuthEngine({ logger, pluginDir: plugins.dir });
      const step = { pluginAuth: { name: 'HostApi', exportedSymbolName: 'StartFetch', config: { Url: base }, egress: [{ url: base }] } };
      await engine.update(snapshotter()([authConfig('starting', [step])]));
      const request = checkRequest('default.starting');
      expect(await engine.check(request)).toEqual(FORBIDDEN);
      expect(lines.some((l) => l.code === 'GH_EXTAUTH_STEP_BUILD' && Array.isArray(l.configs) && l.retryInMs === 1000)).toBe(true);
      up = true;
      const started = Date.now();
      let decision = await engine.check(request);
      while (!decision.allowed && Date.now() - started < 10_000) {
        await new Promise((r) => setTimeout(r, 100));
        decision = await engine.check(request);
      }
      expect(decision).toMatchObject({ allowed: true, headersToSet: [{ key: 'x-started', value: 'keys' }] });
    } finally {
      await engine?.close();
      engine = undefined;
      await plugins.remove();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('logs why a rejected AuthConfig is not served when a request needs it', async () => {
    const { logger, lines } = captureLogger();
    engine = new AuthEngine({ logger });
    await engine.update(snapshotter(extAuthChecks)([authConfig('bad', [{ basicAuth: { apr: { users: { bob: { salt: 'x', hashedPassword: 'short' } } } } }])]));
    expect(engine.configIds).toEqual([]);
    expect(await engine.check(checkRequest('default.bad'))).toEqual(FORBIDDEN);
    expect(lines.find((l) => l.code === 'GH_EXTAUTH_UNKNOWN_CONFIG')?.msg).toBe(
      'request denied: auth config default.bad is rejected: test.yaml:13: error: AuthConfig default/bad: spec.configs[0].basicAuth.apr.users.bob.hashedPassword: must be the 22-character hash part of "$apr1$<salt>$<hash>" (as written by htpasswd -m) [GH_EXTAUTH_STEP_BUILD]',
    );
  });

  it('keeps serving the old chain while a new one is being built', async () => {
    const { logger } = captureLogger();
    engine = new AuthEngine({ logger });
    const load = snapshotter();
    await engine.update(load([authConfig('a', [basicStep(alice)])]));
    const updating = engine.update(load([authConfig('a', [basicStep(alice2)])]));
    // Checks started before the swap use the chain that served then.
    expect((await engine.check(checkRequest('default.a', { authorization: basic('alice', 'wonderland') }))).allowed).toBe(true);
    await updating;
    expect((await engine.check(checkRequest('default.a', { authorization: basic('alice', 'looking-glass') }))).allowed).toBe(true);
  });
});
