import { readFileSync, statSync } from 'node:fs';
import { dirname, resolve as resolvePath } from 'node:path';
import { makeExecutableSchema } from '@graphql-tools/schema';
import {
  GraphQLError,
  Kind,
  parse,
  validateSchema,
  type DocumentNode,
  type FieldDefinitionNode,
  type GraphQLFieldResolver,
  type GraphQLSchema,
} from 'graphql';
import type protobuf from 'protobufjs';
import type { Resource } from '../../config/resource.ts';
import type { ExecutableSchemaSpec, ResolutionSpec } from '../../config/schema/graphql-api.ts';
import { GraphQLConfigCodes, type Problem } from './errors.ts';
import { rootFromDescriptorSet, rootFromProtoSources } from '../grpc/descriptors.ts';
import { compileGrpc, type CompiledGrpc } from '../resolvers/grpc.ts';
import type { Segment } from './path.ts';
import { compileStitched } from './stitch.ts';
import { compileRest, type CompiledRest } from '../resolvers/rest.ts';
import type { OperationContext } from '../resolvers/types.ts';
import { compileRemote, type CompiledRemote } from '../execute/remote.ts';

/** A resolution with its templates parsed, not yet bound to an upstream. */
export type CompiledResolution =
  | { readonly kind: 'rest'; readonly spec: ResolutionSpec; readonly rest: CompiledRest }
  | { readonly kind: 'grpc'; readonly spec: ResolutionSpec; readonly grpc: CompiledGrpc }
  | { readonly kind: 'mock'; readonly spec: ResolutionSpec };

/**
 * A GraphQLApi compiled once per spec version: the executable schema (its `@resolve` fields
 * dispatch to the resolvers bound in the operation context) and the parsed resolutions.
 * Immutable and independent of upstreams, so the load-time check and every endpoint share it.
 */
export interface CompiledApi {
  readonly version: string;
  /** Undefined when the schema does not build (see `problems`). */
  readonly schema: GraphQLSchema | undefined;
  readonly resolutions: ReadonlyMap<string, CompiledResolution>;
  /** `executor.remote`, parsed; undefined for a local executor. */
  readonly remote: CompiledRemote | undefined;
  /**
   * A stitched API's subschemas, in order: the compiled API each stitches (the endpoint binds
   * their resolutions to upstreams and hands them to the executors through the context).
   */
  readonly subschemas?: readonly { readonly ref: { name: string; namespace: string }; readonly api: CompiledApi }[];
  readonly problems: readonly Problem[];
  /** True when some problem is an error: the resource is rejected. */
  readonly rejected: boolean;
}

const SCHEMA_PATH = ['spec', 'executableSchema', 'schemaDefinition'];
const LOCAL_PATH = ['spec', 'executableSchema', 'executor', 'local'];
const RESOLVE_DIRECTIVE = 'directive @resolve(name: String!) on FIELD_DEFINITION';

const cache = new Map<string, CompiledApi>();
const CACHE_LIMIT = 256;

/** What a GraphQLApi's descriptor registry may read besides its spec. */
export interface DescriptorInputs {
  /** The manifest's file: a relative `protoDescriptor` path is resolved from its directory. */
  readonly file?: string;
  /** ConfigMaps (`protoRefsList`), as the config snapshot serves them. */
  readonly configMap?: (ref: { name: string; namespace?: string }) => Pick<Resource<'ConfigMap'>, 'version' | 'spec'> | undefined;
  /** GraphQLApis (`stitchedSchema.subschemas`), as the config snapshot serves them. */
  readonly api?: (ref: { name: string; namespace?: string }) => Resource<'GraphQLApi'> | undefined;
}

/**
 * The compiled form of a GraphQLApi, cached by its spec version (the content hash) and the
 * versions of what its descriptor registry reads (the descriptor file's size and mtime, the
 * ConfigMaps' versions), so a changed input compiles again.
 */
