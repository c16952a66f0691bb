/**
 * Converts a TypeBox (JSON Schema) node into a Kubernetes structural schema for an
 * apiextensions.k8s.io/v1 CRD ("Specifying a structural schema", k8s.io docs):
 * - every field and array item has a `type`, or `x-kubernetes-preserve-unknown-fields: true`
 *   where the config schema accepts any value (`Type.Unknown()`);
 * - maps (`patternProperties` from `Type.Record`) become `additionalProperties`;
 * - `additionalProperties: false` is dropped (the API server prunes unknown fields instead);
 * - `const` becomes a one-value `enum`;
 * - inside `oneOf`/`anyOf`/`allOf`/`not` only value validations stay (`required`, ...), which keeps
 *   the schemas' exactly-one-of rules; `x-gatehouse-*` and other non-Kubernetes keys are removed.
 */
export function toStructural(schema: unknown): Record<string, unknown> {
  return convert(schema as Node, false);
}

type Node = Record<string, unknown>;

/** A schema option: the CRD accepts any value there (the config schema still validates it at load). */
export const CRD_OPAQUE = 'x-gatehouse-crd-opaque';

/** Keys kept on a node as they are (JSONSchemaProps value validations and docs). */
const VALUE_KEYS = ['description', 'format', 'maximum', 'exclusiveMaximum', 'minimum', 'exclusiveMinimum', 'maxLength', 'minLength', 'pattern', 'maxItems', 'minItems', 'multipleOf', 'enum', 'maxProperties', 'minProperties', 'required'] as const;
const JUNCTORS = ['oneOf', 'anyOf', 'allOf'] as const;
const TYPES = new Set(['object', 'array', 'string', 'integer', 'number', 'boolean']);

function convert(node: Node | undefined, inJunctor: boolean): Node {
  if (!node || typeof node !== 'object' || Object.keys(node).length === 0) {
    return inJunctor ? {} : { 'x-kubernetes-preserve-unknown-fields': true };
  }
  // Large option trees Gatehouse validates at load (transformations, rate-limit actions) stay
  // opaque in the CRD: inlined they made the VirtualService CRD ~900 KB, past what
  // `kubectl apply` can annotate.
  if (node[CRD_OPAQUE] === true) return inJunctor ? {} : withDescription({ 'x-kubernetes-preserve-unknown-fields': true }, node);
  const out: Node = {};
  const type = node.type;
  const typed = typeof type === 'string' && TYPES.has(type);
  if (!inJunctor) {
    if (typed) out.type = type;
    else {
      // A union of types (or no type at all) has no structural form: accept any value.
      return withDescription({ 'x-kubernetes-preserve-unknown-fields': true }, node);
    }
  }
  for (const key of VALUE_KEYS) {
    if (node[key] === undefined) continue;
    if (inJunctor && key === 'description') continue;
    out[key] = structuredClone(node[key]);
  }
  if (node.const !== undefined) out.enum = [structuredClone(node.const)];
  // An empty `properties` is left out: the API server drops it when storing the CRD, and the
  // stored object then differs from the applied one for ever (server-side apply conflicts with
  // Helm's field manager; `kubectl diff` never settles). Without it the object is as strict:
  // no property is declared, so the API server prunes any it is given.
  if (node.properties && typeof node.properties === 'object' && Object.keys(node.properties).length > 0) {
    out.properties = Object.fromEntries(Object.entries(node.properties as Record<string, Node>).map(([name, child]) => [name, convert(child, inJunctor)]));
  }
  if (!inJunctor) {
    const map = mapValueSchema(node);
    if (map !== undefined && !out.properties) out.additionalProperties = convert(map, false);
    if (type === 'object' && !out.properties && map === undefined && node.additionalProperties !== false) {
      out['x-kubernetes-preserve-unknown-fields'] = true;
    }
    if (type === 'array') out.items = convert(node.items as Node | undefined, false);
  } else if (node.items && typeof node.items === 'object') {
    out.items = convert(node.items as Node, true);
  }
  for (const junctor of JUNCTORS) {
    const branches = node[junctor];
    if (Array.isArray(branches)) out[junctor] = branches.map((b) => convert(b as Node, true));
  }
  if (node.not && typeof node.not === 'object') out.not = convert(node.not as Node, true);
  return out;
}

/** The value schema of a map node (`Type.Record` → `patternProperties: {"^.*$": S}`, or `additionalProperties: S`). */
function mapValueSchema(node: Node): Node | undefined {
  const patterns = node.patternProperties as Record<string, Node> | undefined;
  if (patterns && typeof patterns === 'object') {
    const values = Object.values(patterns);
    // Several key patterns cannot be expressed; any value is then accepted for any key.
    return values.length === 1 ? values[0] : {};
  }
  const additional = node.additionalProperties;
  if (additional && typeof additional === 'object') return additional as Node;
  if (additional === true) return {};
  return undefined;
}

function withDescription(out: Node, node: Node): Node {
  if (typeof node.description === 'string') out.description = node.description;
  return out;
}
