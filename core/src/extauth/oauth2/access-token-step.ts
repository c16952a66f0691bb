/**
 * Gloo's `oauth2.accessTokenValidation` step: the bearer token of the request validated by RFC 7662
 * introspection (`introspectionUrl`, or `introspection` with client credentials) or as a JWT against
 * a remote or inline JWKS (with `issuer` and `audiences`), optionally enriched from `userinfoUrl`;
 * `requiredScopes` checked; results cached per token for `cacheTimeout` (never past the token's
 * `exp`). A missing, invalid or inactive token is denied with 403, as Gloo's guide shows; a
 * provider that fails or hangs denies too (fail closed), logged with GH_OAUTH2_PROVIDER.
 */
import { createHash } from 'node:crypto';
import { errors as joseErrors, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { LRUCache } from 'lru-cache';
import { deepFreeze } from '../../config/resource.ts';
import type { Logger } from '../../log/logger.ts';
import { forbidden, type Allowed } from '../decision.ts';
import { LogLimiter } from '../log-limit.ts';
import type { AuthDecision, AuthStep, CheckRequest, HeaderToSet } from '../step.ts';
import { claimHeaders } from './claims.ts';
import { OAuth2Codes } from './codes.ts';
import type { CompiledAccessTokenValidation } from './compile.ts';
import { RemoteJwks } from './jwks.ts';
import type { ProviderHttp } from './provider-http.ts';

/** Longest bearer token looked at. */
const MAX_TOKEN = 8192;

type Verdict = { ok: true; decision: Allowed; until: number } | { ok: false; until: number };

/** The step. */
export class AccessTokenStep implements AuthStep {
  readonly type = 'oauth2';
  readonly name: string;
  private readonly config: CompiledAccessTokenValidation;
  private readonly logger: Logger;
  private readonly http: ProviderHttp;
  private readonly keys: JWTVerifyGetKey | undefined;
  private readonly cache: LRUCache<string, Verdict> | undefined;
  private readonly inFlight = new Map<string, Promise<Verdict>>();
  private readonly logLimit = new LogLimiter({ intervalMs: 10_000 });

  constructor(config: CompiledAccessTokenValidation, options: { name: string; logger: Logger; http: ProviderHttp }) {
    this.config = config;
    this.name = options.name;
    this.logger = options.logger;
    this.http = options.http;
    const jwt = config.jwt;
    if (jwt?.local) this.keys = jwt.local;
    else if (jwt?.remote) {
      const url = jwt.remote.url;
      this.keys = new RemoteJwks(this.http, async () => url, jwt.remote.refreshMs, { kind: 'max', perInterval: 10 }).getKey;
    }
    this.cache = config.cacheMs > 0 ? new LRUCache({ max: 10_000 }) : undefined;
  }

  async authorize(request: CheckRequest): Promise<AuthDecision> {
    const header = request.attributes.request.http.headers.authorization ?? '';
    const match = /^bearer[ \t]+([^\s,]+)\s*$/i.exec(header.length > MAX_TOKEN + 16 ? '' : header);
    if (!match) return forbidden();
    const token = match[1]!;
    const key = createHash('sha256').update(token).digest('base64url');
    const now = Date.now();
    const hit = this.cache?.get(key);
    if (hit && hit.until > now) return hit.ok ? hit.decision : forbidden();
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = this.validate(token).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    const verdict = await pending;
    if (this.cache && verdict.until > Date.now()) this.cache.set(key, verdict);
    return verdict.ok ? verdict.decision : forbidden();
  }

  async close(): Promise<void> {
    await this.http.close();
  }

  private async validate(token: string): Promise<Verdict> {
    const now = Date.now();
    // Refusals are cached briefly only: a token the provider did not know yet may become valid.
    const refused = (why: string, code: string = OAuth2Codes.TOKEN): Verdict => {
      this.log(code === OAuth2Codes.PROVIDER ? 'error' : 'info', code, why);
      return { ok: false, until: code === OAuth2Codes.PROVIDER ? 0 : now + Math.min(this.config.cacheMs, 5_000) };
    };
    let claims: Record<string, unknown>;
    const state: Record<string, unknown> = {};
    try {
      if (this.config.mode === 'jwt') {
        const jwt = this.config.jwt!;
        try {
          const { payload, protectedHeader } = await jwtVerify(token, this.keys!, { ...(jwt.issuer ? { issuer: jwt.issuer } : {}), ...(jwt.audiences.length ? { audience: [...jwt.audiences] } : {}), clockTolerance: 5 });
          if (!protectedHeader.kid) return refused('the JWT has no kid');
          claims = payload;
        } catch (error) {
          if ((error as { code?: string }).code === OAuth2Codes.PROVIDER) throw error;
          return refused(`the JWT did not verify: ${error instanceof joseErrors.JOSEError ? error.code : (error as Error).message}`);
        }
        state.jwtAccessToken = claims;
      } else {
        const i = this.config.introspection!;
        const headers: Record<string, string> = i.clientId ? { authorization: `Basic ${Buffer.from(`${encodeURIComponent(i.clientId)}:${encodeURIComponent(i.clientSecret ?? '')}`).toString('base64')}` } : {};
        const { value } = await this.http.json(i.url, { method: 'POST', form: { token, token_type_hint: 'access_token' }, headers });
        if (value.active !== true) return refused('introspection: the token is not active');
        if (i.userIdAttribute && (value[i.userIdAttribute] === undefined || value[i.userIdAttribute] === null)) return refused(`introspection: no ${i.userIdAttribute} in the answer`);
        claims = value;
        state.introspection = value;
      }
      if (typeof claims.exp === 'number' && claims.exp * 1000 <= now) return refused('the token expired');
      const scopes = new Set(typeof claims.scope === 'string' ? claims.scope.split(' ') : Array.isArray(claims.scp) ? claims.scp.map(String) : []);
      const missing = this.config.requiredScopes.filter((s) => !scopes.has(s));
      if (missing.length) return refused(`the token lacks the scopes ${missing.join(', ')}`);
      if (this.config.userinfoUrl) {
        const { value } = await this.http.json(this.config.userinfoUrl, { headers: { authorization: `Bearer ${token}` } });
        state.introspection = { ...(state.introspection as object | undefined), ...value };
      }
    } catch (error) {
      return refused(`request denied: ${(error as Error).message}`, OAuth2Codes.PROVIDER);
    }
    const headers: HeaderToSet[] = [];
    claimHeaders(claims, this.config.claims, headers);
    const until = Math.min(now + this.config.cacheMs, typeof claims.exp === 'number' ? claims.exp * 1000 : Infinity);
    return { ok: true, decision: deepFreeze({ allowed: true, headersToSet: headers, headersToRemove: [], state }) as Allowed, until };
  }

  private log(level: 'info' | 'error', code: string, message: string): void {
    const suppressed = this.logLimit.take(`${code}:${message.slice(0, 60)}`);
    if (suppressed === undefined) return;
    this.logger[level]({ code, step: this.name, ...(suppressed ? { repeated: suppressed } : {}) }, `access token validation ${this.name}: ${message}`);
  }
}