export function compileApi(resource: Pick<Resource<'GraphQLApi'>, 'version' | 'spec'>, inputs: DescriptorInputs = {}): CompiledApi {
  const stitched = resource.spec.stitchedSchema;
  if (stitched) {
    const subs = stitched.subschemas.map((sub) => inputs.api?.(sub));
    const key = `${resource.version}|${subs.map((sub) => (sub ? `${sub.key}@${sub.version}` : '-')).join('|')}`;
    const hit = cache.get(key);
    if (hit) return hit;
    // compileApi is handed over (not imported by ./stitch.ts): the two modules would import each other.
    const compiled = compileStitched(resource.version, stitched, subs, inputs, compileApi);
    cache.set(key, compiled);
    if (cache.size > CACHE_LIMIT) cache.delete(cache.keys().next().value!);
    return compiled;
  }
  const registry = resource.spec.executableSchema!.grpcDescriptorRegistry;
  const descriptorFile = registry?.protoDescriptor !== undefined ? resolvePath(inputs.file ? dirname(inputs.file) : process.cwd(), registry.protoDescriptor) : undefined;
  let key = resource.version;
  if (descriptorFile) {
    const stat = statSync(descriptorFile, { throwIfNoEntry: false });
    key += `|${descriptorFile}@${stat ? `${stat.size}:${stat.mtimeMs}` : '-'}`;
  }
  for (const ref of registry?.protoRefsList?.protoRefs ?? []) key += `|${ref.namespace ?? ''}/${ref.name}@${inputs.configMap?.(ref)?.version ?? '-'}`;
  let compiled = cache.get(key);
  if (compiled) {
    // Refresh its place: the cache drops the least recently used entry first.
    cache.delete(key);
  } else {
    compiled = compile(resource.version, resource.spec.executableSchema!, { descriptorFile, configMap: inputs.configMap });
  }
  cache.set(key, compiled);
  if (cache.size > CACHE_LIMIT) cache.delete(cache.keys().next().value!);
  return compiled;
}

const REGISTRY_PATH = ['spec', 'executableSchema', 'grpcDescriptorRegistry'];

