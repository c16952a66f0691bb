/**
 * Gloo's `oauth2.oidcAuthorizationCode` step: the OpenID Connect authorization code flow (OIDC
 * Core 1.0 §3.1) with PKCE S256 (RFC 7636), `state` and `nonce`, run inside ext_authz as Gloo's
 * extauth runs it. A request without a session is denied with a 302 to the provider's login (and
 * a sealed cookie holding state, nonce, verifier and the URL to return to); the callback exchanges
 * the code, verifies the ID token against the provider's JWKS, stores the session (sealed cookie or
 * Redis) and redirects back with 302; a request with a session is allowed with the configured
 * token and claim headers, refreshing tokens first when they expired; the logout path clears the
 * session and redirects to the provider's end_session_endpoint (RP-initiated logout) or
 * `afterLogoutUrl`. Everything the provider sends is bounded and checked: a provider that hangs,
 * fails or answers garbage denies (fail closed) with a GH_OAUTH2_* log line, never a crash.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { jwtVerify, type JWTPayload } from 'jose';
import { LRUCache } from 'lru-cache';
import { deepFreeze } from '../../config/resource.ts';
import { GatehouseError } from '../../errors.ts';
import type { Logger } from '../../log/logger.ts';
import { deny, type Allowed, type Denied } from '../decision.ts';
import { LogLimiter } from '../log-limit.ts';
import type { AuthDecision, AuthStep, CheckRequest, HeaderToSet } from '../step.ts';
import { claimHeaders, jwtPayload } from './claims.ts';
import { OAuth2Codes } from './codes.ts';
import type { CompiledOidc } from './compile.ts';
import { readCookie, setCookie, Sealer } from './cookies.ts';
import { Discovery, type ProviderMetadata } from './discovery.ts';
import { RemoteJwks } from './jwks.ts';
import type { ProviderHttp } from './provider-http.ts';
import { SessionTooLarge, type Loaded, type Session, type SessionStore } from './sessions.ts';

/** How long a login may take between the redirect to the provider and the callback. */
export const LOGIN_STATE_TTL_MS = 10 * 60_000;
/** Sessions whose allow decision is kept ready (the per-request cookie check is then a lookup). */
const DECISION_CACHE = 10_000;
/** Redis sessions are re-read at least this often (a logout in another process takes effect). */
const REDIS_CACHE_MS = 5_000;
const STATE_RE = /^[A-Za-z0-9_-]{32}$/;

/** A sealed login state (cookie `<prefix><state[0..8]>`). */
interface LoginState {
  s: string;
  n: string;
  v: string;
  u: string;
  t: number;
}

/** Options of {@link OidcStep}. */
export interface OidcStepOptions {
  name: string;
  logger: Logger;
  http: ProviderHttp;
  store: SessionStore;
  /** AuthConfig `failOnRedirect`: 401 instead of a redirect to the login. */
  failOnRedirect?: boolean;
}

interface Tokens {
  idToken: string | undefined;
  accessToken: string;
  refreshToken: string | undefined;
  expiresIn: number | undefined;
}

const b64url = (bytes: number) => randomBytes(bytes).toString('base64url');

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The step. */
export class OidcStep implements AuthStep {
  readonly type = 'oauth2';
  readonly name: string;
  private readonly config: CompiledOidc;
  private readonly logger: Logger;
  private readonly http: ProviderHttp;
  private readonly store: SessionStore;
  private readonly sealer: Sealer;
  private readonly discovery: Discovery;
  private readonly jwks: RemoteJwks;
  private readonly failOnRedirect: boolean;
  /** Allow decisions by session cookie value (or Redis id), until the tokens need refreshing. */
  private readonly decisions = new LRUCache<string, { raw: string; decision: Allowed; until: number }>({ max: DECISION_CACHE });
  /** States already redeemed (a replayed callback is refused even with the state cookie). */
  private readonly usedStates = new LRUCache<string, true>({ max: 100_000, ttl: LOGIN_STATE_TTL_MS });
  /** Refreshes in flight by session: parallel requests of one browser share one. */
  private readonly refreshing = new Map<string, Promise<Session | undefined>>();
  /** Cookie sessions refreshed in the last minute, by the cookie they replaced. */
  private readonly recentlyRefreshed = new LRUCache<string, { session: Session; cookies: string[] }>({ max: 10_000, ttl: 60_000 });
  private readonly logLimit = new LogLimiter({ intervalMs: 10_000 });
  /** client_secret_basic unless the provider only takes client_secret_post (set from discovery at each token call). */
  private basicAuth = true;

