import { describe, expect, test } from 'vitest';
import { renderCrds } from '../../install/crds.ts';
import { parseManifests } from '../manifest.ts';
import { validateDocument } from '../validate.ts';
import { MAX_REQUEST_BODY_BYTES } from './virtual-service.ts';

/** Diagnostics (path, message) of a VirtualService whose host and one route carry `extauth` options. */
function extauthDiagnostics(hostExtauth: object | undefined, routeExtauth: object | undefined): [string | undefined, string][] {
  const vs = {
    apiVersion: 'gateway.gatehouse.dev/v1',
    kind: 'VirtualService',
    metadata: { name: 'hooks' },
    spec: {
      virtualHost: {
        domains: ['hooks.test'],
        ...(hostExtauth ? { options: { extauth: hostExtauth } } : {}),
        routes: [{ routeAction: { single: { upstream: { name: 'up' } } }, ...(routeExtauth ? { options: { extauth: routeExtauth } } : {}) }],
      },
    },
  };
  const { documents } = parseManifests('hooks.yaml', JSON.stringify(vs));
  return validateDocument(documents[0]!, 'gatehouse.dev').diagnostics.map((d) => [d.path, d.message]);
}

const ROUTE = 'spec.virtualHost.routes[0].options.extauth';

describe('options.extauth.requestBody (SPEC 5.3 "Request body")', () => {
  test('accepted on the virtual host and on a route, with or without a configRef of its own', () => {
    expect(extauthDiagnostics({ configRef: { name: 'a' }, requestBody: { maxRequestBytes: 1 } }, undefined)).toEqual([]);
    expect(extauthDiagnostics(undefined, { configRef: { name: 'a' }, requestBody: { maxRequestBytes: MAX_REQUEST_BODY_BYTES, allowPartialMessage: true, packAsBytes: true } })).toEqual([]);
    expect(extauthDiagnostics({ configRef: { name: 'a' } }, { requestBody: { maxRequestBytes: 4096 } })).toEqual([]);
  });

  test('maxRequestBytes is required, at least 1 and at most 64 MiB', () => {
    expect(extauthDiagnostics(undefined, { requestBody: { packAsBytes: true } })).toEqual([[`${ROUTE}.requestBody.maxRequestBytes`, 'required field "maxRequestBytes" is missing']]);
    expect(extauthDiagnostics(undefined, { requestBody: { maxRequestBytes: 0 } })).toEqual([[`${ROUTE}.requestBody.maxRequestBytes`, expect.stringMatching(/>= 1/)]]);
    expect(extauthDiagnostics(undefined, { requestBody: { maxRequestBytes: MAX_REQUEST_BODY_BYTES + 1 } })).toEqual([[`${ROUTE}.requestBody.maxRequestBytes`, expect.stringMatching(/<= 67108864/)]]);
    expect(extauthDiagnostics(undefined, { requestBody: { maxRequestBytes: 1.5 } })).toEqual([[`${ROUTE}.requestBody.maxRequestBytes`, expect.stringMatching(/integer/)]]);
  });

  test('unknown fields (Envoy spellings included) are errors with their path', () => {
    // The proto name is Gloo's other spelling of the same field (config/proto-names.ts): given twice, it is refused as such.
    expect(extauthDiagnostics(undefined, { requestBody: { maxRequestBytes: 10, max_request_bytes: 10 } })).toEqual([[`${ROUTE}.requestBody.max_request_bytes`, '"max_request_bytes" and "maxRequestBytes" are the same field (its proto and JSON names); give it once']]);
    expect(extauthDiagnostics(undefined, { requestBody: { maxRequestBytes: 10, max_request_byte: 10 } })).toEqual([[`${ROUTE}.requestBody.max_request_byte`, 'unknown field "max_request_byte"']]);
    expect(extauthDiagnostics({ requestBody: { maxRequestBytes: 10, packAsByte: true } }, undefined)).toEqual([['spec.virtualHost.options.extauth.requestBody.packAsByte', 'unknown field "packAsByte"']]);
  });

  test('disable excludes requestBody, as it excludes configRef', () => {
    expect(extauthDiagnostics(undefined, { disable: true, requestBody: { maxRequestBytes: 10 } })).toEqual([[ROUTE, '"disable" turns auth off: it cannot be set with "configRef" or "requestBody"']]);
    expect(extauthDiagnostics(undefined, { disable: true, configRef: { name: 'a' } })).toEqual([[ROUTE, '"disable" turns auth off: it cannot be set with "configRef" or "requestBody"']]);
  });

  test('the VirtualService CRD carries requestBody with its bounds and required field', () => {
    const crd = renderCrds('gatehouse.dev', {}).find((c) => c.spec.names.kind === 'VirtualService')!;
    type Props = { properties: Record<string, Props>; required?: string[]; minimum?: number; maximum?: number; type?: string };
    const spec = crd.spec.versions[0]!.schema!.openAPIV3Schema!.properties!.spec as unknown as Props;
    const vh = spec.properties.virtualHost!;
    for (const extauth of [vh.properties.options!.properties.extauth!, (vh.properties.routes as unknown as { items: Props }).items.properties.options!.properties.extauth!]) {
      const body = extauth.properties.requestBody!;
      expect(body.required).toEqual(['maxRequestBytes']);
      expect(body.properties.maxRequestBytes).toMatchObject({ type: 'integer', minimum: 1, maximum: MAX_REQUEST_BODY_BYTES });
      expect(body.properties.allowPartialMessage!.type).toBe('boolean');
      expect(body.properties.packAsBytes!.type).toBe('boolean');
    }
  });
});
