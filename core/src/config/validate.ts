import { createHash } from 'node:crypto';
import { referableFrom, type CrossNamespaceSecrets } from './secret-grants.ts';
import Schema from 'typebox/schema';
import { ConfigCodes, formatPath, type Diagnostic, type PathSegment } from './diagnostic.ts';
import type { ManifestDocument } from './manifest.ts';
import { DEFAULT_NAMESPACE, describeResource, deepFreeze, resourceKey, type AnyResource } from './resource.ts';
import { KINDS, KIND_NAMES, acceptedApiVersions, isCoreKind, manifestSchema, type Kind } from './schema/kinds.ts';
import { normalizeProtoNames } from './proto-names.ts';
import { MAX_SECRET_BYTES, type SecretSpec } from './schema/secret.ts';
import { MAX_CONFIG_MAP_BYTES, type ConfigMapSpec } from './schema/config-map.ts';

/** Compiled schema checks by kind, compiled on first use (compiling all of them cost ~0.4 s and memory at every start). */
const validators = new Map<Kind, { schema: unknown; check: ReturnType<typeof Schema.Compile> }>();

function validatorOf(kind: Kind): { schema: unknown; check: ReturnType<typeof Schema.Compile> } {
  let validator = validators.get(kind);
  if (!validator) {
    const schema = manifestSchema(kind);
    validators.set(kind, (validator = { schema, check: Schema.Compile(schema) }));
  }
  return validator;
}

/** A schema problem, located by field path (lines are found by the caller, which has the document). */
export interface SchemaProblem {
  readonly path: PathSegment[];
  readonly code: string;
  readonly message: string;
}

/**
 * The half of validation that depends on the document alone, not on gateway settings: proto
 * field names renamed, the kind's schema checked, the spec hashed. The parse worker computes it
 * for large files (./source/parse-worker.ts), so a 20,000-route reload does not spend it on the event loop.
 */
export interface SchemaVerdict {
  /** The document, proto field names renamed (the same object when nothing was renamed). */
  readonly value: Record<string, unknown>;
  readonly problems: readonly SchemaProblem[];
  /** Content hash of the spec: set when there are no problems and the spec is kept as written (not Secrets and ConfigMaps). */
  readonly version?: string | undefined;
}

/** {@link SchemaVerdict} of one document of a known kind. */
export function schemaVerdict(kind: Kind, value: Record<string, unknown>): SchemaVerdict {
  const problems: SchemaProblem[] = [];
  // Gloo's protojson takes proto field names too (`retriable_status_codes`): renamed here, once, for every kind.
  let normalized: Record<string, unknown> = value;
  if (!isCoreKind(kind) && value.spec !== null && typeof value.spec === 'object') {
    const renamed = normalizeProtoNames(value.spec, KINDS[kind].spec, ['spec']);
    for (const c of renamed.conflicts) problems.push({ path: c.path, code: ConfigCodes.SCHEMA, message: c.message });
    if (renamed.value !== value.spec) normalized = { ...value, spec: renamed.value };
  }
  const { schema, check } = validatorOf(kind);
  if (!check.Check(normalized)) {
    const [, errors] = check.Errors(normalized);
    problems.push(...explainSchemaErrors(schema, errors));
  }
  const keepsSpec = kind !== 'Secret' && kind !== 'ConfigMap';
  return { value: normalized, problems, version: problems.length === 0 && keepsSpec ? specVersion(normalized.spec) : undefined };
}

/** The content hash of a spec (key order does not count). */
function specVersion(spec: unknown): string {
  return createHash('sha256').update(stableJson(spec)).digest('hex').slice(0, 16);
}

export interface ValidationResult {
  resource?: AnyResource;
  /** `Kind/namespace/name` when the document names itself, even if it is invalid. */
  key?: string;
  diagnostics: Diagnostic[];
}

/**
 * Checks one document against its kind's schema (unknown fields are errors) and turns it
 * into a {@link Resource}. Cross-resource checks (refs, duplicates, conflicts) happen in the store.
 */