/** The descriptor registry's protobuf root, from whichever of its three sources is set; throws with a plain message and the field. */
function registryRoot(registry: NonNullable<ExecutableSchemaSpec['grpcDescriptorRegistry']>, descriptorFile: string | undefined, configMap: DescriptorInputs['configMap']): protobuf.Root {
  if (registry.protoDescriptorBin !== undefined) return rootFromDescriptorSet(registry.protoDescriptorBin);
  if (descriptorFile !== undefined) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(descriptorFile);
    } catch (e) {
      throw new Error(`cannot read ${descriptorFile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    return rootFromDescriptorSet(bytes.toString('base64'));
  }
  const sources: { name: string; text: string }[] = [];
  for (const ref of registry.protoRefsList!.protoRefs) {
    // A missing ConfigMap is reported by the reference check.
    const found = configMap?.(ref);
    if (!found) throw new Error(`ConfigMap ${ref.namespace ?? ''}${ref.namespace ? '/' : ''}${ref.name} is not served`);
    for (const [name, text] of Object.entries(found.spec.data)) sources.push({ name: `${ref.name}/${name}`, text });
  }
  return rootFromProtoSources(sources);
}

function compile(version: string, executable: ExecutableSchemaSpec, inputs: { descriptorFile?: string | undefined; configMap?: DescriptorInputs['configMap'] } = {}): CompiledApi {
  const problems: Problem[] = [];
  const error = (path: readonly (string | number)[], code: string, message: string) => problems.push({ path, code, message, severity: 'error' });
  const local = executable.executor.local;

  let document: DocumentNode | undefined;
  try {
    document = parse(executable.schemaDefinition, { noLocation: false });
  } catch (e) {
    error(SCHEMA_PATH, GraphQLConfigCodes.SCHEMA, `the SDL does not parse: ${describeGraphQLError(e as GraphQLError)}`);
  }

  // Resolutions first: their problems are reported even when the SDL is broken.
  let root: protobuf.Root | undefined;
  const registry = executable.grpcDescriptorRegistry;
  if (registry) {
    try {
      root = registryRoot(registry, inputs.descriptorFile, inputs.configMap);
    } catch (e) {
      const field = registry.protoDescriptorBin !== undefined ? 'protoDescriptorBin' : registry.protoDescriptor !== undefined ? 'protoDescriptor' : 'protoRefsList';
      error([...REGISTRY_PATH, field], GraphQLConfigCodes.BAD_DESCRIPTOR, (e as Error).message);
    }
  }
  const resolutions = new Map<string, CompiledResolution>();
  for (const [key, resolution] of Object.entries(local?.resolutions ?? {})) {
    const at = [...LOCAL_PATH, 'resolutions', key];
    if (resolution.restResolver) {
      const rest = compileRest(resolution.restResolver, [...at, 'restResolver'], problems);
      if (rest) resolutions.set(key, { kind: 'rest', spec: resolution, rest });
    } else if (resolution.grpcResolver) {
      const grpc = executable.grpcDescriptorRegistry && !root ? undefined : compileGrpc(resolution.grpcResolver, root, [...at, 'grpcResolver'], problems);
      if (grpc) resolutions.set(key, { kind: 'grpc', spec: resolution, grpc });
    } else if (resolution.mockResolver) {
      resolutions.set(key, { kind: 'mock', spec: resolution });
    }
  }

  const remote = executable.executor.remote ? compileRemote(executable.executor.remote, problems) : undefined;

  let schema: GraphQLSchema | undefined;
  if (document) {
    const hasDirective = document.definitions.some((d) => d.kind === Kind.DIRECTIVE_DEFINITION && d.name.value === 'resolve');
    const typeDefs = hasDirective ? document : { ...document, definitions: [...document.definitions, ...parse(RESOLVE_DIRECTIVE).definitions] };
    const resolvers: Record<string, Record<string, GraphQLFieldResolver<unknown, OperationContext>>> = {};
    const used = new Set<string>();
    const fieldsOf = objectFields(document);
    for (const definition of document.definitions) {
      if (definition.kind !== Kind.OBJECT_TYPE_DEFINITION && definition.kind !== Kind.OBJECT_TYPE_EXTENSION) continue;
      for (const field of definition.fields ?? []) {
        const key = resolveName(field);
        if (key === undefined) continue;
        const where = `${definition.name.value}.${field.name.value} (SDL line ${field.loc?.startToken.line ?? '?'})`;
        if (local === undefined) {
          problems.push({ path: SCHEMA_PATH, code: GraphQLConfigCodes.IGNORED, message: `${where}: @resolve is ignored by the remote executor`, severity: 'warning' });
          continue;
        }
        if (key === null) {
          error(SCHEMA_PATH, GraphQLConfigCodes.UNKNOWN_RESOLVER, `${where}: @resolve needs a string "name" argument`);
          continue;
        }
        used.add(key);
        if (!local.resolutions?.[key]) {
          const known = Object.keys(local.resolutions ?? {});
          error(SCHEMA_PATH, GraphQLConfigCodes.UNKNOWN_RESOLVER, `${where}: @resolve(name: "${key}") names no entry of executor.local.resolutions; ${known.length ? `defined: ${known.map((k) => `"${k}"`).join(', ')}` : 'none is defined'}`);
          continue;
        }
        (resolvers[definition.name.value] ??= {})[field.name.value] = dispatch(key);
        const compiled = resolutions.get(key);
        if (compiled?.kind === 'rest') checkRestPaths(compiled.rest, definition.name.value, field, fieldsOf, [...LOCAL_PATH, 'resolutions', key, 'restResolver'], problems);
      }
    }
    for (const key of Object.keys(local?.resolutions ?? {})) {
      if (!used.has(key)) {
        problems.push({ path: [...LOCAL_PATH, 'resolutions', key], code: GraphQLConfigCodes.UNUSED_RESOLVER, message: `no field uses this resolution; bind one with @resolve(name: "${key}")`, severity: 'warning' });
      }
    }
    try {
      const built = makeExecutableSchema({ typeDefs, resolvers, resolverValidationOptions: { requireResolversToMatchSchema: 'ignore' } });
      const invalid = built.getQueryType() ? validateSchema(built) : [];
      if (!built.getQueryType()) {
        error(SCHEMA_PATH, GraphQLConfigCodes.NO_QUERY, 'the schema has no Query type; add "type Query { ... }"');
      } else if (invalid.length > 0) {
        for (const e of invalid) error(SCHEMA_PATH, GraphQLConfigCodes.SCHEMA, `invalid schema: ${describeGraphQLError(e)}`);
      } else {
        schema = built;
      }
    } catch (e) {
      error(SCHEMA_PATH, GraphQLConfigCodes.SCHEMA, `invalid schema: ${e instanceof GraphQLError ? describeGraphQLError(e) : (e as Error).message}`);
    }
  }
  const rejected = problems.some((p) => p.severity === 'error');
  return Object.freeze({ version, schema: rejected ? undefined : schema, resolutions, remote, problems, rejected });
}

/** Field names of every object type of the SDL (definitions and extensions together). */
function objectFields(document: DocumentNode): ReadonlyMap<string, ReadonlySet<string>> {
  const out = new Map<string, Set<string>>();
  for (const d of document.definitions) {
    if (d.kind !== Kind.OBJECT_TYPE_DEFINITION && d.kind !== Kind.OBJECT_TYPE_EXTENSION) continue;
    const fields = out.get(d.name.value) ?? new Set<string>();
    for (const f of d.fields ?? []) fields.add(f.name.value);
    out.set(d.name.value, fields);
  }
  return out;
}

/**
 * Warns about a restResolver's paths that can only resolve to nothing for the field it serves
 * (Gloo returns null for them silently): `{$args.x}` for an argument the field does not
 * declare, `{$parent…}` on a root field (no parent), and setters for fields the result type
 * lacks. `{$parent.x}` for a field the parent TYPE lacks is fine: the parent is the upstream's
 * JSON, which holds more than the schema shows (the docs' `{$parent.companyId}`; issue 25).
 */
function checkRestPaths(rest: CompiledRest, typeName: string, field: FieldDefinitionNode, fieldsOf: ReadonlyMap<string, ReadonlySet<string>>, at: readonly (string | number)[], problems: Problem[]): void {
  const where = `${typeName}.${field.name.value}`;
  const warn = (path: readonly (string | number)[], message: string) => problems.push({ path: [...at, ...path], code: GraphQLConfigCodes.EMPTY_PATH, message: `${message}: it always resolves to nothing (null) for ${where}`, severity: 'warning' });
  const args = new Set((field.arguments ?? []).map((a) => a.name.value));
  const root = typeName === 'Query' || typeName === 'Mutation' || typeName === 'Subscription';
  const check = (template: { references: readonly { source: string; path: readonly Segment[] }[] }, path: readonly (string | number)[]) => {
    for (const ref of template.references) {
      const first = ref.path[0];
      const key = first && 'key' in first ? first.key : undefined;
      if (ref.source === 'args' && key !== undefined && !args.has(key)) warn(path, `{$args.${key}} names an argument the field does not declare (it has: ${[...args].join(', ') || 'none'})`);
      if (ref.source === 'parent' && root) warn(path, `{$parent…} on a root field, which has no parent object`);
    }
  };
  check(rest.path, ['request', 'headers', ':path']);
  for (const [name, t] of rest.headers) check(t, ['request', 'headers', name]);
  for (const [name, t] of rest.queryParams) check(t, ['request', 'queryParams', name]);
  let type = field.type;
  while (type.kind !== Kind.NAMED_TYPE) type = type.type;
  const resultFields = fieldsOf.get(type.name.value);
  for (const [name, t] of rest.setters) {
    check(t, ['response', 'setters', name]);
    if (resultFields && !resultFields.has(name)) warn(['response', 'setters', name], `sets "${name}", a field type ${type.name.value} does not have`);
  }
}

/** The `name` of a field's `@resolve`; null when malformed, undefined when absent. */
function resolveName(field: FieldDefinitionNode): string | null | undefined {
  const directive = field.directives?.find((d) => d.name.value === 'resolve');
  if (!directive) return undefined;
  const arg = directive.arguments?.find((a) => a.name.value === 'name');
  return arg?.value.kind === Kind.STRING ? arg.value.value : null;
}

/** A field resolver that calls the resolution bound to this endpoint (through the operation context). */
function dispatch(key: string): GraphQLFieldResolver<unknown, OperationContext> {
  return (parent, args, ctx) => ctx.resolvers[key]!(parent, args, ctx);
}

function describeGraphQLError(e: GraphQLError): string {
  const where = e.locations?.[0];
  return where ? `${e.message} (SDL line ${where.line}, column ${where.column})` : e.message;
}
