import Type from 'typebox';
import { Metadata, Strict } from './common.ts';
import { AuthConfigSpec } from './auth-config.ts';
import { GraphQLApiSpec } from './graphql-api.ts';
import { UpstreamGroupSpec, UpstreamSpec } from './upstream.ts';
import { SecretManifest, SecretSpec } from './secret.ts';
import { ConfigMapManifest, ConfigMapSpec } from './config-map.ts';
import { RouteTableSpec, VirtualServiceSpec } from './virtual-service.ts';
import { RateLimitConfigSpec } from './rate-limit-config.ts';
import { RouteOptionSpec, VirtualHostOptionSpec } from './option-resources.ts';
import { GatewaySpec } from './gateway.ts';

/** The custom resource kinds (SPEC 2.2). `group` is prefixed to `--api-group-domain`. */
export const CRD_KINDS = {
  Upstream: { group: 'gatehouse', glooGroup: 'gloo.solo.io', version: 'v1', plural: 'upstreams', spec: UpstreamSpec },
  UpstreamGroup: { group: 'gatehouse', glooGroup: 'gloo.solo.io', version: 'v1', plural: 'upstreamgroups', spec: UpstreamGroupSpec },
  AuthConfig: { group: 'enterprise', glooGroup: 'enterprise.gloo.solo.io', version: 'v1', plural: 'authconfigs', spec: AuthConfigSpec },
  GraphQLApi: { group: 'graphql', glooGroup: 'graphql.gloo.solo.io', version: 'v1beta1', plural: 'graphqlapis', spec: GraphQLApiSpec },
  RouteTable: { group: 'gateway', glooGroup: 'gateway.solo.io', version: 'v1', plural: 'routetables', spec: RouteTableSpec },
  VirtualService: { group: 'gateway', glooGroup: 'gateway.solo.io', version: 'v1', plural: 'virtualservices', spec: VirtualServiceSpec },
  // Gloo's listener resource (gateway.proto); see docs/gateway.md.
  Gateway: { group: 'gateway', glooGroup: 'gateway.solo.io', version: 'v1', plural: 'gateways', spec: GatewaySpec },
  // Gloo Enterprise's rate-limit policy (solo-apis ratelimit.solo.io/v1alpha1); see docs/rate-limiting.md.
  RateLimitConfig: { group: 'ratelimit', glooGroup: 'ratelimit.solo.io', version: 'v1alpha1', plural: 'ratelimitconfigs', spec: RateLimitConfigSpec },
  // Options shared by reference (optionsConfigRefs); see docs/virtual-service.md.
  VirtualHostOption: { group: 'gateway', glooGroup: 'gateway.solo.io', version: 'v1', plural: 'virtualhostoptions', spec: VirtualHostOptionSpec },
  RouteOption: { group: 'gateway', glooGroup: 'gateway.solo.io', version: 'v1', plural: 'routeoptions', spec: RouteOptionSpec },
} as const;

export type CrdKind = keyof typeof CRD_KINDS;
export const CRD_KIND_NAMES = Object.keys(CRD_KINDS) as CrdKind[];

/** Every kind a config source serves: the custom kinds and Kubernetes' core `Secret` and `ConfigMap` (apiVersion `v1`). */
export const KINDS = {
  ...CRD_KINDS,
  Secret: { group: '', glooGroup: '', version: 'v1', plural: 'secrets', spec: SecretSpec },
  ConfigMap: { group: '', glooGroup: '', version: 'v1', plural: 'configmaps', spec: ConfigMapSpec },
} as const;

/** Kubernetes' own kinds (core group, `v1`): no CRD of ours, no Gloo group. */
export function isCoreKind(kind: Kind): kind is 'Secret' | 'ConfigMap' {
  return kind === 'Secret' || kind === 'ConfigMap';
}

export type Kind = keyof typeof KINDS;
export const KIND_NAMES = Object.keys(KINDS) as Kind[];

export const DEFAULT_API_GROUP_DOMAIN = 'gatehouse.dev';

/** The apiVersion a kind is written with for a given group domain. */
export function apiVersionOf(kind: Kind, domain: string = DEFAULT_API_GROUP_DOMAIN): string {
  if (isCoreKind(kind)) return 'v1';
  const { group, version } = KINDS[kind];
  return `${group}.${domain}/${version}`;
}

/** The apiVersions accepted for a kind: ours for `domain`, and Gloo Edge's (migration). */
export function acceptedApiVersions(kind: Kind, domain: string): string[] {
  if (isCoreKind(kind)) return ['v1'];
  const { glooGroup, version } = KINDS[kind];
  return [apiVersionOf(kind, domain), `${glooGroup}/${version}`];
}

/** The whole manifest schema of a kind: the unit validated, and the source of its CRD. */
export function manifestSchema(kind: Kind) {
  if (kind === 'Secret') return SecretManifest;
  if (kind === 'ConfigMap') return ConfigMapManifest;
  return Strict({
    apiVersion: Type.String(),
    kind: Type.Literal(kind),
    metadata: Metadata,
    spec: KINDS[kind].spec,
    // Written by the controller in Kubernetes mode; ignored when read back.
    status: Type.Optional(Type.Unknown()),
  });
}
