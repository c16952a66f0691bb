import { IGNORED_KEYWORD, type SchemaNode } from './checks/ignored-fields.ts';

/** One field a schema accepts: its path under `spec` (`virtualHost.routes[].options.timeout`; `*` for a map's values). */
export interface AcceptedField {
  readonly path: string;
  /** Marked accepted-but-not-applied (schema/common.ts `Ignored`): setting it gives a warning. */
  readonly ignored: boolean;
}

/**
 * Every field path a kind's spec schema accepts, down to its values (scalars, lists of scalars,
 * free-form values, empty objects whose presence is the setting). A schema unrolled for nesting
 * (`descriptors[].descriptors[]…`) counts once. For the "nothing accepted silently" test
 * (./honoured-fields.test.ts).
 */
export function acceptedFieldPaths(schema: unknown): AcceptedField[] {
  const out = new Map<string, AcceptedField>();
  const visit = (node: SchemaNode, path: string[]) => {
    const shapes = node.anyOf ?? [node];
    let inner = false;
    for (const shape of shapes) {
      if (shape.items) {
        inner = true;
        visit(shape.items, [...path.slice(0, -1), `${path[path.length - 1] ?? ''}[]`]);
      }
      for (const [key, child] of Object.entries(shape.properties ?? {})) {
        inner = true;
        const next = [...path, key];
        // An unrolled recursive schema repeats the same step: counted once.
        if (path.length >= 1 && path[path.length - 1] === key + '[]' && key !== '') continue;
        if (child[IGNORED_KEYWORD] !== undefined) out.set(next.join('.'), { path: next.join('.'), ignored: true });
        else visit(child, next);
      }
      for (const child of Object.values(shape.patternProperties ?? {})) {
        // A map of plain values is one setting (`labels`, `selector`); a map of objects has fields under `*`.
        if (!hasFields(child)) continue;
        inner = true;
        visit(child, [...path, '*']);
      }
    }
    if (!inner && path.length > 0) {
      const key = collapse(path).join('.');
      if (!out.has(key)) out.set(key, { path: key, ignored: false });
    }
  };
  visit(schema as SchemaNode, []);
  return [...out.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

function hasFields(node: SchemaNode): boolean {
  return (node.anyOf ?? [node]).some((shape) => (shape.properties && Object.keys(shape.properties).length > 0) || (shape.items !== undefined && hasFields(shape.items)) || (shape.patternProperties !== undefined && Object.values(shape.patternProperties).some(hasFields)));
}

/** `a.descriptors[].descriptors[].key` → `a.descriptors[].key`. */
function collapse(path: string[]): string[] {
  return path.filter((segment, i) => i === 0 || segment !== path[i - 1] || !segment.endsWith('[]'));
}
