import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import Schema from 'typebox/schema';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { CRD_KINDS as KINDS, CRD_KIND_NAMES as KIND_NAMES } from '../config/schema/kinds.ts';
import { renderCrds } from './crds.ts';
import { toStructural } from './structural-schema.ts';

type Node = Record<string, unknown>;

/** Fields of apiextensions.k8s.io/v1 JSONSchemaProps (k8s.io/apiextensions-apiserver types.go). */
const JSON_SCHEMA_PROPS = new Set([
  'id', '$schema', '$ref', 'description', 'type', 'format', 'title', 'default', 'maximum', 'exclusiveMaximum', 'minimum', 'exclusiveMinimum',
  'maxLength', 'minLength', 'pattern', 'maxItems', 'minItems', 'uniqueItems', 'multipleOf', 'enum', 'maxProperties', 'minProperties', 'required',
  'items', 'allOf', 'oneOf', 'anyOf', 'not', 'properties', 'additionalProperties', 'patternProperties', 'dependencies', 'additionalItems',
  'definitions', 'externalDocs', 'example', 'nullable', 'x-kubernetes-preserve-unknown-fields', 'x-kubernetes-embedded-resource',
  'x-kubernetes-int-or-string', 'x-kubernetes-list-map-keys', 'x-kubernetes-list-type', 'x-kubernetes-map-type', 'x-kubernetes-validations',
]);
/** Rejected in v1 CRDs even though JSONSchemaProps has them (apiextensions validation). */
const FORBIDDEN_IN_V1 = ['$ref', 'definitions', 'dependencies', 'id', '$schema', 'patternProperties', 'additionalItems'];
const TYPES = new Set(['object', 'array', 'string', 'integer', 'number', 'boolean']);
const JUNCTORS = ['allOf', 'anyOf', 'oneOf'] as const;

/**
 * The structural-schema rules of Kubernetes ("Specifying a structural schema"), written out
 * independently of the generator so that a generator bug cannot hide behind its own logic.
 * Returns one message per violation, with the path.
 */
function structuralViolations(root: Node): string[] {
  const problems: string[] = [];
  const visit = (node: Node, path: string, inJunctor: boolean, outside: Node | undefined): void => {
    for (const key of Object.keys(node)) {
      if (!JSON_SCHEMA_PROPS.has(key)) problems.push(`${path}: "${key}" is not a JSONSchemaProps field`);
      if (FORBIDDEN_IN_V1.includes(key)) problems.push(`${path}: "${key}" is not allowed in apiextensions.k8s.io/v1`);
    }
    const preserve = node['x-kubernetes-preserve-unknown-fields'];
    if (preserve !== undefined && preserve !== true) problems.push(`${path}: x-kubernetes-preserve-unknown-fields must be true when set`);
    if (node.uniqueItems === true) problems.push(`${path}: uniqueItems is forbidden`);
    if (inJunctor) {
      for (const key of ['description', 'type', 'default', 'additionalProperties', 'nullable']) if (node[key] !== undefined) problems.push(`${path}: "${key}" is not allowed inside a logical junctor`);
    } else {
      const type = node.type;
      if (type === undefined && preserve !== true && node['x-kubernetes-int-or-string'] !== true) problems.push(`${path}: no type (and not x-kubernetes-preserve-unknown-fields)`);
      if (type !== undefined && !TYPES.has(type as string)) problems.push(`${path}: type ${JSON.stringify(type)} is not a Kubernetes schema type`);
      if (node.additionalProperties === false) problems.push(`${path}: additionalProperties must not be false`);
      if (node.additionalProperties !== undefined && node.properties !== undefined) problems.push(`${path}: additionalProperties and properties are mutually exclusive`);
    }
    if (Array.isArray(node.items)) problems.push(`${path}: items must be one schema, not a list`);
    // The API server drops an empty `properties` when storing: the stored CRD would never equal the applied one (server-side apply conflicts with Helm).
    if (node.properties !== undefined && Object.keys(node.properties as object).length === 0) problems.push(`${path}: empty properties (dropped on storage)`);
    const properties = (node.properties ?? {}) as Record<string, Node>;
    for (const [name, child] of Object.entries(properties)) {
      if (inJunctor && !(outside?.properties as Record<string, Node> | undefined)?.[name]) problems.push(`${path}.${name}: specified in a junctor but not outside it`);
      visit(child, `${path}.${name}`, inJunctor, (outside?.properties as Record<string, Node> | undefined)?.[name]);
    }
    if (node.items && typeof node.items === 'object' && !Array.isArray(node.items)) {
      if (inJunctor && !outside?.items) problems.push(`${path}[]: items specified in a junctor but not outside it`);
      visit(node.items as Node, `${path}[]`, inJunctor, outside?.items as Node | undefined);
    }
    if (node.additionalProperties && typeof node.additionalProperties === 'object') visit(node.additionalProperties as Node, `${path}{}`, inJunctor, outside?.additionalProperties as Node | undefined);
    for (const junctor of JUNCTORS) {
      const branches = node[junctor];
      if (branches !== undefined) (branches as Node[]).forEach((b, i) => visit(b, `${path}.${junctor}[${i}]`, true, inJunctor ? outside : node));
    }
    if (node.not) visit(node.not as Node, `${path}.not`, true, inJunctor ? outside : node);
  };
  visit(root, '', false, undefined);
  const metadata = (root.properties as Record<string, Node> | undefined)?.metadata;
  if (metadata && Object.keys(metadata).some((k) => k !== 'type')) problems.push('metadata: only type: object may be given at the root');
  return problems;
}

