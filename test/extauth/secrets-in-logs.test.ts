/**
 * Issue 24, finding 6: a plugin's error text is untrusted data. `gatehouse extauth` (a real
 * process, plugins built by the real compiler) must keep every encoding of a secret the step
 * holds out of its logs (GH_PLUGIN_INIT_FAILED, GH_PLUGIN_START_FAILED, GH_PLUGIN_THREW,
 * GH_EXTAUTH_CONFIG_UNAVAILABLE), bound the text's length, and not repeat a failure line per
 * retry or per request.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { authConfig, envoyAuthClient, eventually } from './support.ts';

const SECRET = 'Tr0ub4dor&3-horse-Battery';

/**
 * Throws the secret in the form named by the step's `Form` (init/start) or the request's
 * `x-form` header (Authorize). Encodings are computed inside the sandbox with its own Web APIs.
 */
const LEAKY = `
const b64 = (s) => btoa(String.fromCharCode(...new TextEncoder().encode(s)));
const hex = (s) => [...new TextEncoder().encode(s)].map((b) => b.toString(16).padStart(2, '0')).join('');
const forms = {
  plain: (s) => 'key=' + s,
  reversed: (s) => [...s].reverse().join(''),
  upper: (s) => s.toUpperCase(),
  spaced: (s) => [...s].join(' '),
  dotted: (s) => [...s].join('.'),
  base64: (s) => 'Basic ' + b64(s),
  base64Offset1: (s) => b64('a' + s),
  base64Offset2: (s) => b64('ab' + s),
  base64url: (s) => b64('ab' + s).replace(/\\+/g, '-').replace(/\\//g, '_'),
  hex: (s) => '0x' + hex(s),
  hexUpper: (s) => hex(s).toUpperCase(),
  hexColons: (s) => hex(s).match(/../g).join(':'),
  percent: (s) => hex(s).replace(/../g, '%$&'),
  uri: (s) => encodeURIComponent(s),
  json: (s) => JSON.stringify({ key: s }),
  huge: (s) => 'x'.repeat(300000),
};
export const Leaky = {
  NewConfigInstance: () => ({ Form: '' }),
  GetAuthService(ctx, config) {
    const secret = ctx.secrets.KEY;
    if (config.Form.startsWith('init:')) throw new Error('cannot start: ' + forms[config.Form.slice(5)](secret));
    return {
      Start() {
        if (config.Form.startsWith('start:')) throw new Error('start failed: ' + forms[config.Form.slice(6)](secret));
      },
      Authorize(_ctx, request) {
        const form = request.CheckRequest.attributes.request.http.headers['x-form'];
        throw new Error('authorize failed (' + form + '): ' + forms[form](secret));
      },
    };
  },
};
`;

const FORMS = ['plain', 'reversed', 'upper', 'spaced', 'dotted', 'base64', 'base64Offset1', 'base64Offset2', 'base64url', 'hex', 'hexUpper', 'hexColons', 'percent', 'uri', 'json'];

