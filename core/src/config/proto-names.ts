import type { PathSegment } from './diagnostic.ts';

/**
 * Gloo reads its resources with protojson, which takes a field by its JSON name (`retriableStatusCodes`)
 * or by its proto name (`retriable_status_codes`). Gatehouse's schemas use the JSON names; this
 * renames proto names to them before validation, guided by the schema: a key is renamed only where
 * the schema is a closed object that has the camelCase field, so map keys (labels, `resolutions`,
 * header maps, a plugin's `config`) are never touched. One place for every Gloo kind.
 */

/** protoc's json_name: each `_` dropped and the character after it upper-cased (`foo_bar_2` → `fooBar2`). */
export function jsonName(protoName: string): string {
  return protoName.replace(/_+([a-zA-Z0-9])/g, (_m, c: string) => c.toUpperCase());
}

/** A key given in both spellings (`prefix_rewrite` and `prefixRewrite`): at `path` (the proto name's). */
export interface ProtoNameConflict {
  readonly path: PathSegment[];
  readonly message: string;
}

interface SchemaNode {
  readonly properties?: Record<string, SchemaNode>;
  readonly patternProperties?: Record<string, SchemaNode>;
  readonly additionalProperties?: boolean | SchemaNode;
  readonly items?: SchemaNode;
  readonly anyOf?: readonly SchemaNode[];
}

/**
 * `value` with proto field names renamed to JSON names wherever `schema` has the JSON name (the
 * same object when nothing is renamed; `value` is never changed), and the keys given in both spellings.
 */
export function normalizeProtoNames(value: unknown, schema: unknown, path: PathSegment[] = []): { value: unknown; conflicts: ProtoNameConflict[] } {
  const conflicts: ProtoNameConflict[] = [];
  // Almost every resource uses JSON names only: a scan for "_" in keys, far cheaper than the walk, settles it.
  if (!hasUnderscoreKey(value)) return { value, conflicts };
  let at: Path | undefined;
  for (const segment of path) at = { segment, up: at };
  const out = walk(value, schema as SchemaNode, at, conflicts);
  return { value: out, conflicts };
}

/** A path as a linked list (walking allocates one node per step; arrays only for the rare conflict). */
interface Path {
  readonly segment: PathSegment;
  readonly up: Path | undefined;
}

function pathOf(path: Path | undefined): PathSegment[] {
  const out: PathSegment[] = [];
  for (let p = path; p; p = p.up) out.push(p.segment);
  return out.reverse();
}

/** Whether any object key in `value` contains `_` (iterative: no recursion depth, no allocation per key). */
function hasUnderscoreKey(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) if (node[i] !== null && typeof node[i] === 'object') stack.push(node[i]);
      continue;
    }
    for (const key in node) {
      if (key.includes('_')) return true;
      const child = (node as Record<string, unknown>)[key];
      if (child !== null && typeof child === 'object') stack.push(child);
    }
  }
  return false;
}

/** The object schemas a node may be: itself, or the object branches of its `anyOf`. */
function objectShapes(schema: SchemaNode): SchemaNode[] {
  if (schema.anyOf) return schema.anyOf.flatMap(objectShapes);
  return schema.properties || schema.patternProperties || typeof schema.additionalProperties === 'object' ? [schema] : [];
}

function walk(value: unknown, schema: SchemaNode | undefined, path: Path | undefined, conflicts: ProtoNameConflict[]): unknown {
  if (!schema || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    const items = schema.anyOf ? schema.anyOf.find((s) => s.items)?.items : schema.items;
    if (!items) return value;
    let copy: unknown[] | undefined;
    value.forEach((item, i) => {
      const next = walk(item, items, { segment: i, up: path }, conflicts);
      if (next !== item) (copy ??= [...value])[i] = next;
    });
    return copy ?? value;
  }
  const shapes = objectShapes(schema);
  if (shapes.length === 0) return value;
  const object = value as Record<string, unknown>;
  // Fields of every object branch (a union of closed objects accepts a field of any of them).
  const properties: Record<string, SchemaNode> = {};
  for (const shape of shapes) Object.assign(properties, shape.properties ?? {});
  const record = shapes.find((s) => s.patternProperties || typeof s.additionalProperties === 'object');
  const valueSchema = record ? (record.patternProperties ? Object.values(record.patternProperties)[0] : (record.additionalProperties as SchemaNode)) : undefined;
  let changed = false;
  const entries: [string, unknown][] = [];
  for (const [key, child] of Object.entries(object)) {
    let name = key;
    if (!Object.hasOwn(properties, key) && key.includes('_')) {
      const camel = jsonName(key);
      if (camel !== key && Object.hasOwn(properties, camel)) {
        if (Object.hasOwn(object, camel)) {
          conflicts.push({ path: [...pathOf(path), key], message: `"${key}" and "${camel}" are the same field (its proto and JSON names); give it once` });
          // Left out, so the schema does not report it again as unknown.
          changed = true;
          continue;
        } else {
          name = camel;
          changed = true;
        }
      }
    }
    const fieldSchema = Object.hasOwn(properties, name) ? properties[name] : valueSchema;
    const next = walk(child, fieldSchema, { segment: name, up: path }, conflicts);
    if (next !== child) changed = true;
    entries.push([name, next]);
  }
  return changed ? Object.fromEntries(entries) : value;
}
