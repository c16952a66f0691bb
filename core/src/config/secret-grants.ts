/**
 * The tenancy boundary for Secrets (docs/tenancy.md): a resource reads Secrets of its own
 * namespace; a Secret of another namespace only when that Secret says so, and only when the
 * operator's global setting allows such grants at all. Kubernetes' namespace is the unit of
 * trust; the annotation lives on the Secret, so only who may edit the Secret's namespace can
 * hand its values to another one (as with Gateway API's ReferenceGrant, which lives in the
 * namespace of the thing referenced).
 */

/** On a Secret: the namespaces (comma-separated, or `*`) whose resources may reference it. */
export const SECRET_REFERENCE_ANNOTATION = 'gatehouse.dev/allow-references-from';

/**
 * `--cross-namespace-secrets`: `granted` (default) honours {@link SECRET_REFERENCE_ANNOTATION};
 * `none` refuses every reference to a Secret of another namespace; `any` allows them all (one
 * team owns the whole cluster or config directory; the behaviour before tenancy existed).
 */
export type CrossNamespaceSecrets = 'granted' | 'none' | 'any';
export const CROSS_NAMESPACE_SECRETS_MODES: readonly CrossNamespaceSecrets[] = ['granted', 'none', 'any'];

/** The namespaces a Secret may be referenced from besides its own, under `mode`. */
export function referableFrom(annotations: unknown, mode: CrossNamespaceSecrets): string[] {
  if (mode === 'any') return ['*'];
  if (mode === 'none' || !annotations || typeof annotations !== 'object') return [];
  const value = (annotations as Record<string, unknown>)[SECRET_REFERENCE_ANNOTATION];
  if (typeof value !== 'string') return [];
  return [...new Set(value.split(',').map((ns) => ns.trim()).filter((ns) => ns.length > 0))].sort();
}

/** True when a resource of `fromNamespace` may read `secret`. */
export function secretReadableFrom(secret: { readonly namespace: string; readonly referableFrom?: readonly string[] | undefined }, fromNamespace: string): boolean {
  if (secret.namespace === fromNamespace) return true;
  const allowed = secret.referableFrom ?? [];
  return allowed.includes('*') || allowed.includes(fromNamespace);
}

/** The message of a refused cross-namespace reference (the same whether or not the Secret exists: no existence oracle). */
export function crossNamespaceMessage(secret: { namespace: string; name: string }, fromNamespace: string): string {
  return `references Secret ${secret.namespace}/${secret.name} in another namespace, which does not exist or does not allow references from namespace "${fromNamespace}" (the Secret needs the annotation ${SECRET_REFERENCE_ANNOTATION}: "${fromNamespace}", and --cross-namespace-secrets must not be none; see docs/tenancy.md)`;
}
