import type { Kind } from './schema/kinds.ts';
import type { AuthConfigSpec } from './schema/auth-config.ts';
import type { GraphQLApiSpec } from './schema/graphql-api.ts';
import type { UpstreamGroupSpec, UpstreamSpec } from './schema/upstream.ts';
import type { SecretSpec } from './schema/secret.ts';
import type { ConfigMapSpec } from './schema/config-map.ts';
import type { RouteTableSpec, VirtualServiceSpec } from './schema/virtual-service.ts';
import type { ResourceRef } from './schema/common.ts';
import type { RateLimitConfigSpec } from './schema/rate-limit-config.ts';
import type { RouteOptionSpec, VirtualHostOptionSpec } from './schema/option-resources.ts';
import type { GatewaySpec } from './schema/gateway.ts';

export type SpecOf<K extends Kind> = K extends 'Upstream'
  ? UpstreamSpec
  : K extends 'UpstreamGroup'
    ? UpstreamGroupSpec
  : K extends 'VirtualService'
    ? VirtualServiceSpec
  : K extends 'RouteTable'
    ? RouteTableSpec
    : K extends 'GraphQLApi'
      ? GraphQLApiSpec
      : K extends 'AuthConfig'
        ? AuthConfigSpec
        : K extends 'Secret'
          ? SecretSpec
          : K extends 'ConfigMap'
            ? ConfigMapSpec
            : K extends 'RateLimitConfig'
              ? RateLimitConfigSpec
              : K extends 'VirtualHostOption'
                ? VirtualHostOptionSpec
                : K extends 'RouteOption'
                  ? RouteOptionSpec
                  : K extends 'Gateway'
                    ? GatewaySpec
                    : never;

/**
 * A validated resource. Plain data (no functions) so it can cross a worker boundary;
 * deeply frozen once accepted, so the request path can share it without copying.
 */
export interface Resource<K extends Kind = Kind> {
  readonly kind: K;
  readonly apiVersion: string;
  readonly name: string;
  readonly namespace: string;
  /** `Kind/namespace/name`. */
  readonly key: string;
  /** Content hash of the spec: equal versions compile to equal runtime objects. */
  readonly version: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly spec: SpecOf<K>;
  readonly source: { readonly file: string; readonly line: number; readonly index: number };
}

export type AnyResource = { [K in Kind]: Resource<K> }[Kind];

export const DEFAULT_NAMESPACE = 'default';

export function resourceKey(kind: Kind, namespace: string, name: string): string {
  return `${kind}/${namespace}/${name}`;
}

/** `Kind namespace/name`, as used in diagnostics. */
export function describeResource(r: { kind: string; namespace: string; name: string }): string {
  return `${r.kind} ${r.namespace}/${r.name}`;
}

/** Resolves a reference relative to the namespace of the resource that holds it (SPEC 2.3). */
export function refKey(kind: Kind, ref: ResourceRef, fromNamespace: string): string {
  return resourceKey(kind, ref.namespace ?? fromNamespace, ref.name);
}

export function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
