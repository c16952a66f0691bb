import {
  AuthorizedResponse,
  DeniedResponse,
  type AuthorizationRequest,
  type AuthorizationResponse,
  type AuthService,
  type Context,
  type ExtAuthPlugin,
  type HeaderValueOption,
  type PluginStore,
} from '@gatehouse/plugin-sdk';

/** The step's `config`. */
export interface OidcLoginConfig {
  /** The provider's issuer URL (`iss`); its discovery document is `<Issuer>/.well-known/openid-configuration`. The step's `egress` must allow its origin. */
  Issuer: string;
  ClientId: string;
  /** The `secretRefs` name of the client secret (sent as HTTP Basic to the token endpoint). */
  ClientSecret: string;
  /** The `secretRefs` name of the cookie key material (≥ 32 characters): sessions are sealed with AES-256-GCM keyed by HKDF of it. */
  CookieSecret: string;
  /** The app's external origin, e.g. `https://app.example.com` (redirect_uri = AppUrl + CallbackPath; `Secure` cookies when https). */
  AppUrl: string;
  CallbackPath: string;
  LogoutPath: string;
  /** `GET <LoginPath>?return_to=/path` starts a login that comes back to `/path` (a local path only). */
  LoginPath: string;
  /** Where logout sends the browser: a local path. */
  AfterLogoutPath: string;
  Scopes: string[];
  /** Extra authorization request parameters (e.g. `{ prompt: consent }`, which oidc-provider wants before it issues refresh tokens). */
  AuthParams: Record<string, string>;
  /** Session lifetime in seconds (the cookie's Max-Age and the store entry's TTL). */
  SessionSeconds: number;
  CookieName: string;
  /** The upstream request header that carries the user's `sub`. */
  SubjectHeader: string;
  /** Send `Authorization: Bearer <access token>` upstream. */
  ForwardAccessToken: boolean;
}

/** The provider's endpoints, from its discovery document. */
interface Discovery {
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
}

/** A login in progress, in the store under `l:<state>` for ten minutes: nothing of it reaches the browser. */
interface PendingLogin {
  nonce: string;
  verifier: string;
  returnTo: string;
}

/** A session, in the store under `s:<sid>`; the browser holds only the sealed `sid`. */
interface Session {
  sub: string;
  accessToken: string;
  refreshToken?: string;
  idToken: string;
  /** When the access token is refreshed (ms since the epoch): a little before it expires. */
  refreshAt: number;
}

/** The cookie value's bound: anything longer is not ours (and is never decrypted). */
const MAX_COOKIE_VALUE = 512;
/** The whole `cookie` header is looked at up to this size; a longer one is ignored (treated as absent). */
const MAX_COOKIE_HEADER = 16 * 1024;
const LOGIN_TTL_MS = 10 * 60_000;
/** A token is refreshed this long before it expires (at most a quarter of its lifetime). */
const REFRESH_SKEW_MS = 5_000;
const CLOCK_SKEW_S = 60;

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

type CryptoKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>;

class OidcLoginService implements AuthService {
  private readonly config: OidcLoginConfig;
  private readonly redirectUri: string;
  private readonly secure: boolean;
  private readonly loginCookie: string;
  /** The discovery document once fetched. A result, never a promise: a fetch whose call ends (a wall timeout) never settles, and a shared promise of it would hang every later call. */
  private discovery: Discovery | undefined;
  private cookieKey: CryptoKey | undefined;
  /** Signing keys by `kid|alg`, refetched on an unknown kid at most every 30 s. */
  private keys = new Map<string, CryptoKey>();
  private keysFetchedAt = 0;

  constructor(config: OidcLoginConfig) {
    this.config = config;
    const app = new URL(config.AppUrl);
    this.redirectUri = `${app.origin}${config.CallbackPath}`;
    this.secure = app.protocol === 'https:';
    this.loginCookie = `${config.CookieName}_login`;
  }