  constructor(config: CompiledOidc, options: OidcStepOptions) {
    this.config = config;
    this.name = options.name;
    this.logger = options.logger;
    this.http = options.http;
    this.store = options.store;
    this.failOnRedirect = options.failOnRedirect === true;
    this.sealer = new Sealer(config.key);
    this.discovery = new Discovery(this.http, config.issuerUrl, config.overrides, config.pollMs);
    this.jwks = new RemoteJwks(this.http, async () => (await this.discovery.get()).jwksUri, config.pollMs, config.jwksPolicy);
    // Discovered ahead of the first login; a failure here is retried by that login.
    void this.discovery.get().then(() => this.jwks.load()).catch(() => {});
  }

  async authorize(request: CheckRequest): Promise<AuthDecision> {
    const http = request.attributes.request.http;
    const q = http.path.indexOf('?');
    const path = q === -1 ? http.path : http.path.slice(0, q);
    const cookie = http.headers.cookie;
    try {
      if (path === this.config.callbackPath) return await this.callback(q === -1 ? '' : http.path.slice(q + 1), cookie);
      if (path === this.config.logoutPath) return await this.logout(cookie);
      if (this.config.targetDomain && !domainMatches(http.host || http.headers.host || '', this.config.targetDomain)) return deny(403);
      const raw = readCookie(cookie, this.config.sessionCookie);
      if (raw) {
        const hit = this.decisions.get(cacheKey(raw));
        // Keyed by the cookie's tail (hashing a 2 KB key per request cost more than the rest of the hit); the whole value must match.
        if (hit && hit.raw === raw && hit.until > Date.now()) return hit.decision;
      }
      return await this.session(http.path, cookie);
    } catch (error) {
      return this.failure(error);
    }
  }

  async close(): Promise<void> {
    await this.store.close();
    await this.http.close();
  }

  /** A request with the session it carries (or without one). */
  private async session(fullPath: string, cookie: string | undefined): Promise<AuthDecision> {
    let loaded: Loaded | undefined;
    try {
      loaded = await this.store.load(cookie);
    } catch (error) {
      this.log('warn', OAuth2Codes.SESSION_STORE, `the session store failed: ${(error as Error).message}`);
      // Gloo's failOnFetchFailure: deny; otherwise start a new login.
      if (this.config.failOnFetchFailure) return deny(503, [{ key: 'content-type', value: 'text/plain' }], 'session store unavailable\n');
      return this.login(fullPath);
    }
    if (!loaded) return this.login(fullPath);
    let session = loaded.session;
    const setCookies: string[] = [];
    const recent = this.recentlyRefreshed.get(loaded.raw);
    if (recent && recent.session.exp - this.config.preExpiryBufferMs > Date.now()) {
      // The browser still sends the cookie it had before a refresh answered: the new session (and cookie) again.
      return this.allowed(recent.session, [...recent.cookies]);
    }
    if (session.exp - this.config.preExpiryBufferMs <= Date.now()) {
      if (!this.config.allowRefreshing || !session.rt) return this.login(fullPath);
      const key = loaded.raw;
      let pending = this.refreshing.get(key);
      if (!pending) {
        pending = this.refresh(session).finally(() => this.refreshing.delete(key));
        this.refreshing.set(key, pending);
      }
      const refreshed = await pending;
      if (!refreshed) {
        await this.store.clear(loaded, cookie).catch(() => []);
        this.decisions.delete(cacheKey(loaded.raw));
        return this.login(fullPath);
      }
      session = refreshed;
      setCookies.push(...(await this.store.save(session, loaded, cookie)));
      this.decisions.delete(cacheKey(loaded.raw));
      // With rotating refresh tokens the old cookie's token is spent: its requests in flight reuse this refresh.
      if (setCookies.length) this.recentlyRefreshed.set(loaded.raw, { session, cookies: setCookies });
    }
    const decision = this.allowed(session, setCookies);
    if (setCookies.length === 0) {
      let until = session.exp - this.config.preExpiryBufferMs;
      if (this.store.kind === 'redis') until = Math.min(until, Date.now() + REDIS_CACHE_MS);
      else if (this.config.cookie.maxAge > 0) until = Math.min(until, session.iat + this.config.cookie.maxAge * 1000);
      this.decisions.set(cacheKey(loaded.raw), { raw: loaded.raw, decision, until });
    }
    return decision;
  }

