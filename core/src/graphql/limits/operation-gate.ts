import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { RequestParams } from '../execute/http.ts';

/** Gloo's default `persistedQueryCacheConfig.cacheSize`. */
export const DEFAULT_PERSISTED_QUERY_CACHE_SIZE = 1000;

/** Error codes of requests the gate answers itself (Apollo's for persisted queries). */
export const GateCodes = {
  PERSISTED_QUERY_NOT_FOUND: 'PERSISTED_QUERY_NOT_FOUND',
  PERSISTED_QUERY_NOT_SUPPORTED: 'PERSISTED_QUERY_NOT_SUPPORTED',
  BAD_PERSISTED_QUERY: 'BAD_PERSISTED_QUERY',
  OPERATION_NOT_ALLOWED: 'OPERATION_NOT_ALLOWED',
} as const;

/** A request the gate refuses: HTTP status and one GraphQL error with its code. */
export interface GateRefusal {
  readonly status: number;
  readonly error: { readonly message: string; readonly extensions: { readonly code: string } };
}

const refuse = (status: number, code: string, message: string): GateRefusal => ({ status, error: { message, extensions: { code } } });

/** Hashes kept for query texts seen recently: the hash of a hot query is computed once. */
const HASH_MEMO_SIZE = 1000;

/**
 * What runs before parsing: Apollo's automatic persisted queries (Gloo's
 * `persistedQueryCacheConfig`) and the safelist (`allowedQueryHashes`: SHA-256 of the query
 * text, lowercase hex).
 *
 * APQ: a request whose `extensions.persistedQuery` holds `{version: 1, sha256Hash}` and no
 * query runs the query cached under that hash, or gets `PersistedQueryNotFound` (HTTP 200, as
 * Apollo answers, so clients retry with the query); one with the query too is checked against
 * the hash (a mismatch is a 400) and cached, LRU, `cacheSize` queries.
 */
export class OperationGate {
  private readonly cache: LRUCache<string, string> | undefined;
  private readonly allowed: ReadonlySet<string> | undefined;
  private readonly hashes = new LRUCache<string, string>({ max: HASH_MEMO_SIZE });

  constructor(options: { persistedQueries?: { cacheSize?: number } | undefined; allowedQueryHashes?: readonly string[] | undefined }) {
    if (options.persistedQueries) this.cache = new LRUCache({ max: options.persistedQueries.cacheSize || DEFAULT_PERSISTED_QUERY_CACHE_SIZE });
    if (options.allowedQueryHashes && options.allowedQueryHashes.length > 0) this.allowed = new Set(options.allowedQueryHashes.map((hash) => hash.toLowerCase()));
  }

  /** True when the gate does nothing (no APQ, no safelist): the endpoint skips it. */
  get open(): boolean {
    return this.cache === undefined && this.allowed === undefined;
  }

  /** The query text to run, or why the request is refused. */
  admit(params: RequestParams): { query: string } | GateRefusal {
    const persisted = params.extensions?.persistedQuery as { version?: unknown; sha256Hash?: unknown } | undefined;
    let query = params.query;
    let hash: string | undefined;
    if (persisted !== undefined && persisted !== null) {
      if (!this.cache) {
        if (query === '') return refuse(200, GateCodes.PERSISTED_QUERY_NOT_SUPPORTED, 'PersistedQueryNotSupported');
      } else {
        if (persisted.version !== 1) return refuse(400, GateCodes.BAD_PERSISTED_QUERY, 'Unsupported persisted query version');
        if (typeof persisted.sha256Hash !== 'string' || !/^[0-9a-fA-F]{64}$/.test(persisted.sha256Hash)) {
          return refuse(400, GateCodes.BAD_PERSISTED_QUERY, 'extensions.persistedQuery.sha256Hash must be a SHA-256 hash in hex');
        }
        hash = persisted.sha256Hash.toLowerCase();
        if (query === '') {
          const cached = this.cache.get(hash);
          if (cached === undefined) return refuse(200, GateCodes.PERSISTED_QUERY_NOT_FOUND, 'PersistedQueryNotFound');
          query = cached;
        } else {
          if (this.hashOf(query) !== hash) return refuse(400, GateCodes.BAD_PERSISTED_QUERY, 'provided sha does not match query');
          // Only queries the safelist allows are kept: others would be refused anyway, and caching
          // them let anyone evict the safelisted ones from a small cache (issue 24 finding 14).
          if (!this.allowed || this.allowed.has(hash)) this.cache.set(hash, query);
        }
      }
    }
    if (query === '') return refuse(400, GateCodes.BAD_PERSISTED_QUERY, 'missing "query"');
    if (this.allowed && !this.allowed.has(hash ?? this.hashOf(query))) {
      return refuse(403, GateCodes.OPERATION_NOT_ALLOWED, 'this operation is not in the API\'s allowedQueryHashes');
    }
    return { query };
  }

  private hashOf(query: string): string {
    let hash = this.hashes.get(query);
    if (hash === undefined) {
      hash = createHash('sha256').update(query, 'utf8').digest('hex');
      // Huge documents are hashed every time rather than pinned in memory.
      if (query.length <= 16 * 1024) this.hashes.set(query, hash);
    }
    return hash;
  }
}