  async Start(ctx: Context): Promise<void> {
    if (!ctx.store) throw new Error('OidcLogin needs ctx.store');
    const material = ctx.secrets[this.config.CookieSecret];
    if (!material || material.length < 32) throw new Error(`secretRefs.${this.config.CookieSecret} (CookieSecret) must hold at least 32 characters`);
    if (!ctx.secrets[this.config.ClientSecret]) throw new Error(`secretRefs.${this.config.ClientSecret} (ClientSecret) is missing`);
    // One AES-256-GCM key for every cookie of this step, derived from the secret (HKDF-SHA-256).
    const base = await crypto.subtle.importKey('raw', encoder.encode(material), 'HKDF', false, ['deriveKey']);
    this.cookieKey = await crypto.subtle.deriveKey(
      { name: 'HKDF', hash: 'SHA-256', salt: encoder.encode('gatehouse oidc-login'), info: encoder.encode(`cookie ${this.config.ClientId}`) },
      base,
      { name: 'AES-GCM', length: 256 },
      false,
      ['encrypt', 'decrypt'],
    );
  }

  async Authorize(ctx: Context, request: AuthorizationRequest): Promise<AuthorizationResponse> {
    const http = request.CheckRequest.attributes.request.http;
    const q = http.path.indexOf('?');
    const pathname = q === -1 ? http.path : http.path.slice(0, q);
    const query = new URLSearchParams(q === -1 ? '' : http.path.slice(q + 1));
    const cookies = parseCookies(http.headers.cookie);
    if (pathname === this.config.CallbackPath) return this.callback(ctx, query, cookies);
    if (pathname === this.config.LogoutPath) return this.logout(ctx, cookies);
    if (pathname === this.config.LoginPath) return this.startLogin(ctx, localPath(query.get('return_to')));
    const sealed = cookies.get(this.config.CookieName);
    const sid = sealed === undefined ? undefined : await this.open(sealed, this.config.CookieName);
    const session = sid === undefined ? undefined : ((await ctx.store!.get(`s:${sid}`)) as Session | undefined);
    if (!session || sid === undefined) {
      // Only a navigation is sent to the login; an API call or a form post gets 401.
      if (http.method !== 'GET' && http.method !== 'HEAD') return DeniedResponse(401);
      return this.startLogin(ctx, localPath(http.path));
    }
    let current = session;
    let responseHeaders: Record<string, string> | undefined;
    if (session.refreshAt <= Date.now()) {
      const refreshed = await this.refresh(ctx, sid, session);
      if (!refreshed) {
        await ctx.store!.delete(`s:${sid}`);
        return http.method === 'GET' || http.method === 'HEAD' ? this.startLogin(ctx, localPath(http.path)) : DeniedResponse(401);
      }
      current = refreshed;
      // The session goes on: the client gets a fresh cookie (new IV, new Max-Age) on this response.
      responseHeaders = { 'set-cookie': await this.sessionCookie(sid) };
    }
    const upstream: Record<string, string> = { [this.config.SubjectHeader]: current.sub };
    if (this.config.ForwardAccessToken) upstream.authorization = `Bearer ${current.accessToken}`;
    const response = AuthorizedResponse(upstream, responseHeaders);
    // The session cookies are the gateway's: the upstream gets the client's other cookies only.
    const rest = http.headers.cookie
      ?.split(';')
      .filter((part) => {
        const name = part.slice(0, part.indexOf('=')).trim();
        return name !== this.config.CookieName && name !== this.loginCookie;
      })
      .join(';')
      .trim();
    const ok = response.CheckResponse.ok_response!;
    if (rest) (ok.headers ??= []).push({ header: { key: 'cookie', value: rest } });
    else ok.headers_to_remove = ['cookie'];
    return response;
  }

  /** A 302 to the provider with state, nonce and a PKCE S256 challenge; the login cookie binds the state to this browser. */
  private async startLogin(ctx: Context, returnTo: string): Promise<AuthorizationResponse> {
    const discovery = await this.discover();
    const state = randomToken();
    const nonce = randomToken();
    const verifier = randomToken();
    const challenge = base64Url(new Uint8Array(await crypto.subtle.digest('SHA-256', encoder.encode(verifier))));
    await ctx.store!.set(`l:${state}`, { nonce, verifier, returnTo } satisfies PendingLogin, { ttlMs: LOGIN_TTL_MS });
    const url = new URL(discovery.authorization_endpoint);
    const params: Record<string, string> = {
      ...this.config.AuthParams,
      response_type: 'code',
      client_id: this.config.ClientId,
      redirect_uri: this.redirectUri,
      scope: this.config.Scopes.join(' '),
      state,
      nonce,
      code_challenge: challenge,
      code_challenge_method: 'S256',
    };
    for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
    const cookie = this.cookie(this.loginCookie, await this.seal(state, this.loginCookie), LOGIN_TTL_MS / 1000, this.config.CallbackPath);
    return DeniedResponse(302, { location: url.href, 'set-cookie': cookie, 'cache-control': 'no-store' });
  }