  /** The allow decision of a session: token and claim headers, and the ID token as State `jwt` (Gloo's, for an OPA step after it). */
  private allowed(session: Session, setCookies: string[]): Allowed {
    const headers: HeaderToSet[] = [];
    const c = this.config;
    if (c.idTokenHeader) headers.push({ key: c.idTokenHeader, value: session.id });
    if (c.accessTokenHeader) headers.push({ key: c.accessTokenHeader, value: c.bearer ? `Bearer ${session.at}` : session.at });
    if (c.idClaims.length) claimHeaders(jwtPayload(session.id), c.idClaims, headers);
    if (c.accessClaims.length) claimHeaders(jwtPayload(session.at), c.accessClaims, headers);
    const decision: Allowed = { allowed: true, headersToSet: headers, headersToRemove: [], state: { jwt: session.id } };
    // A refreshed cookie session must reach the browser with the upstream's answer.
    if (setCookies.length) decision.responseHeaders = setCookies.map((value) => ({ key: 'set-cookie', value, append: true }));
    return setCookies.length ? decision : deepFreeze(decision);
  }

  /** No usable session: 302 to the provider's login, or 401 with failOnRedirect. */
  private async login(fullPath: string): Promise<Denied> {
    if (this.failOnRedirect) return deny(401);
    const meta = await this.discovery.get();
    const state = b64url(24);
    const nonce = b64url(24);
    const verifier = b64url(32);
    const c = this.config;
    const url = new URL(meta.authorizationEndpoint);
    const params = url.searchParams;
    params.set('response_type', 'code');
    params.set('client_id', c.clientId);
    params.set('redirect_uri', c.redirectUri);
    params.set('scope', c.scopes.join(' '));
    params.set('state', state);
    params.set('nonce', nonce);
    params.set('code_challenge', createHash('sha256').update(verifier).digest('base64url'));
    params.set('code_challenge_method', 'S256');
    for (const [k, v] of Object.entries(c.authParams)) params.set(k, v);
    const name = `${c.stateCookiePrefix}${state.slice(0, 8)}`;
    const sealed = this.sealer.seal({ s: state, n: nonce, v: verifier, u: this.returnPath(fullPath), t: Date.now() } satisfies LoginState, name);
    const stateCookie = setCookie(name, sealed, c.cookie, { maxAge: LOGIN_STATE_TTL_MS / 1000, path: c.callbackPath, sameSite: c.cookie.sameSite === 'None' ? 'None' : 'Lax' });
    return deny(302, [
      { key: 'location', value: url.href },
      { key: 'set-cookie', value: stateCookie },
      { key: 'cache-control', value: 'no-store' },
    ]);
  }

