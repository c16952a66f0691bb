import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests, type ManifestDocument } from './manifest.ts';
import { ConfigStore, lookup } from './store.ts';
import type { Diagnostic } from './diagnostic.ts';

const upstream = (name: string, port = 8080, namespace?: string) => ({
  apiVersion: 'gatehouse.gatehouse.dev/v1',
  kind: 'Upstream',
  metadata: { name, ...(namespace ? { namespace } : {}) },
  spec: { static: { hosts: [{ addr: '127.0.0.1', port }] } },
});
const vs = (name: string, domains: string[], upstreamRef: object, extra: object = {}) => ({
  apiVersion: 'gateway.gatehouse.dev/v1',
  kind: 'VirtualService',
  metadata: { name },
  spec: { virtualHost: { domains, routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: upstreamRef } }, ...extra }] } },
});

/** Documents as the directory source would deliver them: one file per entry. */
function docs(files: Record<string, object[]>): { documents: ManifestDocument[]; diagnostics: Diagnostic[] } {
  const documents: ManifestDocument[] = [];
  const diagnostics: Diagnostic[] = [];
  for (const [file, objects] of Object.entries(files)) {
    const parsed = parseManifests(file, objects.map((o) => stringify(o)).join('---\n'));
    documents.push(...parsed.documents);
    diagnostics.push(...parsed.diagnostics);
  }
  return { documents, diagnostics };
}

function load(store: ConfigStore, files: Record<string, object[]>, extraFileDiagnostics: Diagnostic[] = []) {
  const { documents, diagnostics } = docs(files);
  return store.load(documents, [...diagnostics, ...extraFileDiagnostics]);
}

const status = (snapshot: ReturnType<ConfigStore['load']>, kind: string, name: string) => snapshot.statuses.find((s) => s.kind === kind && s.name === name);