  /** The provider's redirect back: the state must be this browser's and unused; the code is exchanged with the PKCE verifier; the ID token is verified with the nonce. */
  private async callback(ctx: Context, query: URLSearchParams, cookies: Map<string, string>): Promise<AuthorizationResponse> {
    const state = query.get('state');
    const code = query.get('code');
    const sealed = cookies.get(this.loginCookie);
    const bound = sealed === undefined ? undefined : await this.open(sealed, this.loginCookie);
    if (!state || bound !== state) {
      ctx.logger.warn('login callback refused: the state is not this browser\'s');
      return DeniedResponse(403);
    }
    const pending = (await ctx.store!.get(`l:${state}`)) as PendingLogin | undefined;
    // delete answers true once: of two callbacks racing with one state, one goes on.
    if (!pending || !(await ctx.store!.delete(`l:${state}`))) {
      ctx.logger.warn('login callback refused: the state was used or has expired');
      return DeniedResponse(403);
    }
    if (!code) {
      ctx.logger.warn('login refused by the provider', { error: query.get('error')?.slice(0, 100) });
      return DeniedResponse(403);
    }
    const tokens = await this.token(ctx, { grant_type: 'authorization_code', code, redirect_uri: this.redirectUri, code_verifier: pending.verifier });
    if (!tokens || typeof tokens.id_token !== 'string') return DeniedResponse(403);
    const claims = await this.verifyIdToken(ctx, tokens.id_token, pending.nonce);
    if (!claims) return DeniedResponse(403);
    const sid = randomToken();
    await ctx.store!.set(`s:${sid}`, this.sessionOf(claims.sub as string, tokens), { ttlMs: this.config.SessionSeconds * 1000 });
    ctx.logger.info('login', { sub: claims.sub });
    return redirect(`${new URL(this.config.AppUrl).origin}${pending.returnTo}`, [await this.sessionCookie(sid), this.cookie(this.loginCookie, '', 0, this.config.CallbackPath)]);
  }

  /** Ends the session in the store (a copy of the cookie replayed later finds nothing) and clears the cookie. */
  private async logout(ctx: Context, cookies: Map<string, string>): Promise<AuthorizationResponse> {
    const sealed = cookies.get(this.config.CookieName);
    const sid = sealed === undefined ? undefined : await this.open(sealed, this.config.CookieName);
    if (sid !== undefined) await ctx.store!.delete(`s:${sid}`);
    return redirect(`${new URL(this.config.AppUrl).origin}${this.config.AfterLogoutPath}`, [this.cookie(this.config.CookieName, '', 0, '/')]);
  }

  /**
   * The refresh_token grant. One request of a session refreshes (a lock in the store, so a
   * rotating refresh token is spent once); the others wait for its result, briefly.
   */
  private async refresh(ctx: Context, sid: string, session: Session): Promise<Session | undefined> {
    if (!session.refreshToken) return undefined;
    const store = ctx.store!;
    if (!(await store.setIfAbsent(`r:${sid}`, 1, { ttlMs: 5_000 }))) return waitForRefresh(store, sid, session);
    try {
      // Another request may have refreshed between this one's read and its lock: its tokens stand
      // (a rotating refresh token read before that is spent already).
      const latest = (await store.get(`s:${sid}`)) as Session | undefined;
      if (!latest) return undefined;
      if (latest.accessToken !== session.accessToken) return latest;
      const tokens = await this.token(ctx, { grant_type: 'refresh_token', refresh_token: session.refreshToken });
      if (!tokens || typeof tokens.access_token !== 'string') return undefined;
      if (typeof tokens.id_token === 'string' && !(await this.verifyIdToken(ctx, tokens.id_token, undefined, session.sub))) return undefined;
      const next = this.sessionOf(session.sub, { ...tokens, refresh_token: tokens.refresh_token ?? session.refreshToken, id_token: tokens.id_token ?? session.idToken });
      await store.set(`s:${sid}`, next, { ttlMs: this.config.SessionSeconds * 1000 });
      return next;
    } finally {
      await store.delete(`r:${sid}`);
    }
  }