  /** The path to return to after login: the request's own, when it is a plain same-origin path. */
  private returnPath(fullPath: string): string {
    if (fullPath.length > 2048 || !fullPath.startsWith('/') || fullPath.startsWith('//') || fullPath.startsWith('/\\') || /[\x00-\x20\x7f]/.test(fullPath)) return '';
    const url = URL.parse(fullPath, this.config.appOrigin);
    if (!url || url.origin !== this.config.appOrigin || url.pathname === this.config.callbackPath || url.pathname === this.config.logoutPath) return '';
    return fullPath;
  }

  /** The callback: state checked, code exchanged, ID token verified, session stored, 302 back. */
  private async callback(query: string, cookie: string | undefined): Promise<Denied> {
    const params = new URLSearchParams(query.length > 8192 ? '' : query);
    const state = params.get('state') ?? '';
    const c = this.config;
    const name = STATE_RE.test(state) ? `${c.stateCookiePrefix}${state.slice(0, 8)}` : undefined;
    const clearState = name ? [{ key: 'set-cookie', value: setCookie(name, '', c.cookie, { maxAge: -1, path: c.callbackPath }) }] : [];
    const refuse = (code: string, why: string, status = 403): Denied => {
      this.log('warn', code, `login callback refused: ${why}`);
      return deny(status, [...clearState, { key: 'content-type', value: 'text/plain' }, { key: 'cache-control', value: 'no-store' }], status === 403 ? 'login failed\n' : 'identity provider unavailable\n');
    };
    const error = params.get('error');
    if (error) return refuse(OAuth2Codes.STATE, `the provider answered error ${JSON.stringify(error.slice(0, 64))}`);
    const code = params.get('code');
    if (!name || !code || code.length > 4096) return refuse(OAuth2Codes.STATE, 'no code or no well-formed state');
    const sealed = readCookie(cookie, name);
    const login = sealed ? (this.sealer.open(sealed, name) as LoginState | undefined) : undefined;
    if (!login || typeof login.s !== 'string' || typeof login.n !== 'string' || typeof login.v !== 'string' || typeof login.u !== 'string' || typeof login.t !== 'number') return refuse(OAuth2Codes.STATE, 'no login state cookie for this state (forged, from another browser, or sealed with another key)');
    if (!sameText(login.s, state)) return refuse(OAuth2Codes.STATE, 'the state does not match the login state cookie');
    if (Date.now() - login.t > LOGIN_STATE_TTL_MS) return refuse(OAuth2Codes.STATE, 'the login state expired');
    if (this.usedStates.has(state)) return refuse(OAuth2Codes.STATE, 'the state was already redeemed (replayed callback)');
    this.usedStates.set(state, true);
    let tokens: Tokens;
    let claims: JWTPayload;
    try {
      tokens = await this.tokenRequest({ grant_type: 'authorization_code', code, redirect_uri: c.redirectUri, code_verifier: login.v });
      if (!tokens.idToken) throw new GatehouseError(OAuth2Codes.TOKEN, 'the token endpoint answered without an id_token');
      claims = await this.verifyIdToken(tokens.idToken);
      if (claims.nonce !== login.n) throw new GatehouseError(OAuth2Codes.TOKEN, 'the ID token nonce does not match the login');
    } catch (error) {
      const e = error as GatehouseError;
      return refuse(e.code ?? OAuth2Codes.PROVIDER, e.message, e.code === OAuth2Codes.PROVIDER && !/answered 4\d\d/.test(e.message) ? 503 : 403);
    }
    const now = Date.now();
    const session: Session = { id: tokens.idToken, at: tokens.accessToken, rt: tokens.refreshToken, exp: expiry(claims, tokens, now), iat: now };
    let cookies: string[];
    try {
      cookies = await this.store.save(session, undefined, cookie);
    } catch (error) {
      if (error instanceof SessionTooLarge) return refuse(OAuth2Codes.SESSION_TOO_LARGE, error.message, 503);
      return refuse(OAuth2Codes.SESSION_STORE, `the session store failed: ${(error as Error).message}`, 503);
    }
    return deny(302, [{ key: 'location', value: login.u ? `${c.appOrigin}${login.u}` : c.appUrl }, ...clearState, ...cookies.map((value) => ({ key: 'set-cookie', value })), { key: 'cache-control', value: 'no-store' }]);
  }