const crds = renderCrds('gatehouse.dev', { app: 'test' });
const schemaOf = (kind: string) => {
  const crd = crds.find((c) => c.spec.names.kind === kind)!;
  return crd.spec.versions[0]!.schema!.openAPIV3Schema! as Node;
};

describe('renderCrds', () => {
  it('renders one CRD per kind, named plural.group, valid against the apiextensions.k8s.io/v1 API schema', () => {
    expect(crds.map((c) => c.metadata?.name)).toEqual(['upstreams.gatehouse.gatehouse.dev', 'upstreamgroups.gatehouse.gatehouse.dev', 'authconfigs.enterprise.gatehouse.dev', 'graphqlapis.graphql.gatehouse.dev', 'routetables.gateway.gatehouse.dev', 'virtualservices.gateway.gatehouse.dev', 'gateways.gateway.gatehouse.dev', 'ratelimitconfigs.ratelimit.gatehouse.dev', 'virtualhostoptions.gateway.gatehouse.dev', 'routeoptions.gateway.gatehouse.dev']);
    for (const crd of crds) {
      expect(() => new CustomResourceDefinition(crd).validate()).not.toThrow();
      expect(crd.spec.versions).toHaveLength(1);
      expect(crd.spec.versions[0]!.subresources).toEqual({ status: {} });
    }
    expect(crds.find((c) => c.spec.names.kind === 'GraphQLApi')!.spec.versions[0]!.name).toBe('v1beta1');
  });

  it("has Gloo Edge's short names (kubectl get vs) and State, Serving, Reason and Age columns (issue 27 item 9)", () => {
    expect(Object.fromEntries(crds.map((c) => [c.spec.names.plural, c.spec.names.shortNames]))).toEqual({
      upstreams: ['us'],
      upstreamgroups: ['ug'],
      authconfigs: ['ac'],
      graphqlapis: ['gql'],
      routetables: ['rt'],
      virtualservices: ['vs'],
      ratelimitconfigs: ['rlc'],
      virtualhostoptions: ['vho', 'vhopts'],
      routeoptions: ['rto', 'rtopts'],
      gateways: ['gw'],
    });
    for (const crd of crds) {
      expect(crd.spec.versions[0]!.additionalPrinterColumns!.map((c) => [c.name, c.jsonPath])).toEqual([
        ['State', '.status.state'],
        ['Serving', '.status.serving'],
        ['Reason', '.status.reason'],
        ['Age', '.metadata.creationTimestamp'],
      ]);
    }
  });

  it.each(KIND_NAMES)('the %s schema is structural', (kind) => {
    expect(structuralViolations(schemaOf(kind))).toEqual([]);
  });

  it('carries no x-gatehouse-* keys and keeps the exactly-one-of rules', () => {
    const text = JSON.stringify(crds);
    expect(text).not.toContain('x-gatehouse');
    const step = ((schemaOf('AuthConfig').properties as Record<string, Node>).spec!.properties as Record<string, Node>).configs!.items as Node;
    expect(step.oneOf).toEqual(['basicAuth', 'pluginAuth', 'passThroughAuth', 'apiKeyAuth', 'ldap', 'ldapInternal', 'hmacAuth', 'opaAuth', 'opaServerAuth', 'jwt', 'oauth2'].map((key) => ({ required: [key] })));
  });

  it('the checker itself catches non-structural schemas', () => {
    expect(structuralViolations({ type: 'object', properties: { a: {} } })).toEqual(['.a: no type (and not x-kubernetes-preserve-unknown-fields)']);
    expect(structuralViolations({ type: 'object', properties: { a: { type: 'object', patternProperties: { '.*': { type: 'string' } } } } })).toContain('.a: "patternProperties" is not allowed in apiextensions.k8s.io/v1');
    expect(structuralViolations({ type: 'object', properties: { a: { type: 'string' } }, oneOf: [{ type: 'object', required: ['a'] }] })).toContain('.oneOf[0]: "type" is not allowed inside a logical junctor');
    expect(structuralViolations({ type: 'object', properties: { a: { type: 'string' } }, oneOf: [{ properties: { b: {} } }] })).toContain('.oneOf[0].b: specified in a junctor but not outside it');
    expect(structuralViolations({ type: 'object', 'x-gatehouse-x': 1 } as Node)).toContain(': "x-gatehouse-x" is not a JSONSchemaProps field');
  });
});