  private sessionOf(sub: string, tokens: Record<string, unknown>): Session {
    const lifetimeMs = (typeof tokens.expires_in === 'number' && tokens.expires_in > 0 ? tokens.expires_in : 300) * 1000;
    const session: Session = { sub, accessToken: String(tokens.access_token), idToken: String(tokens.id_token), refreshAt: Date.now() + lifetimeMs - Math.min(REFRESH_SKEW_MS, lifetimeMs / 4) };
    if (typeof tokens.refresh_token === 'string') session.refreshToken = tokens.refresh_token;
    return session;
  }

  /** POSTs to the token endpoint; the JSON answer, or undefined (logged) when the provider refuses. */
  private async token(ctx: Context, form: Record<string, string>): Promise<Record<string, unknown> | undefined> {
    const discovery = await this.discover();
    const basic = btoa(`${encodeURIComponent(this.config.ClientId)}:${encodeURIComponent(ctx.secrets[this.config.ClientSecret]!)}`);
    const response = await fetch(discovery.token_endpoint, {
      method: 'POST',
      headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams(form).toString(),
    });
    const text = await response.text();
    if (response.status !== 200) {
      ctx.logger.warn('the token endpoint refused', { grant: form.grant_type, status: response.status, error: text.slice(0, 200) });
      return undefined;
    }
    try {
      const body = JSON.parse(text) as unknown;
      return typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
    } catch {
      return undefined;
    }
  }

  /** The ID token's claims when its signature, `iss`, `aud`, `exp` and `nonce` (or, on refresh, `sub`) hold; undefined (logged) otherwise. */
  private async verifyIdToken(ctx: Context, token: string, nonce: string | undefined, sub?: string): Promise<Record<string, unknown> | undefined> {
    const refuse = (why: string) => {
      ctx.logger.warn(`ID token refused: ${why}`);
      return undefined;
    };
    const parts = token.split('.');
    if (parts.length !== 3 || token.length > 16_384) return refuse('not a JWS');
    let header: { alg?: string; kid?: string };
    let claims: Record<string, unknown>;
    try {
      header = JSON.parse(decoder.decode(fromBase64Url(parts[0]!))) as { alg?: string; kid?: string };
      claims = JSON.parse(decoder.decode(fromBase64Url(parts[1]!))) as Record<string, unknown>;
    } catch {
      return refuse('not JSON');
    }
    const alg = header.alg ?? '';
    if (!(alg in ALGORITHMS)) return refuse(`alg ${JSON.stringify(alg).slice(0, 20)} is not accepted`);
    const key = await this.keyFor(ctx, header.kid ?? '', alg);
    if (!key) return refuse('no key for its kid');
    const valid = await crypto.subtle.verify(ALGORITHMS[alg]!.verify, key, fromBase64Url(parts[2]!), encoder.encode(`${parts[0]}.${parts[1]}`));
    if (!valid) return refuse('bad signature');
    const now = Date.now() / 1000;
    const aud = claims.aud;
    if (claims.iss !== this.config.Issuer) return refuse('wrong issuer');
    if (!(aud === this.config.ClientId || (Array.isArray(aud) && aud.includes(this.config.ClientId)))) return refuse('not for this client');
    if (typeof claims.exp !== 'number' || claims.exp + CLOCK_SKEW_S < now) return refuse('expired');
    if (typeof claims.sub !== 'string' || claims.sub === '') return refuse('no sub');
    if (nonce !== undefined && claims.nonce !== nonce) return refuse('wrong nonce');
    if (sub !== undefined && claims.sub !== sub) return refuse('another subject');
    return claims;
  }

