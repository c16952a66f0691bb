// `node --expose-gc test/bench/oidc-check-cost.ts`: the per-request cost of an OIDC session-cookie check in the
// step itself (no gateway, no network): a warm session (decision cached by cookie) and a cold one
// (cookie opened: base64url, AES-256-GCM, inflate, JSON, headers built), in µs per check.
import { Sealer } from '../../core/src/extauth/oauth2/cookies.ts';
import { compileOidc } from '../../core/src/extauth/oauth2/compile.ts';
import { OidcStep } from '../../core/src/extauth/oauth2/oidc-step.ts';
import { ProviderHttp } from '../../core/src/extauth/oauth2/provider-http.ts';
import { CookieSessionStore } from '../../core/src/extauth/oauth2/sessions.ts';

const key = Buffer.alloc(32, 3);
const spec = { oidcAuthorizationCode: { appUrl: 'http://app/', callbackPath: '/cb', clientId: 'c', issuerUrl: 'http://127.0.0.1:9/', clientSecretRef: { name: 's' }, headers: { idTokenHeader: 'x-id-token', accessTokenHeader: 'authorization' }, identityToken: { claimsToHeaders: [{ claim: 'email', header: 'x-email' }] } } };
const { compiled } = compileOidc(spec, 'ns', () => ({ 'client-secret': 'x' }));
const config = { ...compiled!, key };
const sealer = new Sealer(key);
const quiet = { info() {}, warn() {}, error() {}, debug() {} } as never;
const step = new OidcStep(config, { name: 'oidc', logger: quiet, http: new ProviderHttp({ timeoutMs: 50 }), store: new CookieSessionStore('__session', sealer, config.cookie) });
const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
// Realistic sizes: an RS256 ID token (~900 B) and a JWT access token (~800 B).
const idToken = `${b64({ alg: 'RS256', kid: 'k' })}.${b64({ iss: 'http://idp/', sub: 'user-1234', aud: 'c', email: 'u@example.com', name: 'A User', exp: 4_000_000_000, iat: 1, nonce: 'n'.repeat(32) })}.${'s'.repeat(342)}`;
const accessToken = `${b64({ alg: 'RS256', kid: 'k' })}.${b64({ iss: 'http://idp/', sub: 'user-1234', scope: 'openid email', exp: 4_000_000_000, jti: 'j'.repeat(32) })}.${'s'.repeat(342)}`;
const cookieFor = () => `__session=${sealer.seal({ id: idToken, at: accessToken, rt: 'r'.repeat(43), exp: 4_000_000_000_000, iat: Date.now() }, '__session')}`;
const request = (cookie: string) => ({ attributes: { request: { http: { method: 'GET', path: '/x', host: 'app', scheme: 'http', headers: { cookie } } }, context_extensions: {} } }) as never;

async function measure(label: string, cookies: string[]): Promise<void> {
  for (const c of cookies.slice(0, 1000)) await step.authorize(request(c));
  // Minting the cookies (deflate + seal) leaves native zlib garbage behind; collected before timing when --expose-gc.
  (globalThis as { gc?: () => void }).gc?.();
  const n = cookies.length;
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const d = await step.authorize(request(cookies[i]!));
    if (!d.allowed) throw new Error('denied');
  }
  console.log(`${label}: ${(Number(process.hrtime.bigint() - start) / 1000 / n).toFixed(2)} µs per check (cookie ${cookies[0]!.length} bytes)`);
}

const warm = cookieFor();
await measure('warm session (decision cached by cookie)', Array.from({ length: 200_000 }, () => warm));
// Distinct cookies beyond the 10,000-entry cache: every check opens its cookie.
await measure('cold session (cookie opened each time)', Array.from({ length: 30_000 }, cookieFor));
await step.close();
