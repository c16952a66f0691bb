import { ConfigCodes, type Diagnostic, type PathSegment } from '../diagnostic.ts';
import type { AnyResource } from '../resource.ts';
import type { CheckContext } from '../store.ts';
import { isCoreKind, KINDS } from '../schema/kinds.ts';

/** The schema keyword that marks a field accepted but not applied (schema/common.ts `Ignored`). */
export const IGNORED_KEYWORD = 'x-gatehouse-ignored';

/** The parts of a JSON schema the accepted-field walkers read. */
export interface SchemaNode {
  readonly properties?: Record<string, SchemaNode>;
  readonly patternProperties?: Record<string, SchemaNode>;
  readonly items?: SchemaNode;
  readonly anyOf?: readonly SchemaNode[];
  readonly [IGNORED_KEYWORD]?: string;
}

/** One field set in a resource that Gatehouse accepts and does not apply. */
export interface IgnoredField {
  readonly path: PathSegment[];
  readonly reason: string;
}

/**
 * Every field of `value` (at `path`) whose schema marks it accepted-but-not-applied, guided by the
 * schema (the value already passed it): fields, list items, map values and union branches.
 */
export function ignoredFieldsOf(value: unknown, schema: unknown, path: PathSegment[] = []): IgnoredField[] {
  const out: IgnoredField[] = [];
  const stack: { value: unknown; schema: SchemaNode; path: PathSegment[] }[] = [{ value, schema: schema as SchemaNode, path }];
  while (stack.length > 0) {
    const { value: v, schema: s, path: p } = stack.pop()!;
    // Most of a large resource (a 20,000-route table) has no such field below it: not walked.
    if (v === null || typeof v !== 'object' || !mayHoldIgnored(s)) continue;
    const shapes = s.anyOf ? s.anyOf : [s];
    if (Array.isArray(v)) {
      const items = shapes.find((x) => x.items)?.items;
      if (items) v.forEach((item, i) => stack.push({ value: item, schema: items, path: [...p, i] }));
      continue;
    }
    for (const [key, child] of Object.entries(v as Record<string, unknown>)) {
      const shape = shapes.find((x) => x.properties && Object.hasOwn(x.properties, key));
      const field = shape ? shape.properties![key]! : shapes.map((x) => x.patternProperties && Object.values(x.patternProperties)[0]).find((x) => x !== undefined);
      if (!field) continue;
      const reason = field[IGNORED_KEYWORD];
      if (reason !== undefined && shape) {
        out.push({ path: [...p, key], reason });
        continue;
      }
      stack.push({ value: child, schema: field, path: [...p, key] });
    }
  }
  return out.sort((a, b) => (a.path.join('.') < b.path.join('.') ? -1 : 1));
}

const holds = new WeakMap<SchemaNode, boolean>();

/** Whether a schema node has an ignored field anywhere below it (computed once per node; schemas are trees). */
function mayHoldIgnored(schema: SchemaNode): boolean {
  let known = holds.get(schema);
  if (known !== undefined) return known;
  holds.set(schema, false);
  const children = [...Object.values(schema.properties ?? {}), ...Object.values(schema.patternProperties ?? {}), ...(schema.items ? [schema.items] : []), ...(schema.anyOf ?? [])];
  known = children.some((c) => c[IGNORED_KEYWORD] !== undefined || mayHoldIgnored(c));
  holds.set(schema, known);
  return known;
}

const found = new WeakMap<AnyResource, IgnoredField[]>();

/** A warning for each field the resource sets that Gatehouse accepts and does not apply, naming it and why. */
export function checkIgnoredFields(resource: AnyResource, ctx: CheckContext): Diagnostic[] {
  if (isCoreKind(resource.kind)) return [];
  let fields = found.get(resource);
  if (!fields) found.set(resource, (fields = ignoredFieldsOf(resource.spec, KINDS[resource.kind].spec, ['spec'])));
  return fields.map((f) => ctx.at(f.path, ConfigCodes.IGNORED, `${String(f.path[f.path.length - 1])} is not applied: ${f.reason}`, 'warning'));
}
