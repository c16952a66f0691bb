import { describe, expect, test } from 'vitest';
import { parseManifests } from './manifest.ts';
import { validateDocument } from './validate.ts';

function validate(yaml: string, domain = 'gatehouse.dev') {
  const { documents, diagnostics } = parseManifests('routes.yaml', yaml);
  expect(diagnostics).toEqual([]);
  return documents.map((d) => validateDocument(d, domain));
}

const VS_HEAD = `apiVersion: gateway.gatehouse.dev/v1
kind: VirtualService
metadata:
  name: shop
  namespace: web
spec:
  virtualHost:
    domains: ['shop.example.com']
    routes:
`;

describe('validateDocument', () => {
  test('accepts a valid resource, defaults the namespace and hashes the spec', () => {
    const [result] = validate(`apiVersion: gatehouse.gatehouse.dev/v1
kind: Upstream
metadata: {name: users}
spec:
  static:
    hosts: [{addr: 10.0.0.1, port: 8080}]
`);
    expect(result!.diagnostics).toEqual([]);
    expect(result!.resource).toMatchObject({ kind: 'Upstream', name: 'users', namespace: 'default', key: 'Upstream/default/users' });
    expect(result!.resource!.version).toMatch(/^[0-9a-f]{16}$/);
    expect(Object.isFrozen(result!.resource!.spec)).toBe(true);
  });

  test('the version ignores key order but not values', () => {
    const a = validate(`apiVersion: gatehouse.gatehouse.dev/v1\nkind: Upstream\nmetadata: {name: u}\nspec: {static: {hosts: [{addr: a, port: 1}]}}`)[0]!.resource!;
    const b = validate(`apiVersion: gatehouse.gatehouse.dev/v1\nkind: Upstream\nmetadata: {name: u}\nspec: {static: {hosts: [{port: 1, addr: a}]}}`)[0]!.resource!;
    const c = validate(`apiVersion: gatehouse.gatehouse.dev/v1\nkind: Upstream\nmetadata: {name: u}\nspec: {static: {hosts: [{port: 2, addr: a}]}}`)[0]!.resource!;
    expect(a.version).toBe(b.version);
    expect(a.version).not.toBe(c.version);
  });

  test('an unknown field is an error with its field path, line and resource', () => {
    const [result] = validate(`${VS_HEAD}    - matchers:
      - prefix: /cart
        prefx: /typo
      routeAction: {single: {upstream: {name: cart}}}
`);
    expect(result!.resource).toBeUndefined();
    expect(result!.key).toBe('VirtualService/web/shop');
    expect(result!.diagnostics).toEqual([
      {
        code: 'GH_CONFIG_UNKNOWN_FIELD',
        severity: 'error',
        message: 'unknown field "prefx"',
        file: 'routes.yaml',
        line: 12,
        resource: 'VirtualService web/shop',
        path: 'spec.virtualHost.routes[0].matchers[0].prefx',
      },
    ]);
  });

  test('exactly-one-of and at-most-one-of rules read as such', () => {
    const [result] = validate(`${VS_HEAD}    - matchers: [{prefix: /a, regex: '/a.*'}]
      routeAction: {single: {}}
`);
    expect(result!.diagnostics.map((d) => [d.path, d.message])).toEqual([
      ['spec.virtualHost.routes[0].matchers[0]', 'at most one of "prefix", "exact", "regex" may be set'],
      ['spec.virtualHost.routes[0].routeAction.single', 'exactly one of "upstream", "kube" must be set'],
    ]);
  });

  test('a missing required field names the field', () => {
    const [result] = validate(`${VS_HEAD}    - routeAction: {single: {kube: {ref: {name: svc}}}}
`);
    expect(result!.diagnostics.map((d) => [d.path, d.message])).toEqual([['spec.virtualHost.routes[0].routeAction.single.kube.port', 'required field "port" is missing']]);
  });

  test('bad durations and bad types are reported with a human description', () => {
    const [result] = validate(`${VS_HEAD}    - routeAction: {single: {upstream: {name: a}}}
      options: {timeout: 10 seconds, autoHostRewrite: yes please}
`);
    expect(result!.diagnostics.map((d) => [d.path, d.message])).toEqual([
      ['spec.virtualHost.routes[0].options.autoHostRewrite', expect.stringMatching(/boolean/)],
      ['spec.virtualHost.routes[0].options.timeout', 'must be a duration such as 15s, 1.5s or 250ms'],
    ]);
  });

  test('apiVersion: our group under --api-group-domain, and Gloo Edge groups', () => {
    const upstream = (apiVersion: string) => `apiVersion: ${apiVersion}\nkind: Upstream\nmetadata: {name: u}\nspec: {static: {hosts: [{addr: a, port: 1}]}}`;
    expect(validate(upstream('gatehouse.example.org/v1'), 'example.org')[0]!.diagnostics).toEqual([]);
    expect(validate(upstream('gloo.solo.io/v1'), 'example.org')[0]!.diagnostics).toEqual([]);
    const wrong = validate(upstream('gatehouse.gatehouse.dev/v1'), 'example.org')[0]!;
    expect(wrong.diagnostics[0]).toMatchObject({ code: 'GH_CONFIG_API_VERSION', path: 'apiVersion', line: 1 });
    expect(wrong.diagnostics[0]!.message).toContain('gatehouse.example.org/v1 or gloo.solo.io/v1');
  });

  test('Gloo Edge manifests of all four kinds load unchanged', () => {
    const results = validate(`apiVersion: gloo.solo.io/v1
kind: Upstream
metadata: {name: petstore, namespace: gloo-system}
spec: {static: {hosts: [{addr: petstore, port: 8080}]}}
---
apiVersion: gateway.solo.io/v1
kind: VirtualService
metadata: {name: default, namespace: gloo-system}
spec:
  virtualHost:
    domains: ['*']
    routes:
    - matchers: [{prefix: /}]
      routeAction: {single: {upstream: {name: petstore, namespace: gloo-system}}}
---
apiVersion: enterprise.gloo.solo.io/v1
kind: AuthConfig
metadata: {name: basic-auth, namespace: gloo-system}
spec:
  configs:
  - basicAuth:
      realm: gloo
      apr: {users: {user: {salt: TYiryv0/, hashedPassword: 8BvzLUO9IfGPGGsPnAgSu1}}}
---
apiVersion: graphql.gloo.solo.io/v1beta1
kind: GraphQLApi
metadata: {name: pets, namespace: gloo-system}
spec:
  executableSchema:
    schemaDefinition: 'type Query { pets: [String] @resolve(name: "pets") }'
    executor:
      local:
        resolutions:
          pets: {restResolver: {upstreamRef: {name: petstore}, request: {headers: {':path': /pets}}}}
`);
    expect(results.map((r) => r.diagnostics)).toEqual([[], [], [], []]);
  });

  test('unknown kind and non-objects are reported without a resource', () => {
    const [kind, scalar] = validate(`apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n---\njust a string\n`);
    expect(kind!.diagnostics[0]).toMatchObject({ code: 'GH_CONFIG_UNKNOWN_KIND', path: 'kind', line: 2 });
    expect(kind!.key).toBeUndefined();
    expect(scalar!.diagnostics[0]).toMatchObject({ code: 'GH_CONFIG_NOT_A_RESOURCE', line: 5 });
  });

  test('Kubernetes server-set metadata and status are allowed', () => {
    const [result] = validate(`apiVersion: gatehouse.gatehouse.dev/v1
kind: Upstream
metadata: {name: u, uid: abc, resourceVersion: '12', generation: 3, creationTimestamp: '2026-01-01T00:00:00Z', labels: {app: x}}
spec: {static: {hosts: [{addr: a, port: 1}]}}
status: {state: Accepted}
`);
    expect(result!.diagnostics).toEqual([]);
    expect(result!.resource!.labels).toEqual({ app: 'x' });
  });
});
