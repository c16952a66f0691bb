import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseManifests } from '../../config/manifest.ts';
import { ConfigStore } from '../../config/store.ts';

/** The filter factories' load-time checks, through the config store as `gatehouse validate` and reloads run them. */
function load(objects: object[]) {
  const store = new ConfigStore({ apiGroupDomain: 'gatehouse.dev' });
  const parsed = parseManifests('filters.yaml', objects.map((o) => stringify(o)).join('---\n'));
  return store.load(parsed.documents, parsed.diagnostics);
}

const upstream = { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'up' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 8080 }] } } };
const vs = (options: object, routeOptions: object = {}) => ({
  apiVersion: 'gateway.gatehouse.dev/v1',
  kind: 'VirtualService',
  metadata: { name: 'vs' },
  spec: { virtualHost: { options, routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'up' } } }, options: routeOptions }] } },
});
const reasons = (snapshot: ReturnType<typeof load>) => snapshot.statuses.find((s) => s.kind === 'VirtualService')!;

describe('filter option checks at load', () => {
  test('a transformation template that does not parse rejects the VirtualService, naming the field', () => {
    const status = reasons(load([upstream, vs({}, { transformations: { requestTransformation: { transformationTemplate: { headers: { 'x-a': { text: '{{ broken' } } } } } })]));
    expect(status.state).toBe('Rejected');
    expect(status.reasons).toContainEqual(expect.objectContaining({ code: 'GH_TRANSFORM_TEMPLATE', path: 'spec.virtualHost.routes[0].options.transformations.requestTransformation.transformationTemplate.headers.x-a.text' }));
  });

  test('a virtual host transformation with an RE2-invalid extractor is rejected at its path', () => {
    const status = reasons(load([upstream, vs({ stagedTransformations: { early: { requestTransforms: [{ requestTransformation: { transformationTemplate: { extractors: { a: { header: 'x', regex: '(?=x)' } } } } }] } } })]));
    expect(status.state).toBe('Rejected');
    expect(status.reasons[0]!.path).toMatch(/^spec\.virtualHost\.options\.stagedTransformations\.early\.requestTransforms\[0\]\.requestTransformation\.transformationTemplate\.extractors/);
  });

  test('a rate-limit action Gloo does not know and a too short fillInterval are rejected, naming the field', () => {
    const status = reasons(load([upstream, vs({ ratelimit: { rateLimits: [{ actions: [{ headerValueMatch: { descriptorValue: 'x', headers: [{ name: 'a', regexMatch: '(?<=a)' }] } }] }] } }, { localRatelimit: { maxTokens: 1, fillInterval: '10ms' } })]));
    expect(status.state).toBe('Rejected');
    const paths = status.reasons.map((r) => r.path);
    expect(paths).toContain('spec.virtualHost.routes[0].options.localRatelimit.fillInterval');
    expect(paths.some((p) => p?.startsWith('spec.virtualHost.options.ratelimit.rateLimits[0].actions[0].headerValueMatch.headers[0]'))).toBe(true);
  });

  test('a reference to a RateLimitConfig that does not exist rejects the VirtualService', () => {
    const status = reasons(load([upstream, vs({}, { rateLimitConfigs: { refs: [{ name: 'missing' }] } })]));
    expect(status.state).toBe('Rejected');
    expect(status.reasons).toContainEqual(expect.objectContaining({ code: 'GH_CONFIG_MISSING_REF', path: 'spec.virtualHost.routes[0].options.rateLimitConfigs.refs[0]' }));
  });

  test('faults with an abort status out of range are a schema error', () => {
    const status = reasons(load([upstream, vs({}, { faults: { abort: { percentage: 100, httpStatus: 99 } } })]));
    expect(status.state).toBe('Rejected');
  });
});
