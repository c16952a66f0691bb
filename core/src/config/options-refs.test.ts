import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests } from './manifest.ts';
import { ConfigStore } from './store.ts';
import { flattenRoutes, routeTablesOf } from './delegation.ts';
import { effectiveVirtualHostOptions, lookupIn, shallowMergeOptions } from './options-refs.ts';
import type { Resource } from './resource.ts';

const upstream = { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'u', namespace: 'app' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 1 }] } } };
const to = { single: { upstream: { name: 'u', namespace: 'app' } } };
const vho = (name: string, options: object, namespace = 'gloo-system') => ({ apiVersion: 'gateway.solo.io/v1', kind: 'VirtualHostOption', metadata: { name, namespace }, spec: { options } });
const rto = (name: string, options: object, namespace = 'gloo-system') => ({ apiVersion: 'gateway.solo.io/v1', kind: 'RouteOption', metadata: { name, namespace }, spec: { options } });

function load(objects: object[], crossNamespaceSecrets: 'granted' | 'any' = 'granted') {
  const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev', crossNamespaceSecrets });
  const snapshot = store.load(parseManifests('o.yaml', objects.map((o) => stringify(o)).join('---\n')).documents);
  const status = (kind: string, name: string) => snapshot.statuses.find((s) => s.kind === kind && s.name === name)!;
  const vs = () => snapshot.resources.get('VirtualService/app/vs') as Resource<'VirtualService'>;
  const hostOptions = () => effectiveVirtualHostOptions(vs(), lookupIn(snapshot.resources));
  const routes = () => flattenRoutes(vs(), routeTablesOf(snapshot.resources)).routes.map((r) => r.spec);
  return { snapshot, status, hostOptions, routes };
}

const vs = (virtualHost: object) => ({ apiVersion: 'gateway.solo.io/v1', kind: 'VirtualService', metadata: { name: 'vs', namespace: 'app' }, spec: { virtualHost: { domains: ['*'], ...virtualHost } } });

