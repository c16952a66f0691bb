import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { checkAuthConfig } from '../extauth/checks.ts';
import { parseManifests } from './manifest.ts';
import { ConfigStore, lookup } from './store.ts';

// SPEC 2.2 (Secret kind) and 5.3 (pluginAuth.secretRefs, egress upstreamRef): loaded, checked
// and referenced like any resource.

const secret = (name: string, fields: object) => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name }, ...fields });
const authConfig = (pluginAuth: object) => ({
  apiVersion: 'enterprise.gatehouse.dev/v1',
  kind: 'AuthConfig',
  metadata: { name: 'keys' },
  spec: { configs: [{ pluginAuth: { name: 'ApiKey', ...pluginAuth } }] },
});

function load(objects: object[]) {
  const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev', checks: { AuthConfig: checkAuthConfig } });
  const parsed = parseManifests('config.yaml', objects.map((o) => stringify(o)).join('---\n'));
  return store.load(parsed.documents, parsed.diagnostics);
}

describe('Secret', () => {
  test('data is decoded from base64, stringData merged over it, type defaults to Opaque', () => {
    const snap = load([secret('keys', { data: { a: Buffer.from('from data').toString('base64'), b: Buffer.from('old').toString('base64') }, stringData: { b: 'new' } })]);
    expect(snap.statuses.map((s) => [s.kind, s.name, s.state])).toEqual([['Secret', 'keys', 'Accepted']]);
    expect(lookup(snap, 'Secret', { name: 'keys' }, 'default')?.spec).toEqual({ type: 'Opaque', data: { a: 'from data', b: 'new' } });
  });

  test('bad base64, unknown fields and a Secret over 1 MiB are rejected with the field path', () => {
    const snap = load([
      secret('bad-b64', { data: { a: 'not base64!' } }),
      secret('unknown', { spec: {} }),
      secret('huge', { stringData: { a: 'x'.repeat(1024 * 1024 + 1) } }),
    ]);
    const reasons = (name: string) => snap.statuses.find((s) => s.name === name)?.reasons.map((r) => `${r.path}: ${r.message}`);
    expect(reasons('bad-b64')?.[0]).toMatch(/^data\.a: /);
    expect(reasons('unknown')?.[0]).toBe('spec: unknown field "spec"');
    expect(reasons('huge')?.[0]).toMatch(/holds 1048577 bytes; at most 1048576/);
  });

  test('apiVersion must be v1', () => {
    const snap = load([{ ...secret('x', { stringData: { a: 'b' } }), apiVersion: 'gatehouse.gatehouse.dev/v1' }]);
    expect(snap.statuses[0]?.reasons[0]?.message).toMatch(/is not served for Secret; use v1/);
  });
});

describe('pluginAuth.secretRefs and egress', () => {
  test('a ref to a missing Secret, or to a key the Secret lacks, rejects the AuthConfig naming the field', () => {
    const missing = load([authConfig({ secretRefs: { Key: { name: 'nope', key: 'k' } } })]);
    expect(missing.statuses.find((s) => s.kind === 'AuthConfig')?.reasons.map((r) => r.path)).toEqual(['spec.configs[0].pluginAuth.secretRefs.Key']);
    const noKey = load([secret('keys', { stringData: { other: 'x' } }), authConfig({ secretRefs: { Key: { name: 'keys', key: 'k' } } })]);
    const reason = noKey.statuses.find((s) => s.kind === 'AuthConfig')?.reasons[0];
    expect(reason?.path).toBe('spec.configs[0].pluginAuth.secretRefs.Key.key');
    expect(reason?.message).toBe('Secret default/keys has no key "k" (it has: other)');
    const ok = load([secret('keys', { stringData: { k: 'v' } }), authConfig({ secretRefs: { Key: { name: 'keys', key: 'k' } } })]);
    expect(ok.statuses.find((s) => s.kind === 'AuthConfig')?.state).toBe('Accepted');
  });

  test('egress: an upstreamRef must name a served Upstream; a url must be http(s); exactly one of the two', () => {
    const snap = load([
      authConfig({ egress: [{ upstreamRef: { name: 'key-service' } }] }),
      { ...authConfig({ egress: [{ url: 'ftp://x' }] }), metadata: { name: 'ftp' } },
      { ...authConfig({ egress: [{ url: 'https://idp.example.com', upstreamRef: { name: 'a' } }] }), metadata: { name: 'both' } },
    ]);
    const reasons = (name: string) => snap.statuses.find((s) => s.name === name)?.reasons.map((r) => r.path);
    expect(reasons('keys')).toEqual(['spec.configs[0].pluginAuth.egress[0].upstreamRef']);
    expect(reasons('ftp')).toEqual(['spec.configs[0].pluginAuth.egress[0].url']);
    expect(reasons('both')).toEqual(['spec.configs[0].pluginAuth.egress[0]']);
  });
});