describe('toStructural', () => {
  it('turns records into additionalProperties, unknown values into preserve-unknown-fields, const into enum', () => {
    expect(toStructural({ type: 'object', patternProperties: { '^.*$': { type: 'string' } } })).toEqual({ type: 'object', additionalProperties: { type: 'string' } });
    expect(toStructural({ type: 'object', properties: { any: {} }, additionalProperties: false })).toEqual({ type: 'object', properties: { any: { 'x-kubernetes-preserve-unknown-fields': true } } });
    expect(toStructural({ type: 'string', const: 'x' })).toEqual({ type: 'string', enum: ['x'] });
    expect(toStructural({ anyOf: [{ type: 'string' }, { type: 'null' }], description: 'd' })).toEqual({ 'x-kubernetes-preserve-unknown-fields': true, description: 'd' });
  });
});

describe('CRD schemas accept what the gateway accepts', () => {
  const root = fileURLToPath(new URL('../../..', import.meta.url));
  const checks = new Map(KIND_NAMES.map((kind) => [kind, Schema.Compile(schemaOf(kind) as never)]));

  it('validates every example manifest in examples/', async () => {
    const dir = join(root, 'examples/quickstart/config');
    const files = (await readdir(dir).catch(() => [] as string[])).filter((f) => /\.ya?ml$/.test(f));
    let checked = 0;
    for (const file of files) {
      for (const doc of parseAllDocuments(await readFile(join(dir, file), 'utf8'))) {
        const value = doc.toJS() as { kind?: string } | null;
        if (!value?.kind || !(value.kind in KINDS)) continue;
        const check = checks.get(value.kind as keyof typeof KINDS)!;
        expect(check.Check(value), `${file}: ${value.kind}`).toBe(true);
        checked++;
      }
    }
    // Without examples the test would prove nothing; the hand-written ones below run regardless.
    if (files.length > 0) expect(checked).toBeGreaterThan(0);
  });

  it('accepts valid resources and rejects wrong types and broken one-of rules', () => {
    const upstream = { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'u' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: 8080 }] } } };
    expect(checks.get('Upstream')!.Check(upstream)).toBe(true);
    expect(checks.get('Upstream')!.Check({ ...upstream, spec: { static: { hosts: [{ addr: 'a', port: 'eighty' }] } } })).toBe(false);
    const plugin = { pluginAuth: { name: 'RequiredHeader', config: { RequiredHeader: 'x', AllowedValues: ['a'] } } };
    const auth = { apiVersion: 'enterprise.gatehouse.dev/v1', kind: 'AuthConfig', metadata: { name: 'a' }, spec: { configs: [plugin] } };
    expect(checks.get('AuthConfig')!.Check(auth)).toBe(true);
    const both = { ...plugin, basicAuth: { apr: { users: { u: { salt: 's', hashedPassword: 'h' } } } } };
    expect(checks.get('AuthConfig')!.Check({ ...auth, spec: { configs: [both] } })).toBe(false);
    const route = { matchers: [{ prefix: '/' }] };
    const vs = { apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualService', metadata: { name: 'v' }, spec: { virtualHost: { domains: ['*'], routes: [{ ...route, routeAction: { single: { upstream: { name: 'u' } } } }] } } };
    expect(checks.get('VirtualService')!.Check(vs)).toBe(true);
    expect(checks.get('VirtualService')!.Check({ ...vs, spec: { virtualHost: { domains: ['*'], routes: [route] } } })).toBe(false);
  });
});
