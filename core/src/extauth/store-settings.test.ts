import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseFlags } from '../cli/flags.ts';
import { PLUGIN_FLAGS, pluginStoreFlags } from '../cli/extauth.ts';
import { storeSettings, type StepBuildOptions } from './build-step.ts';

// Where a pluginAuth step's ctx.store lives (SPEC 5.3): pluginAuth.store, else the auth server's
// --plugin-store-* default, else memory; identities and key prefixes per step; errors name the field.

const SECRETS = { 'shop/redis-auth/password': 'pw', 'shop/redis-auth/username': 'svc', 'shop/ca/ca.crt': 'PEM' };
const at = (...path: (string | number)[]) => `spec.configs[0].${path.join('.')}`;
const options = (extra: Partial<StepBuildOptions> = {}): StepBuildOptions => ({
  logger: undefined as never,
  pluginDir: '/x',
  namespace: 'shop',
  configName: 'limits',
  resolveSecret: (ref) => (SECRETS as Record<string, string | undefined>)[`${ref.namespace}/${ref.name}/${ref.key}`],
  ...extra,
});

describe('storeSettings', () => {
  it('memory by default, keyed by namespace/AuthConfig/step index/plugin', () => {
    expect(storeSettings({ name: 'RateLimit' }, 2, options(), at)).toEqual({ kind: 'memory', identity: 'shop/limits/2/RateLimit' });
    expect(storeSettings({ name: 'RateLimit', store: { memory: {} } }, 0, options({ pluginStore: { redis: { url: 'redis://r:6379' } } }), at)).toEqual({ kind: 'memory', identity: 'shop/limits/0/RateLimit' });
  });

  it('redis from the step: Gloo host form, Secret credentials, TLS with a CA, key prefix, timeout, failOpen', () => {
    const settings = storeSettings(
      { name: 'RateLimit', store: { redis: { host: 'redis.cache:6380', db: 3, socketType: 'tls', tls: { serverName: 'redis.internal', caSecretRef: { name: 'ca' } }, secretRef: { name: 'redis-auth' }, poolSize: 2, timeout: '250ms', failOpen: true } } },
      1,
      options(),
      at,
    );
    expect(settings).toEqual({
      kind: 'redis',
      identity: 'shop/limits/1/RateLimit',
      redis: { url: 'rediss://redis.cache:6380/3', poolSize: 2, password: 'pw', username: 'svc', tls: { ca: 'PEM', servername: 'redis.internal' } },
      keyPrefix: 'gatehouse:plugin:shop/limits/1/RateLimit:',
      timeoutMs: 250,
      failOpen: true,
    });
  });

  it('the auth server\'s default Redis for steps without store; errors name the field', () => {
    expect(storeSettings({ name: 'P' }, 0, options({ pluginStore: { redis: { url: 'redis://r:6379' }, timeoutMs: 50 } }), at)).toMatchObject({ kind: 'redis', keyPrefix: 'gatehouse:plugin:shop/limits/0/P:', timeoutMs: 50, failOpen: false });
    expect(() => storeSettings({ name: 'P', store: { redis: { url: 'redis://r:6379', secretRef: { name: 'missing' } } } }, 0, options(), at)).toThrow('spec.configs[0].pluginAuth.store.redis.secretRef: Secret shop/missing with key "password" is not served');
    expect(() => storeSettings({ name: 'P', store: { redis: { url: 'redis://r:6379/99' } } }, 0, options(), at)).toThrow(/pluginAuth\.store\.redis\.url: .*must be 0 to 15/);
  });
});

describe('--plugin-store-* flags', () => {
  it('memory without a URL; Redis with one (password from a file); a bad URL is refused', async () => {
    expect(pluginStoreFlags(parseFlags([], PLUGIN_FLAGS, {}).values)).toBeUndefined();
    const dir = await mkdtemp(join(tmpdir(), 'gatehouse-store-flags-'));
    try {
      await writeFile(join(dir, 'pw'), 'secret\n');
      const values = parseFlags(['--plugin-store-redis-password-file', join(dir, 'pw'), '--plugin-store-fail-open', 'true'], PLUGIN_FLAGS, { GATEHOUSE_PLUGIN_STORE_REDIS_URL: 'redis://r:6379' }).values;
      expect(pluginStoreFlags(values)).toEqual({ redis: { url: 'redis://r:6379', password: 'secret' }, timeoutMs: 100, failOpen: true });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(() => pluginStoreFlags(parseFlags(['--plugin-store-redis-url', 'http://r'], PLUGIN_FLAGS, {}).values)).toThrow(/--plugin-store-redis-url: .*redis:\/\/host:port/);
  });
});