export function validateDocument(doc: ManifestDocument, apiGroupDomain: string, crossNamespaceSecrets: CrossNamespaceSecrets = 'granted'): ValidationResult {
  const at = (path: PathSegment[], code: string, message: string, resource?: string): Diagnostic => ({
    code,
    severity: 'error',
    message,
    file: doc.file,
    line: doc.lineOf(path),
    ...(resource ? { resource } : {}),
    ...(path.length ? { path: formatPath(path) } : {}),
  });
  const value = doc.value as Record<string, unknown> | null;
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    return { diagnostics: [at([], ConfigCodes.NOT_A_RESOURCE, 'a manifest must be an object with apiVersion, kind, metadata and spec')] };
  }
  const kind = value.kind;
  if (typeof kind !== 'string' || !(kind in KINDS)) {
    return {
      diagnostics: [at(['kind'], ConfigCodes.UNKNOWN_KIND, `unknown kind ${JSON.stringify(kind)}; expected one of ${KIND_NAMES.join(', ')}`)],
    };
  }
  const metadata = (value.metadata ?? {}) as Record<string, unknown>;
  const name = typeof metadata.name === 'string' ? metadata.name : '<unnamed>';
  const namespace = typeof metadata.namespace === 'string' ? metadata.namespace : DEFAULT_NAMESPACE;
  const label = describeResource({ kind, namespace, name });
  const diagnostics: Diagnostic[] = [];
  // Refused by its source (too large or too deep): rejected as such, its content never validated.
  if (doc.refused !== undefined) {
    return { ...(typeof metadata.name === 'string' ? { key: resourceKey(kind as Kind, namespace, name) } : {}), diagnostics: [at([], ConfigCodes.LIMITS, doc.refused, label)] };
  }

  const versions = acceptedApiVersions(kind as Kind, apiGroupDomain);
  if (!versions.includes(value.apiVersion as string)) {
    diagnostics.push(at(['apiVersion'], ConfigCodes.API_VERSION, `apiVersion ${JSON.stringify(value.apiVersion)} is not served for ${kind}; use ${versions.join(' or ')}`, label));
  }
  // Computed by the parse worker for large files; here otherwise.
  const verdict = doc.verdict ?? schemaVerdict(kind as Kind, value);
  for (const p of verdict.problems) diagnostics.push(at(p.path, p.code, p.message, label));
  const normalized = verdict.value;
  const key = typeof metadata.name === 'string' ? resourceKey(kind as Kind, namespace, name) : undefined;
  if (diagnostics.length > 0) return { ...(key ? { key } : {}), diagnostics: dedupe(diagnostics) };

  const raw: Record<string, unknown> = normalized;
  let spec = raw.spec as object;
  if (kind === 'Secret') {
    const secret = secretSpecOf(raw, crossNamespaceSecrets);
    if (typeof secret === 'string') return { ...(key ? { key } : {}), diagnostics: [at(['data'], ConfigCodes.SCHEMA, secret, label)] };
    spec = secret;
  } else if (kind === 'ConfigMap') {
    const configMap = configMapSpecOf(raw);
    if (typeof configMap === 'string') return { ...(key ? { key } : {}), diagnostics: [at(['data'], ConfigCodes.SCHEMA, configMap, label)] };
    spec = configMap;
  }
  const resource = deepFreeze({
    kind,
    apiVersion: value.apiVersion as string,
    name,
    namespace,
    key,
    version: verdict.version ?? specVersion(spec),
    labels: (metadata.labels ?? {}) as Record<string, string>,
    spec,
    source: { file: doc.file, line: doc.line, index: doc.index },
  }) as AnyResource;
  return { resource, key, diagnostics: [] };
}

/**
 * A Secret's values: `data` decoded from base64, `stringData` merged over it (Kubernetes'
 * rule), as strings (UTF-8). A message instead when it is over Kubernetes' 1 MiB limit.
 */
function secretSpecOf(value: Record<string, unknown>, crossNamespaceSecrets: CrossNamespaceSecrets): SecretSpec | string {
  const data: Record<string, string> = {};
  let size = 0;
  for (const [name, encoded] of Object.entries((value.data ?? {}) as Record<string, string>)) {
    const bytes = Buffer.from(encoded, 'base64');
    size += bytes.length;
    data[name] = bytes.toString('utf8');
  }
  for (const [name, text] of Object.entries((value.stringData ?? {}) as Record<string, string>)) {
    size += Buffer.byteLength(text);
    data[name] = text;
  }
  if (size > MAX_SECRET_BYTES) return `the Secret holds ${size} bytes; at most ${MAX_SECRET_BYTES} (Kubernetes' limit)`;
  const from = referableFrom((value.metadata as { annotations?: unknown } | undefined)?.annotations, crossNamespaceSecrets);
  return { type: typeof value.type === 'string' ? value.type : 'Opaque', data, ...(from.length > 0 ? { referableFrom: from } : {}) };
}

/** A ConfigMap's values: `data` as is, `binaryData` decoded (UTF-8); a message when over Kubernetes' 1 MiB limit. */
function configMapSpecOf(value: Record<string, unknown>): ConfigMapSpec | string {
  const data: Record<string, string> = { ...((value.data ?? {}) as Record<string, string>) };
  for (const [name, encoded] of Object.entries((value.binaryData ?? {}) as Record<string, string>)) {
    if (Object.hasOwn(data, name)) return `key "${name}" is in both data and binaryData`;
    data[name] = Buffer.from(encoded, 'base64').toString('utf8');
  }
  const size = Object.values(data).reduce((sum, text) => sum + Buffer.byteLength(text), 0);
  if (size > MAX_CONFIG_MAP_BYTES) return `the ConfigMap holds ${size} bytes; at most ${MAX_CONFIG_MAP_BYTES} (Kubernetes' limit)`;
  return { data };
}

