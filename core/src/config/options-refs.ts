import { refKey, type AnyResource, type Resource } from './resource.ts';
import { RouteOptions, VirtualHostOptions, type RouteOptionsSpec, type RouteSpec, type VirtualHostOptionsSpec } from './schema/virtual-service.ts';

/**
 * Options shared by reference (Gloo's VirtualHostOption and RouteOption resources, named by
 * `optionsConfigRefs.delegateOptions`), merged with the inline options as Gloo merges them
 * (gateway translator: converter.go, virtual_service_translator.go; the "Delegate VirtualHost and
 * RouteTable options" guide): a field set inline wins; otherwise the first referenced resource
 * that sets it gives it, and later ones only fill fields still unset. The merge is shallow, per
 * top-level field (`headerManipulation` inline replaces a referenced one whole). A missing
 * resource contributes nothing (its reference is a warning on the referring resource).
 *
 * References inside a referenced resource's options (`extauth.configRef`, `headerSecretRef`, …)
 * resolve in that resource's namespace (SPEC 2.3: the namespace of the resource that holds
 * them): every `ResourceRef` without a namespace gets it when merged.
 */

/** Fields of `primary` that are set, then those of `secondary` it lacks (Gloo's ShallowMerge*Options). */
export function shallowMergeOptions<T extends object>(primary: T | undefined, secondary: T | undefined): T | undefined {
  if (!secondary) return primary;
  if (!primary) return secondary;
  const out: Record<string, unknown> = { ...(secondary as Record<string, unknown>) };
  for (const [key, value] of Object.entries(primary)) if (value !== undefined) out[key] = value;
  return out as T;
}

interface SchemaNode {
  readonly properties?: Record<string, SchemaNode>;
  readonly patternProperties?: Record<string, SchemaNode>;
  readonly items?: SchemaNode;
  readonly anyOf?: readonly SchemaNode[];
  readonly 'x-gatehouse-ref'?: boolean;
}

/** `value` with every resource reference the schema marks (schema/common.ts ResourceRef) given `namespace` when it has none. */
export function qualifyRefs<T>(value: T, schema: unknown, namespace: string): T {
  const walk = (v: unknown, s: SchemaNode | undefined): unknown => {
    if (!s || v === null || typeof v !== 'object') return v;
    const shapes = s.anyOf ?? [s];
    if (Array.isArray(v)) {
      const items = shapes.find((x) => x.items)?.items;
      if (!items) return v;
      let copy: unknown[] | undefined;
      v.forEach((item, i) => {
        const next = walk(item, items);
        if (next !== item) (copy ??= [...v])[i] = next;
      });
      return copy ?? v;
    }
    const object = v as Record<string, unknown>;
    if (shapes.some((x) => x['x-gatehouse-ref']) && typeof object.name === 'string' && object.namespace === undefined) return { ...object, namespace };
    let copy: Record<string, unknown> | undefined;
    for (const [key, child] of Object.entries(object)) {
      const field = shapes.find((x) => x.properties && Object.hasOwn(x.properties, key))?.properties?.[key] ?? shapes.map((x) => x.patternProperties && Object.values(x.patternProperties)[0]).find((x) => x !== undefined);
      const next = walk(child, field);
      if (next !== child) (copy ??= { ...object })[key] = next;
    }
    return copy ?? v;
  };
  return walk(value, schema as SchemaNode) as T;
}

/** Looks a served resource up by key (`Kind/namespace/name`). */
export type ResourceLookup = (key: string) => AnyResource | undefined;

/** The referenced resources' options, in reference order, qualified in their namespaces. */
function referenced<K extends 'VirtualHostOption' | 'RouteOption'>(kind: K, refs: readonly { name: string; namespace?: string | undefined }[] | undefined, fromNamespace: string, lookup: ResourceLookup): Resource<K>[] {
  const out: Resource<K>[] = [];
  for (const ref of refs ?? []) {
    const found = lookup(refKey(kind, ref, fromNamespace));
    if (found?.kind === kind) out.push(found as Resource<K>);
  }
  return out;
}

const qualified = new WeakMap<AnyResource, object | undefined>();

/** A referenced resource's options with their references qualified (once per resource version: resources are immutable). */
function optionsOf(resource: Resource<'VirtualHostOption'> | Resource<'RouteOption'>): object | undefined {
  if (qualified.has(resource)) return qualified.get(resource);
  const options = resource.spec.options;
  const out = options ? qualifyRefs(options, resource.kind === 'RouteOption' ? RouteOptions : VirtualHostOptions, resource.namespace) : undefined;
  qualified.set(resource, out);
  return out;
}

/** A route's effective options: its own, then its RouteOptions' (`fromNamespace`: the namespace of the resource holding the route). */
export function effectiveRouteOptions(route: RouteSpec, fromNamespace: string, lookup: ResourceLookup): RouteOptionsSpec | undefined {
  let options = route.options;
  for (const resource of referenced('RouteOption', route.optionsConfigRefs?.delegateOptions, fromNamespace, lookup)) {
    options = shallowMergeOptions(options, optionsOf(resource) as RouteOptionsSpec | undefined);
  }
  return options;
}

const hostOptions = new WeakMap<Resource<'VirtualService'>, { lookup: ResourceLookup; options: VirtualHostOptionsSpec | undefined }>();

/** A virtual host's effective options: the VirtualService's own, then its VirtualHostOptions'. */
export function effectiveVirtualHostOptions(vs: Resource<'VirtualService'>, lookup: ResourceLookup): VirtualHostOptionsSpec | undefined {
  const vh = vs.spec.virtualHost;
  if (!vh.optionsConfigRefs?.delegateOptions?.length) return vh.options;
  const cached = hostOptions.get(vs);
  if (cached && cached.lookup === lookup) return cached.options;
  let options = vh.options;
  for (const resource of referenced('VirtualHostOption', vh.optionsConfigRefs.delegateOptions, vs.namespace, lookup)) {
    options = shallowMergeOptions(options, optionsOf(resource) as VirtualHostOptionsSpec | undefined);
  }
  hostOptions.set(vs, { lookup, options });
  return options;
}

const lookups = new WeakMap<ReadonlyMap<string, AnyResource>, ResourceLookup>();

/** One lookup function per resource map (so results cached by lookup are shared per snapshot). */
export function lookupIn(resources: ReadonlyMap<string, AnyResource>): ResourceLookup {
  let lookup = lookups.get(resources);
  if (!lookup) lookups.set(resources, (lookup = (key) => resources.get(key)));
  return lookup;
}
