import { refKey, type AnyResource, type Resource } from './resource.ts';
import type { Kind } from './schema/kinds.ts';
import type { ResourceRef } from './schema/common.ts';

/** Looks up a served resource by reference, as seen from `fromNamespace`. */
export function lookup<K extends Kind>(snapshot: { readonly resources: ReadonlyMap<string, AnyResource> }, kind: K, ref: ResourceRef, fromNamespace: string): Resource<K> | undefined {
  return snapshot.resources.get(refKey(kind, ref, fromNamespace)) as Resource<K> | undefined;
}