  private async keyFor(ctx: Context, kid: string, alg: string): Promise<CryptoKey | undefined> {
    const id = `${kid}|${alg}`;
    if (!this.keys.has(id) && Date.now() - this.keysFetchedAt > 30_000) {
      this.keysFetchedAt = Date.now();
      const response = await fetch((await this.discover()).jwks_uri, { headers: { accept: 'application/json' } });
      const jwks = (await response.json()) as { keys?: Record<string, unknown>[] };
      const next = new Map<string, CryptoKey>();
      for (const jwk of jwks.keys ?? []) {
        const keyAlg = typeof jwk.alg === 'string' ? jwk.alg : jwk.kty === 'EC' ? 'ES256' : 'RS256';
        const params = ALGORITHMS[keyAlg];
        if (!params || (jwk.use !== undefined && jwk.use !== 'sig')) continue;
        try {
          const { key_ops: _ops, use: _use, ...clean } = jwk;
          next.set(`${String(jwk.kid ?? '')}|${keyAlg}`, await crypto.subtle.importKey('jwk', { ...clean, alg: keyAlg } as never, params.import, false, ['verify']));
        } catch {
          ctx.logger.warn('a JWKS key could not be imported', { kid: String(jwk.kid ?? '') });
        }
      }
      this.keys = next;
    }
    return this.keys.get(id);
  }

  /** The discovery document, fetched by the first call that needs it (each call fetches for itself until one has it). */
  private async discover(): Promise<Discovery> {
    if (this.discovery) return this.discovery;
    const response = await fetch(`${this.config.Issuer.replace(/\/$/, '')}/.well-known/openid-configuration`, { headers: { accept: 'application/json' } });
    if (response.status !== 200) throw new Error(`discovery answered ${response.status}`);
    const document = (await response.json()) as Discovery & { issuer?: string };
    if (document.issuer !== this.config.Issuer) throw new Error(`discovery names issuer ${JSON.stringify(document.issuer)}, not ${JSON.stringify(this.config.Issuer)}`);
    for (const field of ['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const) if (typeof document[field] !== 'string') throw new Error(`discovery has no ${field}`);
    this.discovery = document;
    return document;
  }

  private async sessionCookie(sid: string): Promise<string> {
    return this.cookie(this.config.CookieName, await this.seal(sid, this.config.CookieName), this.config.SessionSeconds, '/');
  }

  private cookie(name: string, value: string, maxAge: number, path: string): string {
    return `${name}=${value}; Path=${path}; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${this.secure ? '; Secure' : ''}`;
  }

  /** AES-256-GCM of `text` with a random 96-bit IV; the cookie's name is the additional data, so one cookie cannot stand in for another. */
  private async seal(text: string, name: string): Promise<string> {
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: 'AES-GCM', iv, additionalData: encoder.encode(name) }, this.cookieKey!, encoder.encode(text)));
    const out = new Uint8Array(12 + sealed.length);
    out.set(iv);
    out.set(sealed, 12);
    return base64Url(out);
  }

  /** The sealed text, or undefined for anything this step did not seal (altered, another key, too long, not base64url). */
  private async open(value: string, name: string): Promise<string | undefined> {
    if (value.length > MAX_COOKIE_VALUE || value.length < 40) return undefined;
    try {
      const bytes = fromBase64Url(value);
      const plain = await crypto.subtle.decrypt({ name: 'AES-GCM', iv: bytes.slice(0, 12), additionalData: encoder.encode(name) }, this.cookieKey!, bytes.slice(12));
      return decoder.decode(plain);
    } catch {
      return undefined;
    }
  }
}

/** Waits up to 600 ms (inside the call's wall deadline) for another request's refresh of `sid` to land in the store. */
async function waitForRefresh(store: PluginStore, sid: string, stale: Session): Promise<Session | undefined> {
  for (let i = 0; i < 12; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const now = (await store.get(`s:${sid}`)) as Session | undefined;
    if (!now) return undefined;
    if (now.accessToken !== stale.accessToken) return now;
  }
  return undefined;
}

/** A 302 to `location` setting each of `cookies` (two `set-cookie` lines, never one comma-joined). */
function redirect(location: string, cookies: string[]): AuthorizationResponse {
  const response = DeniedResponse(302, { location, 'cache-control': 'no-store' });
  const denied = response.CheckResponse.denied_response!;
  const headers: HeaderValueOption[] = (denied.headers ??= []);
  for (const cookie of cookies) headers.push({ header: { key: 'set-cookie', value: cookie }, append: true });
  return response;
}

