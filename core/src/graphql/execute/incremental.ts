import { extendSchema, Kind, parse, visit, type DocumentNode, type GraphQLSchema } from 'graphql';

/**
 * Incremental delivery (`@defer`, `@stream`; issue 25 item 8). The remote executor forwards
 * operations using them to its upstream and streams the upstream's `multipart/mixed` answer back,
 * part by part, each part's errors masked. The local executor cannot run them (graphql-js 16 has
 * no incremental execution): such an operation is refused with {@link INCREMENTAL_UNSUPPORTED}.
 */

/** `extensions.code` of an operation using `@defer`/`@stream` on an API that cannot run it (stable). */
export const INCREMENTAL_UNSUPPORTED = 'GRAPHQL_INCREMENTAL_DELIVERY_UNSUPPORTED';

/** The directives as the incremental delivery RFC defines them (graphql-js 17, graphql-yoga). */
const DIRECTIVES = /* GraphQL */ `
  directive @defer(label: String, if: Boolean! = true) on FRAGMENT_SPREAD | INLINE_FRAGMENT
  directive @stream(label: String, if: Boolean! = true, initialCount: Int = 0) on FIELD
`;

/** The schema with `@defer` and `@stream` declared (those it declares itself are kept). */
export function withIncrementalDirectives(schema: GraphQLSchema): GraphQLSchema {
  const missing = parse(DIRECTIVES).definitions.filter((d) => d.kind === Kind.DIRECTIVE_DEFINITION && !schema.getDirective(d.name.value));
  return missing.length === 0 ? schema : extendSchema(schema, { kind: Kind.DOCUMENT, definitions: missing });
}

/** True when the document uses `@defer` or `@stream` anywhere. */
export function usesIncremental(document: DocumentNode, query: string): boolean {
  // Most documents do not mention them: found without walking.
  if (!query.includes('@defer') && !query.includes('@stream') && !/@\s+(defer|stream)/.test(query)) return false;
  let found = false;
  visit(document, {
    Directive(node) {
      if (node.name.value === 'defer' || node.name.value === 'stream') {
        found = true;
        return false;
      }
      return undefined;
    },
  });
  return found;
}

/** True when the client accepts `multipart/mixed` (Apollo sends `multipart/mixed;deferSpec=20220824`). */
export function acceptsMultipart(accept: string | undefined): boolean {
  return accept !== undefined && /(^|,)\s*multipart\/mixed\s*(;|,|$)/i.test(accept);
}

/**
 * A parser of a `multipart/mixed` body into its parts' bodies (the part headers are dropped: every
 * part of an incremental answer is JSON). It holds at most `limit` bytes of one part.
 */
export class MultipartParser {
  private readonly delimiter: Buffer;
  /** Past the first, a delimiter starts a line (a JSON body may hold the boundary's text). */
  private readonly lineDelimiter: Buffer;
  private readonly limit: number;
  private buffered: Buffer = Buffer.alloc(0);
  private started = false;
  /** True once the closing delimiter was seen. */
  done = false;

  constructor(boundary: string, limit: number) {
    this.delimiter = Buffer.from(`--${boundary}`);
    this.lineDelimiter = Buffer.from(`\r\n--${boundary}`);
    this.limit = limit;
  }

  /** The parts completed by `chunk`; undefined when one part is larger than the limit. */
  push(chunk: Buffer): Buffer[] | undefined {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    const parts: Buffer[] = [];
    for (;;) {
      if (this.done) return parts;
      const needle = this.started ? this.lineDelimiter : this.delimiter;
      const at = this.buffered.indexOf(needle);
      if (at < 0) break;
      // What follows the delimiter: "--" closes, else the line ends.
      const after = at + needle.length;
      if (this.buffered.length < after + 2) break;
      if (this.started) {
        const part = this.buffered.subarray(0, at);
        // Headers, a blank line, the body (a part without headers starts with the blank line).
        const headersEnd = part.indexOf('\r\n\r\n');
        const body = part[0] === 13 && part[1] === 10 ? part.subarray(2) : headersEnd < 0 ? part : part.subarray(headersEnd + 4);
        if (body.length > this.limit) return undefined;
        if (body.length > 0) parts.push(Buffer.from(body));
      }
      this.started = true;
      if (this.buffered[after] === 45 && this.buffered[after + 1] === 45) {
        this.done = true;
        this.buffered = Buffer.alloc(0);
        return parts;
      }
      this.buffered = this.buffered.subarray(after);
      // Skip the rest of the delimiter line (transport padding, CRLF).
      const eol = this.buffered.indexOf('\r\n');
      if (eol < 0) break;
      this.buffered = this.buffered.subarray(eol + 2);
    }
    if (this.buffered.length > this.limit) return undefined;
    return parts;
  }
}

/** The boundary of a `multipart/mixed` content type, or undefined. */
export function boundaryOf(contentType: string): string | undefined {
  if (!/^\s*multipart\/mixed/i.test(contentType)) return undefined;
  const match = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  return match?.[1] ?? match?.[2];
}
