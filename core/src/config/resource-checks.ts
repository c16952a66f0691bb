// The loaders of every subsystem's load-time checks are in ../resource-checks.ts (config/ imports
// no other subsystem, not even lazily); this module keeps what the loader itself needs.

/** Kinds named by a set of documents (whatever their validity). */
export function kindsOf(documents: readonly { value: unknown }[]): Set<string> {
  const kinds = new Set<string>();
  for (const d of documents) {
    const kind = (d.value as { kind?: unknown } | null)?.kind;
    if (typeof kind === 'string') kinds.add(kind);
  }
  return kinds;
}