/** What must never appear in a log line: the secret in the encodings the plugin used (computed here with Node). */
function needles(): string[] {
  const bytes = Buffer.from(SECRET);
  const hex = bytes.toString('hex');
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  return [
    SECRET,
    SECRET.toLowerCase(),
    [...SECRET].reverse().join(''),
    [...SECRET].join(' '),
    [...SECRET].join('.'),
    b64(SECRET).replace(/=+$/, ''),
    b64(`a${SECRET}`).slice(4, -4),
    b64(`ab${SECRET}`).slice(4, -4),
    b64(`ab${SECRET}`).slice(4, -4).replace(/\+/g, '-').replace(/\//g, '_'),
    hex,
    hex.match(/../g)!.join(':'),
    hex.replace(/../g, '%$&'),
    encodeURIComponent(SECRET),
  ];
}

function leaks(logs: readonly Record<string, unknown>[]): string[] {
  const found: string[] = [];
  for (const line of logs) {
    const text = JSON.stringify(line).toLowerCase();
    for (const needle of needles()) if (text.includes(needle.toLowerCase())) found.push(`${needle} in ${JSON.stringify(line).slice(0, 300)}`);
  }
  return found;
}

const leaky = (name: string, form: string) =>
  authConfig(name, [{ pluginAuth: { name: 'Leaky', config: { Form: form }, secretRefs: { KEY: { name: 'idp', key: 'client-secret' } } } }]);

describe('secrets in plugin error text (gatehouse extauth process)', () => {
  let dir: ConfigDir;
  let pluginDir: string;
  let extauth: GatehouseProcess;
  let client: ReturnType<typeof envoyAuthClient>;

  beforeAll(async () => {
    pluginDir = await mkdtemp(join(tmpdir(), 'gatehouse-leaky-'));
    await writeFile(join(pluginDir, 'leaky.ts'), LEAKY);
    await buildPlugin({ entry: join(pluginDir, 'leaky.ts'), name: 'Leaky', outDir: pluginDir });
    dir = await makeConfigDir({
      'auth.yaml': [
        { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'idp', namespace: 'default' }, stringData: { 'client-secret': SECRET } },
        leaky('authorize', ''),
        ...FORMS.map((form) => leaky(`init-${form.toLowerCase()}`, `init:${form}`)),
        leaky('start-base64', 'start:base64Offset2'),
        leaky('start-huge', 'start:huge'),
      ],
    });
    extauth = await startGatehouse('extauth', ['--host', '127.0.0.1', '--config-dir', dir.path, '--plugin-dir', pluginDir], { timeoutMs: 60_000 });
    client = envoyAuthClient(`127.0.0.1:${extauth.port}`);
  }, 90_000);

  afterAll(async () => {
    client?.close();
    await extauth?.stop();
    await dir?.cleanup();
    if (pluginDir) await rm(pluginDir, { recursive: true, force: true });
  });

  const check = (configId: string, headers: Record<string, string> = {}) =>
    client.check({ attributes: { request: { http: { method: 'GET', path: '/', headers: { ':path': '/', ...headers } } }, context_extensions: { config_id: configId } } }, 20_000);

  it('logs no encoding of the secret from GetAuthService, Start or Authorize, and bounds the text', async () => {
    // Every init failure has been logged once.
    await extauth.waitForLog((l) => l.config_id === 'default.start-huge' && typeof l.cause === 'string', 30_000);
    for (const form of FORMS) await extauth.waitForLog((l) => l.config_id === `default.init-${form.toLowerCase()}` && typeof l.cause === 'string', 30_000);
    for (const form of FORMS) {
      const response = await check('default.authorize', { 'x-form': form });
      expect(response.denied_response?.status.code).toBe('Forbidden');
      await extauth.waitForLog((l) => l.code === 'GH_PLUGIN_THREW' && typeof l.cause === 'string' && (l.cause.includes(`(${form})`) || l.cause.includes('[redacted')), 20_000);
    }
    expect(await check('default.init-plain')).toMatchObject({ denied_response: { status: { code: 'Forbidden' } } });
    expect(leaks(extauth.logs)).toEqual([]);
    // A 300,000-character error message is cut: no line of the process comes near it.
    const huge = extauth.logs.filter((l) => l.config_id === 'default.start-huge');
    expect(huge.length).toBeGreaterThan(0);
    for (const line of huge) expect(JSON.stringify(line).length).toBeLessThan(16_384);
    expect(extauth.stderr()).not.toContain(SECRET);
  }, 120_000);

  it('logs a failing config once per minute, not on every retry or request', async () => {
    // Three retries (1 s, 2 s, 4 s backoff): each applies the configuration again.
    await eventually(() => extauth.logs.filter((l) => l.msg === 'received new auth configuration').length >= 4, 60_000, 'three retries');
    const initLines = extauth.logs.filter((l) => l.config_id === 'default.init-plain' && l.msg !== undefined && String(l.msg).startsWith('auth config'));
    expect(initLines).toHaveLength(1);
    for (let i = 0; i < 30; i++) await check('default.init-plain');
    const denied = extauth.logs.filter((l) => l.config_id === 'default.init-plain' && l.code === 'GH_EXTAUTH_CONFIG_UNAVAILABLE');
    expect(denied.length).toBeGreaterThanOrEqual(1);
    expect(denied.length).toBeLessThanOrEqual(2);
  }, 120_000);
});