describe('ConfigStore', () => {
  test('accepts valid resources and resolves references in the referrer namespace by default', () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    const snap = load(store, { 'a.yaml': [upstream('users'), upstream('other', 1, 'ops'), vs('site', ['*'], { name: 'users' })] });
    expect(snap.statuses.map((s) => [s.kind, s.name, s.state, s.serving])).toEqual([
      ['Upstream', 'users', 'Accepted', 'current'],
      ['Upstream', 'other', 'Accepted', 'current'],
      ['VirtualService', 'site', 'Accepted', 'current'],
    ]);
    expect(lookup(snap, 'Upstream', { name: 'users' }, 'default')?.spec.static?.hosts[0]?.port).toBe(8080);
    expect(lookup(snap, 'Upstream', { name: 'other' }, 'default')).toBeUndefined();
    expect(lookup(snap, 'Upstream', { name: 'other', namespace: 'ops' }, 'default')).toBeDefined();
  });

  test('a reference to a missing resource rejects the referrer with the field path', () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    const snap = load(store, { 'a.yaml': [vs('site', ['*'], { name: 'nope', namespace: 'x' })] });
    const s = status(snap, 'VirtualService', 'site')!;
    expect(s).toMatchObject({ state: 'Rejected', serving: 'none' });
    expect(s.reasons).toEqual([
      expect.objectContaining({
        code: 'GH_CONFIG_MISSING_REF',
        file: 'a.yaml',
        line: expect.any(Number),
        path: 'spec.virtualHost.routes[0].routeAction.single.upstream',
        message: 'references Upstream x/nope, which does not exist or is not accepted',
      }),
    ]);
    expect(snap.resources.size).toBe(0);
  });

  test('a duplicate kind/namespace/name is an error on the later definition only', () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    const snap = load(store, { 'a.yaml': [upstream('users', 1)], 'b.yaml': [upstream('users', 2)] });
    expect(lookup(snap, 'Upstream', { name: 'users' }, 'default')?.spec.static?.hosts[0]?.port).toBe(1);
    expect(snap.diagnostics).toEqual([expect.objectContaining({ code: 'GH_CONFIG_DUPLICATE', file: 'b.yaml', line: 1, resource: 'Upstream default/users' })]);
    expect(snap.diagnostics[0]!.message).toContain('already defined at a.yaml:1');
  });

  test('the same domain in two VirtualServices rejects the later one', () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    const snap = load(store, { 'a.yaml': [upstream('u'), vs('first', ['Shop.example.com'], { name: 'u' }), vs('second', ['other.example.com', 'shop.example.com:8080'], { name: 'u' })] });
    expect(status(snap, 'VirtualService', 'first')!.state).toBe('Accepted');
    const second = status(snap, 'VirtualService', 'second')!;
    expect(second.state).toBe('Rejected');
    expect(second.reasons).toContainEqual(expect.objectContaining({ code: 'GH_CONFIG_DOMAIN_CONFLICT', path: 'spec.virtualHost.domains[1]' }));
  });

  test('a served VirtualService keeps its domain when a newcomer sorted before it claims it', () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    load(store, { 'u.yaml': [upstream('u')], 'z.yaml': [vs('old', ['a.example.com'], { name: 'u' })] });
    const snap = load(store, { 'u.yaml': [upstream('u')], 'a.yaml': [vs('new', ['a.example.com'], { name: 'u' })], 'z.yaml': [vs('old', ['a.example.com'], { name: 'u' })] });
    expect(status(snap, 'VirtualService', 'old')!.state).toBe('Accepted');
    expect(status(snap, 'VirtualService', 'new')!.state).toBe('Rejected');
  });

  test('a rejected update keeps the last accepted version serving; status shows the rejection', () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    const first = load(store, { 'a.yaml': [upstream('users', 1000)] });
    const goodVersion = first.statuses[0]!.servedVersion;
    const bad = { ...upstream('users'), spec: { static: { hosts: [{ addr: 'x', port: 99999 }] } } };
    const snap = load(store, { 'a.yaml': [bad] });
    expect(status(snap, 'Upstream', 'users')).toMatchObject({ state: 'Rejected', serving: 'last-accepted', servedVersion: goodVersion });
    expect(lookup(snap, 'Upstream', { name: 'users' }, 'default')?.spec.static?.hosts[0]?.port).toBe(1000);
    // Still rejected on the next load: the old version keeps serving.
    expect(lookup(load(store, { 'a.yaml': [bad] }), 'Upstream', { name: 'users' }, 'default')?.spec.static?.hosts[0]?.port).toBe(1000);
    // Fixed: the new version serves.
    expect(lookup(load(store, { 'a.yaml': [upstream('users', 2000)] }), 'Upstream', { name: 'users' }, 'default')?.spec.static?.hosts[0]?.port).toBe(2000);
  });

  test('a resource that was never accepted is not served, and others are unaffected', () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    const bad = { ...upstream('bad'), spec: { static: { hosts: [] } } };
    const snap = load(store, { 'a.yaml': [bad, upstream('good')] });
    expect(status(snap, 'Upstream', 'bad')).toMatchObject({ state: 'Rejected', serving: 'none' });
    expect([...snap.resources.keys()]).toEqual(['Upstream/default/good']);
  });

  test('a file that stops parsing keeps its resources serving as last accepted', () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    load(store, { 'a.yaml': [upstream('users')], 'b.yaml': [upstream('b')] });
    const parseError: Diagnostic = { code: 'GH_CONFIG_PARSE', severity: 'error', file: 'a.yaml', line: 3, message: 'bad indentation' };
    const snap = load(store, { 'b.yaml': [upstream('b')] }, [parseError]);
    expect(status(snap, 'Upstream', 'users')).toMatchObject({ state: 'Rejected', serving: 'last-accepted' });
    expect(status(snap, 'Upstream', 'users')!.reasons[0]).toMatchObject({ code: 'GH_CONFIG_PARSE', resource: 'Upstream default/users' });
    expect(snap.resources.has('Upstream/default/users')).toBe(true);
  });

  test('a deleted resource is forgotten; a referrer that now dangles is rejected', () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    load(store, { 'a.yaml': [upstream('u'), vs('site', ['*'], { name: 'u' })] });
    const snap = load(store, { 'a.yaml': [vs('site', ['*'], { name: 'u' })] });
    expect(snap.resources.size).toBe(0);
    expect(status(snap, 'Upstream', 'u')).toBeUndefined();
    expect(status(snap, 'VirtualService', 'site')).toMatchObject({ state: 'Rejected', serving: 'none' });
  });

  test('an invalid regex and a bad domain are rejected; a port in a domain is a warning', () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    const withRegex = vs('re', ['a.example.com'], { name: 'u' }, { matchers: [{ regex: '/(unclosed' }] });
    const snap = load(store, { 'a.yaml': [upstream('u'), withRegex, vs('dom', ['a.*.com'], { name: 'u' }), vs('port', ['p.example.com:8080'], { name: 'u' })] });
    expect(status(snap, 'VirtualService', 're')!.reasons[0]).toMatchObject({ code: 'GH_CONFIG_BAD_REGEX', path: 'spec.virtualHost.routes[0].matchers[0].regex' });
    expect(status(snap, 'VirtualService', 'dom')!.reasons[0]).toMatchObject({ code: 'GH_CONFIG_BAD_DOMAIN', path: 'spec.virtualHost.domains[0]' });
    expect(status(snap, 'VirtualService', 'port')).toMatchObject({ state: 'Warning', serving: 'current' });
  });

  test('regexes are RE2: lookaround and backreferences are refused with the field path, (?i) is accepted', () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    const snap = load(store, {
      'a.yaml': [
        upstream('u'),
        vs('ahead', ['a.example.com'], { name: 'u' }, { matchers: [{ prefix: '/', headers: [{ name: 'x-v', value: 'v(?=1)', regex: true }] }] }),
        vs('back', ['b.example.com'], { name: 'u' }, { matchers: [{ prefix: '/', queryParameters: [{ name: 'q', value: '(a)\\1', regex: true }] }] }),
        vs('behind', ['c.example.com'], { name: 'u' }, { options: { regexRewrite: { pattern: { regex: '(?<=/)x' }, substitution: 'y' } } }),
        vs('groups', ['d.example.com'], { name: 'u' }, { options: { regexRewrite: { pattern: { regex: '/(x)' }, substitution: '/\\2' } } }),
        vs('fine', ['e.example.com'], { name: 'u' }, { matchers: [{ regex: '(?i)/api/(a+)+' }] }),
      ],
    });
    expect(status(snap, 'VirtualService', 'ahead')!.reasons[0]).toMatchObject({ code: 'GH_CONFIG_BAD_REGEX', path: 'spec.virtualHost.routes[0].matchers[0].headers[0].value', message: expect.stringContaining('lookahead') });
    expect(status(snap, 'VirtualService', 'back')!.reasons[0]).toMatchObject({ code: 'GH_CONFIG_BAD_REGEX', path: 'spec.virtualHost.routes[0].matchers[0].queryParameters[0].value', message: expect.stringContaining('backreference') });
    expect(status(snap, 'VirtualService', 'behind')!.reasons[0]).toMatchObject({ code: 'GH_CONFIG_BAD_REGEX', path: 'spec.virtualHost.routes[0].options.regexRewrite.pattern.regex', message: expect.stringContaining('lookbehind') });
    expect(status(snap, 'VirtualService', 'groups')!.reasons[0]).toMatchObject({ code: 'GH_CONFIG_BAD_REGEX', path: 'spec.virtualHost.routes[0].options.regexRewrite.substitution' });
    expect(status(snap, 'VirtualService', 'fine')).toMatchObject({ state: 'Accepted' });
  });

  test('a VirtualService whose AuthConfig is rejected keeps serving (auth then denies): fail closed, not 404', () => {
    const authConfig = (name: string, configs: object[]) => ({ apiVersion: 'enterprise.gatehouse.dev/v1', kind: 'AuthConfig', metadata: { name }, spec: { configs } });
    const store = new ConfigStore({
      apiGroupDomain: 'gatehouse.dev',
      checks: { AuthConfig: (r, ctx) => (r.name === 'broken' ? [ctx.at(['spec'], 'GH_TEST_BROKEN', 'cannot build')] : []) },
    });
    const guarded = (name: string, auth: string) => ({ ...vs(name, [`${name}.example.com`], { name: 'u' }), spec: { virtualHost: { ...vs(name, [`${name}.example.com`], { name: 'u' }).spec.virtualHost, options: { extauth: { configRef: { name: auth } } } } } });
    const snap = load(store, { 'a.yaml': [upstream('u'), authConfig('broken', [{ basicAuth: { apr: { users: {} } } }]), guarded('shop', 'broken'), guarded('blog', 'absent')] });
    expect(status(snap, 'AuthConfig', 'broken')).toMatchObject({ state: 'Rejected', serving: 'none' });
    expect(status(snap, 'VirtualService', 'shop')).toMatchObject({ state: 'Warning', serving: 'current' });
    expect(status(snap, 'VirtualService', 'shop')!.reasons[0]).toMatchObject({ code: 'GH_CONFIG_REJECTED_REF', severity: 'warning', path: 'spec.virtualHost.options.extauth.configRef' });
    // An AuthConfig that does not exist at all is still a broken reference.
    expect(status(snap, 'VirtualService', 'blog')).toMatchObject({ state: 'Rejected', serving: 'none' });
  });

  test('kind checks run after reference checks and can reject', () => {
    const store = new ConfigStore({
      apiGroupDomain: 'gatehouse.dev',
      checks: { Upstream: (r, ctx) => (r.name === 'vetoed' ? [ctx.at(['spec', 'static'], 'GH_TEST_VETO', 'vetoed by check')] : []) },
    });
    const snap = load(store, { 'a.yaml': [upstream('vetoed'), upstream('fine')] });
    expect(status(snap, 'Upstream', 'vetoed')!.reasons).toEqual([expect.objectContaining({ code: 'GH_TEST_VETO', path: 'spec.static', line: 6 })]);
    expect(status(snap, 'Upstream', 'fine')!.state).toBe('Accepted');
  });

  test('generations increase with every load', () => {
    const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
    expect(load(store, {}).generation).toBe(1);
    expect(load(store, {}).generation).toBe(2);
  });
});