describe('VirtualHostOption and RouteOption (optionsConfigRefs.delegateOptions)', () => {
  test("Gloo's guide: inline wins; the first referenced resource that sets a field gives it; later ones fill only unset fields", () => {
    const { status, hostOptions } = load([
      upstream,
      vho('virtualhost-options-1', { headerManipulation: { requestHeadersToAdd: [{ header: { key: 'myheader', value: 'option-test' } }] }, retries: { retryOn: 'connect-failure', numRetries: 3, perTryTimeout: '5s' } }),
      vho('virtualhost-options-2', { headerManipulation: { requestHeadersToRemove: ['content-header'] }, retries: { retryOn: 'connect-failure', numRetries: 5, perTryTimeout: '10s' }, cors: { allowOrigin: ['https://a.example'] } }),
      vs({
        options: { headerManipulation: { requestHeadersToRemove: ['User-Agent'] } },
        optionsConfigRefs: { delegateOptions: [{ name: 'virtualhost-options-1', namespace: 'gloo-system' }, { name: 'virtualhost-options-2', namespace: 'gloo-system' }] },
        routes: [{ routeAction: to }],
      }),
    ]);
    expect(status('VirtualService', 'vs').state).toBe('Accepted');
    expect(status('VirtualHostOption', 'virtualhost-options-1').state).toBe('Accepted');
    expect(hostOptions()).toEqual({
      headerManipulation: { requestHeadersToRemove: ['User-Agent'] },
      retries: { retryOn: 'connect-failure', numRetries: 3, perTryTimeout: '5s' },
      cors: { allowOrigin: ['https://a.example'] },
    });
  });

  test('route options: own, then RouteOptions in order, then (delegated) the parent route\'s; references inside resolve in the option\'s namespace', () => {
    const { status, routes } = load([
      upstream,
      rto('first', { timeout: '1s', prefixRewrite: '/first', extauth: { configRef: { name: 'auth' } } }),
      rto('second', { timeout: '2s', hostRewrite: 'second.example', autoHostRewrite: true }, 'app'),
      { apiVersion: 'enterprise.gloo.solo.io/v1', kind: 'AuthConfig', metadata: { name: 'auth', namespace: 'gloo-system' }, spec: { configs: [{ basicAuth: { apr: { users: {} } } }] } },
      { apiVersion: 'gateway.solo.io/v1', kind: 'RouteTable', metadata: { name: 't', namespace: 'app' }, spec: { routes: [{ matchers: [{ prefix: '/d/x' }], routeAction: to, options: { autoHostRewrite: false } }] } },
      vs({
        routes: [
          { matchers: [{ prefix: '/r' }], routeAction: to, options: { prefixRewrite: '/own' }, optionsConfigRefs: { delegateOptions: [{ name: 'first', namespace: 'gloo-system' }, { name: 'second' }] } },
          { matchers: [{ prefix: '/d' }], delegateAction: { ref: { name: 't' } }, optionsConfigRefs: { delegateOptions: [{ name: 'second' }] } },
        ],
      }),
    ]);
    expect(status('VirtualService', 'vs').state).toBe('Accepted');
    const [direct, delegated] = routes();
    expect(direct!.options).toEqual({ prefixRewrite: '/own', timeout: '1s', extauth: { configRef: { name: 'auth', namespace: 'gloo-system' } }, hostRewrite: 'second.example', autoHostRewrite: true });
    // The delegated route keeps its own autoHostRewrite and takes the rest from the delegating route's RouteOption.
    expect(delegated!.options).toEqual({ timeout: '2s', hostRewrite: 'second.example', autoHostRewrite: false });
  });

  test('a missing options resource is a warning (Gloo), and the rest applies', () => {
    const { status, hostOptions } = load([upstream, vs({ options: { retries: { numRetries: 1 } }, optionsConfigRefs: { delegateOptions: [{ name: 'nope' }] }, routes: [{ routeAction: to }] })]);
    expect(status('VirtualService', 'vs')).toMatchObject({ state: 'Warning', reasons: [expect.objectContaining({ code: 'GH_CONFIG_MISSING_REF', severity: 'warning', path: 'spec.virtualHost.optionsConfigRefs.delegateOptions[0]', message: 'references VirtualHostOption app/nope, which does not exist or is not accepted: its options are not applied' })] });
    expect(hostOptions()).toEqual({ retries: { numRetries: 1 } });
  });

  test('bad options in an options resource reject it with the field path (checked as inline options are); a route naming it gets a warning', () => {
    const { status, routes } = load([
      upstream,
      rto('bad', { retries: { retryOn: 'sometimes' } }),
      vho('bad-regex', { cors: { allowOriginRegex: ['(?=x)'] } }),
      vs({ optionsConfigRefs: { delegateOptions: [{ name: 'bad-regex', namespace: 'gloo-system' }] }, routes: [{ routeAction: to, options: { timeout: '3s' }, optionsConfigRefs: { delegateOptions: [{ name: 'bad', namespace: 'gloo-system' }] } }] }),
    ]);
    expect(status('RouteOption', 'bad')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ path: 'spec.options.retries.retryOn', message: expect.stringContaining('"sometimes" is not supported') })] });
    expect(status('VirtualHostOption', 'bad-regex')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ code: 'GH_CONFIG_BAD_REGEX', path: 'spec.options.cors.allowOriginRegex[0]' })] });
    expect(status('VirtualService', 'vs').state).toBe('Warning');
    expect(routes()[0]!.options).toEqual({ timeout: '3s' });
  });

  test('targetRefs: accepted with a warning naming it', () => {
    const { status } = load([{ apiVersion: 'gateway.solo.io/v1', kind: 'RouteOption', metadata: { name: 't', namespace: 'gloo-system' }, spec: { options: { timeout: '1s' }, targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'r' }] } }]);
    expect(status('RouteOption', 't')).toMatchObject({ state: 'Warning', reasons: [expect.objectContaining({ code: 'GH_CONFIG_IGNORED', path: 'spec.targetRefs', message: expect.stringContaining('targetRefs is not applied') })] });
  });

  test("an options resource of another namespace cannot bring that namespace's Secrets (tenancy), unless the Secret allows it", () => {
    const secret = (annotations: object = {}) => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'token', namespace: 'gloo-system', annotations }, stringData: { 'x-token': 'secret' } });
    const withSecret = vho('secret-headers', { headerManipulation: { requestHeadersToAdd: [{ headerSecretRef: { name: 'token' } }] } });
    const host = vs({ optionsConfigRefs: { delegateOptions: [{ name: 'secret-headers', namespace: 'gloo-system' }] }, routes: [{ routeAction: to }] });
    const refused = load([upstream, secret(), withSecret, host]);
    expect(refused.status('VirtualService', 'vs')).toMatchObject({ state: 'Rejected', reasons: [expect.objectContaining({ code: 'GH_CONFIG_CROSS_NAMESPACE_REF', path: 'spec.virtualHost.optionsConfigRefs.delegateOptions[0]' })] });
    const granted = load([upstream, secret({ 'gatehouse.dev/allow-references-from': 'app' }), withSecret, host]);
    expect(granted.status('VirtualService', 'vs').state).toBe('Accepted');
    expect(granted.hostOptions()!.headerManipulation!.requestHeadersToAdd![0]!.headerSecretRef).toEqual({ name: 'token', namespace: 'gloo-system' });
  });

  test('shallowMergeOptions: set fields of the first win, whole', () => {
    expect(shallowMergeOptions({ a: 1, b: undefined }, { b: 2, c: 3 })).toEqual({ a: 1, b: 2, c: 3 });
    expect(shallowMergeOptions(undefined, { b: 2 })).toEqual({ b: 2 });
    expect(shallowMergeOptions({ h: { x: 1 } }, { h: { y: 2 } })).toEqual({ h: { x: 1 } });
  });
});