interface SchemaError {
  keyword: string;
  schemaPath: string;
  instancePath: string;
  params: Record<string, unknown>;
  message: string;
}

/** Turns raw JSON Schema errors into one message per problem, named in the user's terms. */
function explainSchemaErrors(rootSchema: unknown, errors: readonly SchemaError[]): { path: PathSegment[]; code: string; message: string }[] {
  const out: { path: PathSegment[]; code: string; message: string }[] = [];
  const handledCombinators = new Set<string>();
  for (const error of errors) {
    const path = pointerToPath(error.instancePath);
    // Errors from inside a oneOf/anyOf/not branch are noise; the combinator's own error speaks for them.
    const combinator = /^(.*?)\/(oneOf|anyOf|not)(\/|$)/.exec(error.schemaPath);
    if (combinator) {
      const owner = resolvePointer(rootSchema, combinator[1]!) as Record<string, unknown> | undefined;
      const id = `${error.instancePath}|${combinator[1]}`;
      if (handledCombinators.has(id)) continue;
      handledCombinators.add(id);
      out.push({ path, code: ConfigCodes.SCHEMA, message: combinatorMessage(owner) ?? error.message });
      continue;
    }
    switch (error.keyword) {
      case 'additionalProperties':
        for (const field of (error.params.additionalProperties as string[]) ?? []) {
          out.push({ path: [...path, field], code: ConfigCodes.UNKNOWN_FIELD, message: `unknown field "${field}"` });
        }
        break;
      case 'boolean':
        // `additionalProperties: false` reports the same field again as a false schema.
        break;
      case 'required':
        for (const field of (error.params.requiredProperties as string[]) ?? []) {
          out.push({ path: [...path, field], code: ConfigCodes.SCHEMA, message: `required field "${field}" is missing` });
        }
        break;
      case 'oneOf':
      case 'anyOf':
      case 'not': {
        const owner = resolvePointer(rootSchema, error.schemaPath) as Record<string, unknown> | undefined;
        const id = `${error.instancePath}|${error.schemaPath}`;
        if (handledCombinators.has(id)) break;
        handledCombinators.add(id);
        out.push({ path, code: ConfigCodes.SCHEMA, message: combinatorMessage(owner) ?? error.message });
        break;
      }
      case 'const':
        out.push({ path, code: ConfigCodes.SCHEMA, message: `must be ${JSON.stringify(error.params.allowedValue ?? error.params.const)}` });
        break;
      default:
        out.push({ path, code: ConfigCodes.SCHEMA, message: describeSchemaNode(rootSchema, error) });
    }
  }
  return out;
}

function combinatorMessage(owner: Record<string, unknown> | undefined): string | undefined {
  if (!owner) return undefined;
  if (typeof owner['x-gatehouse-message'] === 'string') return owner['x-gatehouse-message'];
  const one = owner['x-gatehouse-one-of'] as string[] | undefined;
  if (one) return `exactly one of ${one.map((k) => `"${k}"`).join(', ')} must be set`;
  const most = owner['x-gatehouse-at-most-one-of'] as string[] | undefined;
  if (most) return `at most one of ${most.map((k) => `"${k}"`).join(', ')} may be set`;
  return undefined;
}

function describeSchemaNode(rootSchema: unknown, error: SchemaError): string {
  const node = resolvePointer(rootSchema, error.schemaPath) as { description?: string; pattern?: string } | undefined;
  if (error.keyword === 'pattern' && node?.description) return `must be ${node.description}`;
  return error.message;
}

function pointerToPath(pointer: string): PathSegment[] {
  if (!pointer) return [];
  return pointer
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((part) => (/^\d+$/.test(part) ? Number(part) : part));
}

function resolvePointer(root: unknown, pointer: string): unknown {
  let node = root as Record<string, unknown> | undefined;
  for (const part of pointer.replace(/^#/, '').split('/').slice(1)) {
    if (!node || typeof node !== 'object') return undefined;
    node = node[part.replace(/~1/g, '/').replace(/~0/g, '~')] as Record<string, unknown> | undefined;
  }
  return node;
}

function dedupe(diagnostics: Diagnostic[]): Diagnostic[] {
  const seen = new Set<string>();
  return diagnostics.filter((d) => {
    const id = `${d.path}|${d.message}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

/** JSON with sorted keys, so equal specs hash equally whatever their key order. */
export function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
