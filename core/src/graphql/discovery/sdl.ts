/**
 * What both discoverers (OpenAPI, gRPC reflection) build: GraphQL type definitions written as
 * SDL, names made valid and unique, and the manifests (`GraphQLApi` and its `Upstream`).
 */

/** A GraphQL name from any text: invalid characters become `_`, a leading digit gets `_`. */
export function graphqlName(text: string): string {
  let name = text.replace(/[^_0-9A-Za-z]/g, '_');
  if (!/^[_A-Za-z]/.test(name)) name = `_${name}`;
  // `__` prefixes are reserved for introspection.
  if (name.startsWith('__')) name = `x${name}`;
  return name;
}

/** `get_user-by id` → `getUserById`. */
export function camelName(text: string): string {
  const words = text.split(/[^0-9A-Za-z]+/).filter(Boolean);
  const joined = words.map((w, i) => (i === 0 ? w.charAt(0).toLowerCase() + w.slice(1) : w.charAt(0).toUpperCase() + w.slice(1))).join('');
  return graphqlName(joined || 'field');
}

/** `user address` → `UserAddress`. */
export function pascalName(text: string): string {
  const camel = camelName(text);
  return graphqlName(camel.charAt(0).toUpperCase() + camel.slice(1));
}

/** True for a name GraphQL accepts as is. */
export function isGraphQLName(text: string): boolean {
  return /^[_A-Za-z][_0-9A-Za-z]*$/.test(text) && !text.startsWith('__');
}

/** Hands out names not used yet (`Name`, `Name2`, …). */
export class Names {
  private readonly used = new Set<string>();

  constructor(reserved: readonly string[] = []) {
    for (const name of reserved) this.used.add(name);
  }

  take(wanted: string): string {
    let name = wanted;
    for (let i = 2; this.used.has(name); i++) name = `${wanted}${i}`;
    this.used.add(name);
    return name;
  }
}

/** Type definitions being written. */
export class TypeDefinitions {
  readonly names = new Names(['Query', 'Mutation', 'Subscription', 'String', 'Int', 'Float', 'Boolean', 'ID', 'JSON']);
  private readonly blocks: string[] = [];
  jsonUsed = false;

  /** Adds `type Name { fields }` (or input/enum). */
  add(keyword: 'type' | 'input' | 'enum', name: string, lines: readonly string[]): void {
    this.blocks.push(`${keyword} ${name} {\n${lines.map((l) => `  ${l}`).join('\n')}\n}`);
  }

  /** The `JSON` scalar, for shapes GraphQL types cannot express. */
  json(): string {
    this.jsonUsed = true;
    return 'JSON';
  }

  sdl(query: readonly string[], mutation: readonly string[]): string {
    const out: string[] = [];
    // A schema needs a Query type with a field: an API of mutations only gets a placeholder.
    out.push(`type Query {\n${(query.length > 0 ? query : ['"Placeholder: the API has no read operations." _empty: String']).map((l) => `  ${l}`).join('\n')}\n}`);
    if (mutation.length > 0) out.push(`type Mutation {\n${mutation.map((l) => `  ${l}`).join('\n')}\n}`);
    out.push(...this.blocks);
    if (this.jsonUsed) out.push('"Any JSON value." scalar JSON');
    return `${out.join('\n\n')}\n`;
  }
}

/** A GraphQL string literal (for descriptions). */
export function description(text: string | undefined): string {
  if (!text) return '';
  return `${JSON.stringify(text.replace(/\s+/g, ' ').trim().slice(0, 300))} `;
}

/** The manifests of a discovered API: its Upstream and its GraphQLApi. */
export function manifests(options: { name: string; namespace?: string | undefined; upstream: string; host: string; port: number; http2?: boolean; sdl: string; resolutions: Record<string, object> }): object[] {
  const metadata = (name: string) => ({ name, ...(options.namespace ? { namespace: options.namespace } : {}) });
  return [
    {
      apiVersion: 'gatehouse.gatehouse.dev/v1',
      kind: 'Upstream',
      metadata: metadata(options.upstream),
      spec: { static: { hosts: [{ addr: options.host, port: options.port }] }, ...(options.http2 ? { useHttp2: true } : {}) },
    },
    {
      apiVersion: 'graphql.gatehouse.dev/v1beta1',
      kind: 'GraphQLApi',
      metadata: metadata(options.name),
      spec: { executableSchema: { schemaDefinition: options.sdl, executor: { local: { resolutions: options.resolutions } } } },
    },
  ];
}
