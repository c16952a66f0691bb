import { describe, expect, test } from 'vitest';
import { parseManifests } from './manifest.ts';
import { validateDocument } from './validate.ts';
import { jsonName, normalizeProtoNames } from './proto-names.ts';
import { VirtualServiceSpec } from './schema/virtual-service.ts';

function validate(yaml: string) {
  const { documents } = parseManifests('proto.yaml', yaml);
  return validateDocument(documents[0]!, 'gatehouse.dev');
}

describe('proto field names (Gloo\'s protojson takes them as well as JSON names)', () => {
  test('jsonName is protoc\'s json_name', () => {
    expect(jsonName('retriable_status_codes')).toBe('retriableStatusCodes');
    expect(jsonName('use_http2')).toBe('useHttp2');
    expect(jsonName('prefix')).toBe('prefix');
  });

  test('a VirtualService written with proto names loads as written with JSON names, at every depth', () => {
    const snake = validate(`
apiVersion: gateway.solo.io/v1
kind: VirtualService
metadata: {name: snake, namespace: gloo-system}
spec:
  virtual_host:
    domains: ['*']
    routes:
      - matchers:
          - prefix: /a
            case_sensitive: false
            query_parameters: [{name: my_param, value: x}]
        route_action: {single: {upstream: {name: up}}}
        inheritable_matchers: false
        options:
          prefix_rewrite: /b
          retries:
            retry_on: retriable-status-codes
            num_retries: 2
            per_try_timeout: 1s
            retriable_status_codes: [503]
          header_manipulation:
            request_headers_to_add: [{header: {key: x-a, value: "1"}, append: false}]
            response_headers_to_remove: [x-b]
`);
    expect(snake.diagnostics).toEqual([]);
    const route = (snake.resource!.spec as { virtualHost: { routes: object[] } }).virtualHost.routes[0];
    expect(route).toEqual({
      matchers: [{ prefix: '/a', caseSensitive: false, queryParameters: [{ name: 'my_param', value: 'x' }] }],
      routeAction: { single: { upstream: { name: 'up' } } },
      inheritableMatchers: false,
      options: {
        prefixRewrite: '/b',
        retries: { retryOn: 'retriable-status-codes', numRetries: 2, perTryTimeout: '1s', retriableStatusCodes: [503] },
        headerManipulation: { requestHeadersToAdd: [{ header: { key: 'x-a', value: '1' }, append: false }], responseHeadersToRemove: ['x-b'] },
      },
    });
    // Equal content, equal version: a resource does not "change" by being respelled.
    const camel = validate(`
apiVersion: gateway.solo.io/v1
kind: VirtualService
metadata: {name: snake, namespace: gloo-system}
spec:
  virtualHost:
    domains: ['*']
    routes:
      - matchers: [{prefix: /a, caseSensitive: false, queryParameters: [{name: my_param, value: x}]}]
        routeAction: {single: {upstream: {name: up}}}
        inheritableMatchers: false
        options:
          prefixRewrite: /b
          retries: {retryOn: retriable-status-codes, numRetries: 2, perTryTimeout: 1s, retriableStatusCodes: [503]}
          headerManipulation: {requestHeadersToAdd: [{header: {key: x-a, value: "1"}, append: false}], responseHeadersToRemove: [x-b]}
`);
    expect(camel.resource!.version).toBe(snake.resource!.version);
  });

  test('map keys are never renamed: labels, selectors, resolver names, a plugin\'s config', () => {
    const up = validate(`
apiVersion: gloo.solo.io/v1
kind: Upstream
metadata: {name: u, namespace: gloo-system}
spec:
  kube: {service_name: svc, service_namespace: default, service_port: 8080, selector: {app_name: x}}
  use_http2: true
`);
    expect(up.diagnostics.filter((d) => d.severity === 'error')).toEqual([]);
    expect(up.resource!.spec).toMatchObject({ kube: { serviceName: 'svc', serviceNamespace: 'default', servicePort: 8080, selector: { app_name: 'x' } }, useHttp2: true });
    const auth = validate(`
apiVersion: enterprise.gloo.solo.io/v1
kind: AuthConfig
metadata: {name: a, namespace: gloo-system}
spec:
  configs:
    - plugin_auth: {name: p, plugin_file_name: p.js, exported_symbol_name: P, config: {some_key: 1, nested_map: {inner_key: 2}}}
`);
    expect(auth.diagnostics).toEqual([]);
    expect((auth.resource!.spec as { configs: object[] }).configs[0]).toEqual({ pluginAuth: { name: 'p', pluginFileName: 'p.js', exportedSymbolName: 'P', config: { some_key: 1, nested_map: { inner_key: 2 } } } });
  });

  test('a field given in both spellings is refused at the proto name, with its line', () => {
    const both = validate(`apiVersion: gateway.solo.io/v1
kind: VirtualService
metadata: {name: both, namespace: gloo-system}
spec:
  virtualHost:
    routes:
      - directResponseAction: {status: 200}
        options:
          prefixRewrite: /a
          prefix_rewrite: /b
`);
    expect(both.resource).toBeUndefined();
    expect(both.diagnostics).toEqual([expect.objectContaining({ severity: 'error', path: 'spec.virtualHost.routes[0].options.prefix_rewrite', line: 10, message: '"prefix_rewrite" and "prefixRewrite" are the same field (its proto and JSON names); give it once' })]);
  });

  test('problems inside a field given by its proto name point at the line the user wrote', () => {
    const bad = validate(`apiVersion: gateway.solo.io/v1
kind: VirtualService
metadata: {name: bad, namespace: gloo-system}
spec:
  virtual_host:
    routes:
      - direct_response_action: {status: 200}
        options:
          header_manipulation:
            bogus_field: 1
`);
    expect(bad.diagnostics).toEqual([expect.objectContaining({ path: 'spec.virtualHost.routes[0].options.headerManipulation.bogus_field', line: 10, message: 'unknown field "bogus_field"' })]);
  });

  test('the input is never changed, and an unchanged value is returned as is', () => {
    const value = Object.freeze({ virtual_host: Object.freeze({ routes: Object.freeze([]) }) });
    const { value: out } = normalizeProtoNames(value, VirtualServiceSpec);
    expect(out).toEqual({ virtualHost: { routes: [] } });
    const camel = { virtualHost: { routes: [] } };
    expect(normalizeProtoNames(camel, VirtualServiceSpec).value).toBe(camel);
  });
});
