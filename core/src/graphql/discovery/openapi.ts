import { camelName, description, graphqlName, isGraphQLName, manifests, Names, pascalName, TypeDefinitions } from './sdl.ts';

/**
 * `gatehouse graphql discover --openapi`: a GraphQLApi from an OpenAPI 3 document, as Gloo's
 * discovery made one (issue 25 item 13). Each operation becomes a root field (GET under Query,
 * the other methods under Mutation) bound to a `restResolver`: path parameters in `:path`, query
 * parameters in `queryParams`, a JSON request body as the `input` argument. Schemas become
 * object and input types (`$ref`s to components keep their names); what GraphQL types cannot say
 * (oneOf, anyOf, free-form objects, external `$ref`s) is the `JSON` scalar. Properties whose names
 * are not GraphQL names are left out (reported in `notes`).
 */

type Json = Record<string, unknown>;

/** The result of a discovery: the manifests and what was left out or approximated. */
export interface Discovered {
  readonly documents: object[];
  readonly notes: string[];
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

/** Discovers from a parsed OpenAPI 3 document. `address` overrides the first `servers` URL's host and port. */
export function discoverOpenApi(doc: unknown, options: { name?: string | undefined; namespace?: string | undefined; upstream?: string | undefined; address?: { host: string; port: number } | undefined }): Discovered {
  if (!isObject(doc) || typeof doc.openapi !== 'string' || !doc.openapi.startsWith('3.')) throw new Error('not an OpenAPI 3 document (no "openapi: 3.x" field)');
  const notes: string[] = [];
  const info = isObject(doc.info) ? doc.info : {};
  const name = options.name ?? (kebab(typeof info.title === 'string' ? info.title : '') || 'openapi');
  // The server: its host and port for the Upstream, its path as the prefix of every :path.
  let basePath = '';
  let address = options.address;
  const server = Array.isArray(doc.servers) && isObject(doc.servers[0]) && typeof doc.servers[0].url === 'string' ? doc.servers[0].url : undefined;
  if (server) {
    try {
      const url = new URL(server, 'http://relative.invalid');
      if (url.hostname !== 'relative.invalid') {
        if (url.protocol === 'https:') notes.push(`servers[0] is https: the Upstream is written without TLS settings; add them (sslConfig) before use`);
        address ??= { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port) || (url.protocol === 'https:' ? 443 : 80) };
      }
      basePath = decodeURI(url.pathname).replace(/\/$/, '');
    } catch {
      notes.push(`servers[0].url "${server}" is not a URL: ignored`);
    }
  }
  if (!address) throw new Error('the document has no absolute servers[0].url: give the upstream address with --upstream-address HOST:PORT');

  const types = new TypeDefinitions();
  const components = isObject(doc.components) && isObject(doc.components.schemas) ? doc.components.schemas : {};
  const outputs = new Map<string, string>();
  const inputs = new Map<string, string>();

  const resolveRef = (ref: string): { schema: Json; name: string } | undefined => {
    const match = /^#\/components\/schemas\/([^/]+)$/.exec(ref);
    const target = match ? components[decodeURIComponent(match[1]!)] : undefined;
    return match && isObject(target) ? { schema: target, name: decodeURIComponent(match[1]!) } : undefined;
  };