/**
 * A return URL that stays on this site: a path starting with one `/`, no `//` or `/\` (which
 * browsers read as another host), no backslash or control character anywhere (browsers drop tabs
 * and newlines, turning `/\t/evil` into `//evil`); anything else is `/`.
 */
export function localPath(value: string | null | undefined): string {
  if (!value || value.length > 2048 || value[0] !== '/') return '/';
  if (value[1] === '/' || value[1] === '\\') return '/';
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x21 || c === 0x7f || c === 0x5c) return '/';
  }
  return value;
}

/** The request's cookies by name (the first of a repeated name); none when the header is absurdly long. */
function parseCookies(header: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  if (!header || header.length > MAX_COOKIE_HEADER) return out;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    const name = part.slice(0, eq).trim();
    if (!out.has(name)) out.set(name, part.slice(eq + 1).trim());
  }
  return out;
}

function randomToken(): string {
  return base64Url(crypto.getRandomValues(new Uint8Array(32)));
}

function base64Url(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function fromBase64Url(text: string): Uint8Array {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new Error('not base64url');
  const base64 = text.replace(/-/g, '+').replace(/_/g, '/');
  return Uint8Array.from(atob(base64 + '='.repeat((4 - (base64.length % 4)) % 4)), (c) => c.charCodeAt(0));
}

/** ID token algorithms accepted (asymmetric only: the client secret is never a signing key here). */
const ALGORITHMS: Record<string, { import: { name: string; hash?: string; namedCurve?: string }; verify: { name: string; hash?: string } }> = {
  RS256: { import: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, verify: { name: 'RSASSA-PKCS1-v1_5' } },
  ES256: { import: { name: 'ECDSA', namedCurve: 'P-256' }, verify: { name: 'ECDSA', hash: 'SHA-256' } },
};

/** The exported plugin (`pluginAuth.name: OidcLogin`). */
export const OidcLogin: ExtAuthPlugin = {
  NewConfigInstance: (): OidcLoginConfig => ({
    Issuer: '',
    ClientId: '',
    ClientSecret: 'ClientSecret',
    CookieSecret: 'CookieSecret',
    AppUrl: '',
    CallbackPath: '/oidc/callback',
    LogoutPath: '/oidc/logout',
    LoginPath: '/oidc/login',
    AfterLogoutPath: '/',
    Scopes: ['openid'],
    AuthParams: {},
    SessionSeconds: 8 * 3600,
    CookieName: '__gh_session',
    SubjectHeader: 'x-user-sub',
    ForwardAccessToken: true,
  }),
  GetAuthService(_ctx: Context, raw: unknown): AuthService {
    const config = raw as OidcLoginConfig;
    const issuer = URL.parse(config.Issuer);
    if (!issuer || (issuer.protocol !== 'https:' && issuer.protocol !== 'http:')) throw new Error(`Issuer must be an http(s) URL, got ${JSON.stringify(config.Issuer)}`);
    const app = URL.parse(config.AppUrl);
    if (!app || (app.protocol !== 'https:' && app.protocol !== 'http:')) throw new Error(`AppUrl must be an http(s) URL, got ${JSON.stringify(config.AppUrl)}`);
    if (!config.ClientId) throw new Error('ClientId is required');
    for (const field of ['CallbackPath', 'LogoutPath', 'LoginPath', 'AfterLogoutPath'] as const) {
      if (localPath(config[field]) !== config[field] || config[field].includes('?')) throw new Error(`${field} must be a local path without a query, got ${JSON.stringify(config[field])}`);
    }
    if (!Array.isArray(config.Scopes) || !config.Scopes.includes('openid')) throw new Error('Scopes must include openid');
    if (!Number.isSafeInteger(config.SessionSeconds) || config.SessionSeconds < 60) throw new Error('SessionSeconds must be a whole number ≥ 60');
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(config.CookieName)) throw new Error(`CookieName ${JSON.stringify(config.CookieName)} is not a cookie name`);
    return new OidcLoginService(config);
  },
};