  /** Logout: session deleted, tokens revoked (best effort), 302 to end_session_endpoint or afterLogoutUrl. */
  private async logout(cookie: string | undefined): Promise<Denied> {
    let loaded: Loaded | undefined;
    try {
      loaded = await this.store.load(cookie);
    } catch {
      loaded = undefined;
    }
    const cleared = await this.store.clear(loaded, cookie).catch(() => [] as string[]);
    const raw = readCookie(cookie, this.config.sessionCookie);
    if (raw) this.decisions.delete(cacheKey(raw));
    let location = this.config.afterLogoutUrl;
    let meta: ProviderMetadata | undefined;
    try {
      meta = await this.discovery.get();
    } catch {
      meta = undefined;
    }
    if (loaded && meta?.revocationEndpoint) void this.revoke(meta.revocationEndpoint, loaded.session);
    if (meta?.endSessionEndpoint) {
      // OpenID Connect RP-Initiated Logout 1.0 §2.
      const url = new URL(meta.endSessionEndpoint);
      if (loaded) url.searchParams.set('id_token_hint', loaded.session.id);
      url.searchParams.set('client_id', this.config.clientId);
      url.searchParams.set('post_logout_redirect_uri', this.config.afterLogoutUrl);
      location = url.href;
    }
    return deny(302, [{ key: 'location', value: location }, ...cleared.map((value) => ({ key: 'set-cookie', value })), { key: 'cache-control', value: 'no-store' }]);
  }

  private async revoke(endpoint: string, session: Session): Promise<void> {
    for (const [token, hint] of [[session.rt, 'refresh_token'], [session.at, 'access_token']] as const) {
      if (!token) continue;
      try {
        await this.http.call(endpoint, { method: 'POST', form: { token, token_type_hint: hint, ...this.clientForm() }, headers: this.clientHeaders() });
      } catch (error) {
        this.log('warn', OAuth2Codes.PROVIDER, `revoking the ${hint} at logout failed: ${(error as Error).message}`);
      }
    }
  }

  /** A refresh_token grant; undefined (logged) when the provider refuses or fails. */
  private async refresh(session: Session): Promise<Session | undefined> {
    try {
      const tokens = await this.tokenRequest({ grant_type: 'refresh_token', refresh_token: session.rt! });
      let claims = jwtPayload(session.id) ?? {};
      if (tokens.idToken) {
        const fresh = await this.verifyIdToken(tokens.idToken);
        // OIDC Core §12.2: the refreshed ID token is for the same user.
        if (fresh.sub !== claims.sub) throw new GatehouseError(OAuth2Codes.TOKEN, 'the refreshed ID token names another subject');
        claims = fresh;
      }
      const now = Date.now();
      return { id: tokens.idToken ?? session.id, at: tokens.accessToken, rt: tokens.refreshToken ?? session.rt, exp: expiry(tokens.idToken ? claims : {}, tokens, now), iat: session.iat };
    } catch (error) {
      this.log('warn', (error as GatehouseError).code ?? OAuth2Codes.PROVIDER, `refreshing the session failed; a new login follows: ${(error as Error).message}`);
      return undefined;
    }
  }

  private clientHeaders(): Record<string, string> {
    const c = this.config;
    if (!c.clientSecret || !this.basicAuth) return {};
    // RFC 6749 §2.3.1: form-urlencoded id and secret, then Basic.
    return { authorization: `Basic ${Buffer.from(`${encodeURIComponent(c.clientId)}:${encodeURIComponent(c.clientSecret)}`).toString('base64')}` };
  }

  private clientForm(): Record<string, string> {
    const c = this.config;
    if (!c.clientSecret) return { client_id: c.clientId };
    return this.basicAuth ? {} : { client_id: c.clientId, client_secret: c.clientSecret };
  }