  /** The properties of an object schema (allOf merged), or undefined when it is not one. */
  const propertiesOf = (schema: Json, seen = new Set<Json>()): { properties: Json; required: Set<string> } | undefined => {
    if (seen.has(schema)) return undefined;
    seen.add(schema);
    if (Array.isArray(schema.allOf)) {
      const properties: Json = {};
      const required = new Set<string>();
      for (const part of schema.allOf) {
        const resolved = isObject(part) && typeof part.$ref === 'string' ? resolveRef(part.$ref)?.schema : isObject(part) ? part : undefined;
        const inner = resolved ? propertiesOf(resolved, seen) : undefined;
        if (!inner) return undefined;
        Object.assign(properties, inner.properties);
        for (const r of inner.required) required.add(r);
      }
      return { properties, required };
    }
    if (!isObject(schema.properties)) return undefined;
    return { properties: schema.properties, required: new Set(Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === 'string') : []) };
  };

  /** The GraphQL type of a schema (output or input), named `hint` when it needs a new type. */
  const typeOf = (schema: unknown, hint: string, input: boolean): string => {
    if (!isObject(schema)) return types.json();
    if (typeof schema.$ref === 'string') {
      const target = resolveRef(schema.$ref);
      if (!target) {
        notes.push(`${schema.$ref}: only local #/components/schemas references are followed; typed JSON`);
        return types.json();
      }
      const memo = input ? inputs : outputs;
      const key = target.name;
      const known = memo.get(key);
      if (known) return known;
      return objectType(target.schema, pascalName(target.name) + (input ? 'Input' : ''), input, memo, key);
    }
    if (schema.oneOf || schema.anyOf || schema.not) return types.json();
    const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
    switch (type) {
      case 'string':
        return 'String';
      case 'integer':
        // Int is 32 bits: a 64-bit integer would fail to serialize past 2^31.
        return schema.format === 'int64' ? 'Float' : 'Int';
      case 'number':
        return 'Float';
      case 'boolean':
        return 'Boolean';
      case 'array':
        return `[${typeOf(schema.items, `${hint}Item`, input)}]`;
      default:
        if (type === undefined && schema.properties === undefined && schema.allOf === undefined) return types.json();
        return objectType(schema, pascalName(hint) + (input && !hint.endsWith('Input') ? 'Input' : ''), input, undefined, undefined);
    }
  };

  const objectType = (schema: Json, wanted: string, input: boolean, memo: Map<string, string> | undefined, key: string | undefined): string => {
    const shape = propertiesOf(schema);
    if (!shape) return types.json();
    const name = types.names.take(wanted);
    // Registered before the fields: a schema that refers to itself gets this name.
    if (memo && key !== undefined) memo.set(key, name);
    const lines: string[] = [];
    for (const [prop, propSchema] of Object.entries(shape.properties)) {
      if (!isGraphQLName(prop)) {
        notes.push(`${name}.${prop}: not a GraphQL name; left out`);
        continue;
      }
      let type = typeOf(propSchema, `${name.replace(/Input$/, '')}${pascalName(prop)}`, input);
      if (input && shape.required.has(prop)) type += '!';
      lines.push(`${description(isObject(propSchema) && typeof propSchema.description === 'string' ? propSchema.description : undefined)}${prop}: ${type}`);
    }
    if (lines.length === 0) {
      if (memo && key !== undefined) memo.set(key, types.json());
      return types.json();
    }
    types.add(input ? 'input' : 'type', name, lines);
    return name;
  };

  const query: string[] = [];
  const mutation: string[] = [];
  const resolutions: Record<string, object> = {};
  const fields = new Names();
  const upstream = options.upstream ?? `${name}-upstream`;
  const paths = isObject(doc.paths) ? doc.paths : {};
  for (const [path, item] of Object.entries(paths)) {
    if (!isObject(item)) continue;
    const shared = Array.isArray(item.parameters) ? item.parameters : [];
    for (const method of METHODS) {
      const op = item[method];
      if (!isObject(op)) continue;
      const field = fields.take(camelName(typeof op.operationId === 'string' ? op.operationId : `${method} ${path.replace(/\{([^}]*)\}/g, ' by $1')}`));
      const args: string[] = [];
      const argNames = new Names();
      const queryParams: Record<string, string> = {};
      let restPath = basePath + path;
      for (const raw of [...shared, ...(Array.isArray(op.parameters) ? op.parameters : [])]) {
        const param = isObject(raw) && typeof raw.$ref === 'string' ? resolveParameter(doc, raw.$ref) : raw;
        if (!isObject(param) || typeof param.name !== 'string') continue;
        if (param.in !== 'path' && param.in !== 'query') {
          if (param.required === true) notes.push(`${method.toUpperCase()} ${path}: required ${String(param.in)} parameter "${param.name}" is not mapped; add it to request.headers`);
          continue;
        }
        const arg = argNames.take(camelName(param.name));
        const required = param.in === 'path' || param.required === true;
        args.push(`${arg}: ${typeOf(param.schema, `${field} ${param.name}`, true)}${required ? '!' : ''}`);
        if (param.in === 'path') restPath = restPath.split(`{${param.name}}`).join(`{$args.${arg}}`);
        else queryParams[param.name] = `{$args.${arg}}`;
      }
      const request: Json = { headers: { ':method': method.toUpperCase(), ':path': restPath } };
      if (Object.keys(queryParams).length > 0) request.queryParams = queryParams;
      const body = isObject(op.requestBody) ? op.requestBody : undefined;
      const bodySchema = body && isObject(body.content) && isObject(body.content['application/json']) ? body.content['application/json'].schema : undefined;
      if (body) {
        if (bodySchema === undefined) notes.push(`${method.toUpperCase()} ${path}: a request body that is not application/json is not mapped`);
        else {
          const arg = argNames.take('input');
          args.push(`${arg}: ${typeOf(bodySchema, `${field} Input`, true)}${body.required === true ? '!' : ''}`);
          request.body = `{$args.${arg}}`;
        }
      }
      const result = typeOf(responseSchema(op), `${field} Result`, false);
      const key = graphqlName(`${method}_${path}`);
      resolutions[key] = { restResolver: { upstreamRef: { name: upstream, ...(options.namespace ? { namespace: options.namespace } : {}) }, request } };
      const line = `${description(typeof op.summary === 'string' ? op.summary : typeof op.description === 'string' ? op.description : undefined)}${field}${args.length > 0 ? `(${args.join(', ')})` : ''}: ${result} @resolve(name: "${key}")`;
      (method === 'get' ? query : mutation).push(line);
    }
  }
  if (query.length + mutation.length === 0) throw new Error('the document has no operations under "paths"');
  return { documents: manifests({ name, namespace: options.namespace, upstream, host: address.host, port: address.port, sdl: types.sdl(query, mutation), resolutions }), notes };
}

/** The JSON schema of an operation's first 2xx answer (or `default`), if any. */
function responseSchema(op: Json): unknown {
  const responses = isObject(op.responses) ? op.responses : {};
  const key = Object.keys(responses).find((k) => /^2\d\d$/.test(k) || k === '2XX') ?? (responses.default ? 'default' : undefined);
  const response = key ? responses[key] : undefined;
  if (!isObject(response) || !isObject(response.content)) return undefined;
  const json = Object.entries(response.content).find(([type]) => /^application\/(.+\+)?json/.test(type));
  return json && isObject(json[1]) ? json[1].schema : undefined;
}

function resolveParameter(doc: Json, ref: string): unknown {
  const match = /^#\/components\/parameters\/([^/]+)$/.exec(ref);
  const components = isObject(doc.components) && isObject(doc.components.parameters) ? doc.components.parameters : {};
  return match ? components[decodeURIComponent(match[1]!)] : undefined;
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** A Kubernetes-style name from a title. */
export function kebab(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63);
}
