import { AuthorizedResponse, DeniedResponse, type AuthorizationRequest, type AuthorizationResponse, type AuthService, type Context, type ExtAuthPlugin } from '@gatehouse/plugin-sdk';

/** The step's `config`. */
export interface ApiKeyConfig {
  /** Header carrying the key. */
  Header: string;
  /**
   * The key service: `GET <KeyServiceUrl><url-encoded key>` answers 200 with `{"user": "…"}`
   * for a valid key and 404 for an unknown one. Its origin must be in the step's `egress`
   * (an Upstream: `http://<name>.<namespace>.upstream/...`).
   */
  KeyServiceUrl: string;
  /** How long a valid key's answer is kept in ctx.store. */
  CacheSeconds: number;
  /** How long an unknown key's answer is kept (short: a key may be created). */
  NegativeCacheSeconds: number;
  /**
   * Fields of the key service's answer copied to upstream headers, field → header
   * (`{customer: x-customer-id}`); strings, numbers and booleans only. A configured header the
   * answer has no such field for is removed from the request, so a client cannot send it.
   */
  FieldsToHeaders: Record<string, string>;
}

type Verdict = { user: string; headers: Record<string, string> } | { unknown: true };

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function unauthenticated(): AuthorizationResponse {
  return DeniedResponse(401, { 'www-authenticate': 'ApiKey' });
}

class ApiKeyService implements AuthService {
  private readonly config: ApiKeyConfig;
  private readonly header: string;

  constructor(config: ApiKeyConfig) {
    this.config = config;
    this.header = config.Header.toLowerCase();
  }

  Start(): void {}

  async Authorize(ctx: Context, request: AuthorizationRequest): Promise<AuthorizationResponse> {
    const key = request.CheckRequest.attributes.request.http.headers[this.header];
    if (!key || key.length > 256) return unauthenticated();
    const cacheKey = `key:${key}`;
    let verdict = (await ctx.store?.get(cacheKey)) as Verdict | undefined;
    if (!verdict) {
      const response = await fetch(`${this.config.KeyServiceUrl}${encodeURIComponent(key)}`, { headers: { accept: 'application/json' } });
      if (response.status === 200) {
        const body = (await response.json()) as { user?: unknown; [field: string]: unknown };
        const headers: Record<string, string> = {};
        for (const [field, header] of Object.entries(this.config.FieldsToHeaders)) {
          const value = body[field];
          // Control characters would not survive as a header value: such a field is left out.
          if ((typeof value === 'string' && !/[\x00-\x1f\x7f]/.test(value)) || typeof value === 'number' || typeof value === 'boolean') headers[header] = String(value);
        }
        verdict = { user: typeof body.user === 'string' ? body.user : '', headers };
        await ctx.store?.set(cacheKey, verdict, { ttlMs: this.config.CacheSeconds * 1000 });
      } else if (response.status === 404) {
        await response.arrayBuffer();
        verdict = { unknown: true };
        await ctx.store?.set(cacheKey, verdict, { ttlMs: this.config.NegativeCacheSeconds * 1000 });
      } else {
        // The key service failing is not the client's fault, and is never cached: deny (fail closed) and say so.
        ctx.logger.error('key service failed', { status: response.status });
        return DeniedResponse(503);
      }
    }
    if ('unknown' in verdict) return unauthenticated();
    const set = verdict.headers;
    const allowed = AuthorizedResponse(set);
    allowed.CheckResponse.ok_response!.headers_to_remove = Object.values(this.config.FieldsToHeaders).filter((header) => !(header in set));
    return verdict.user ? { ...allowed, UserInfo: { UserID: verdict.user } } : allowed;
  }
}

/** The reference API-key plugin; build with `gatehouse-plugin build src/index.ts --name ApiKey`. */
export const ApiKey: ExtAuthPlugin = {
  NewConfigInstance(): ApiKeyConfig {
    // {} decodes as a map: any field names.
    return { Header: 'x-api-key', KeyServiceUrl: '', CacheSeconds: 60, NegativeCacheSeconds: 5, FieldsToHeaders: {} };
  },

  GetAuthService(_ctx, config) {
    const c = config as ApiKeyConfig;
    if (!c.KeyServiceUrl) throw new Error('config.KeyServiceUrl is required, e.g. http://keys.default.upstream/keys/');
    for (const [field, header] of Object.entries(c.FieldsToHeaders)) {
      if (typeof header !== 'string' || !HEADER_NAME.test(header)) throw new Error(`config.FieldsToHeaders.${field}: expected a header name, got ${JSON.stringify(header)}`);
    }
    return new ApiKeyService(c);
  },
};