  private async tokenRequest(form: Record<string, string>): Promise<Tokens> {
    const meta = await this.discovery.get();
    this.basicAuth = meta.tokenAuthMethods.includes('client_secret_basic') || !meta.tokenAuthMethods.includes('client_secret_post');
    const url = new URL(meta.tokenEndpoint);
    for (const [k, v] of Object.entries(this.config.tokenParams)) url.searchParams.set(k, v);
    const { value } = await this.http.json(url.href, { method: 'POST', form: { ...form, ...this.clientForm() }, headers: this.clientHeaders() });
    const str = (v: unknown) => (typeof v === 'string' && v.length > 0 && v.length <= 16_384 ? v : undefined);
    const accessToken = str(value.access_token);
    if (!accessToken) throw new GatehouseError(OAuth2Codes.PROVIDER, 'the token endpoint answered without a usable access_token');
    const expiresIn = typeof value.expires_in === 'number' && value.expires_in > 0 ? value.expires_in : typeof value.expires_in === 'string' && /^\d{1,9}$/.test(value.expires_in) ? Number(value.expires_in) : undefined;
    return { idToken: str(value.id_token), accessToken, refreshToken: str(value.refresh_token), expiresIn };
  }

  private async verifyIdToken(token: string): Promise<JWTPayload> {
    const meta = await this.discovery.get();
    try {
      const { payload } = await jwtVerify(token, this.jwks.getKey, { issuer: meta.issuer, audience: this.config.clientId, clockTolerance: 5 });
      if (Array.isArray(payload.aud) && payload.aud.length > 1 && payload.azp !== this.config.clientId) throw new Error('azp is not this client');
      return payload;
    } catch (error) {
      if (error instanceof GatehouseError) throw error;
      throw new GatehouseError(OAuth2Codes.TOKEN, `the ID token did not verify: ${(error as Error).message}`);
    }
  }

  /** A failure of the provider or the store: denied (503 for an unreachable provider), logged once per 10 s per cause. */
  private failure(error: unknown): Denied {
    const e = error as GatehouseError;
    const code = typeof e.code === 'string' ? e.code : OAuth2Codes.PROVIDER;
    this.log('error', code, `request denied: ${e.message}`);
    return deny(code === OAuth2Codes.PROVIDER ? 503 : 403, [{ key: 'content-type', value: 'text/plain' }, { key: 'cache-control', value: 'no-store' }], code === OAuth2Codes.PROVIDER ? 'identity provider unavailable\n' : '');
  }

  private log(level: 'warn' | 'error', code: string, message: string): void {
    const suppressed = this.logLimit.take(`${code}:${message.slice(0, 80)}`);
    if (suppressed === undefined) return;
    this.logger[level]({ code, step: this.name, issuer: this.config.issuerUrl, ...(suppressed ? { repeated: suppressed } : {}) }, `oidc step ${this.name}: ${message}`);
  }
}

/** The decision cache's key of a cookie value: its last 48 characters (the GCM tag and IV-dependent bytes). */
function cacheKey(raw: string): string {
  return raw.length > 48 ? raw.slice(-48) : raw;
}

/** When tokens need refreshing: the earlier of the ID token's `exp` and the access token's `expires_in`. */
function expiry(claims: JWTPayload, tokens: Tokens, now: number): number {
  const id = typeof claims.exp === 'number' ? claims.exp * 1000 : Infinity;
  const at = tokens.expiresIn !== undefined ? now + tokens.expiresIn * 1000 : Infinity;
  const exp = Math.min(id, at);
  return Number.isFinite(exp) ? exp : now + 3_600_000;
}

/** RFC 6265 §5.1.3 domain-match of a Host header (port dropped) against `domain`. */
export function domainMatches(host: string, domain: string): boolean {
  const name = host.replace(/:\d+$/, '').toLowerCase();
  const d = domain.replace(/^\./, '').toLowerCase();
  return name === d || name.endsWith(`.${d}`);
}
