// OIDC session row (issue 28): a route behind an `oauth2.oidcAuthorizationCode` AuthConfig, each
// request carrying a valid sealed session cookie (minted here with the AuthConfig's
// cipherConfig key, as the callback would have set it), against the route without auth.
// The session check never calls the provider: the issuer need not be reachable.
import { Sealer } from '../../../core/src/extauth/oauth2/cookies.ts';
import type { BenchContext, BenchModule, BenchScenario, RunningTarget } from '../scenario.ts';
import { benchManifests } from '../tools.ts';

const KEY = 'bench-session-key-32-bytes-long!';
const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
const ID_TOKEN = `${b64({ alg: 'RS256', kid: 'k' })}.${b64({ iss: 'http://127.0.0.1:9/', sub: 'bench-user', aud: 'bench', email: 'bench@example.com', exp: 4_000_000_000 })}.c2ln`;
const COOKIE = `__session=${new Sealer(Buffer.from(KEY)).seal({ id: ID_TOKEN, at: 'opaque-access-token', exp: 4_000_000_000_000, iat: Date.now() }, '__session')}`;

function files(ctx: BenchContext): Record<string, object[]> {
  const oidc = {
    name: 'oidc',
    configs: [
      {
        oauth2: {
          oidcAuthorizationCode: {
            appUrl: 'http://127.0.0.1/',
            callbackPath: '/callback',
            clientId: 'bench',
            clientSecretRef: { name: 'oauth' },
            issuerUrl: 'http://127.0.0.1:9/',
            headers: { idTokenHeader: 'x-id-token' },
            identityToken: { claimsToHeaders: [{ claim: 'email', header: 'x-email' }] },
            session: { cipherConfig: { keyRef: { name: 'session-key' } }, cookieOptions: { notSecure: true, maxAge: 0 } },
          },
        },
      },
    ],
  };
  const secret = (name: string, data: Record<string, string>) => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name }, stringData: data });
  return { 'bench.yaml': [secret('oauth', { 'client-secret': 'bench-secret' }), secret('session-key', { key: KEY }), ...benchManifests(ctx.upstreamPort, oidc)] };
}

async function expectAllowed(target: RunningTarget): Promise<RunningTarget> {
  const response = await fetch(target.url, { headers: { cookie: COOKIE } });
  await response.arrayBuffer();
  if (response.status !== 200) {
    await target.stop();
    throw new Error(`the OIDC route answered ${response.status} to a valid session cookie, not 200`);
  }
  return target;
}

const ROW = 'gatehouse run, OIDC session-cookie route';

export const scenarios: BenchScenario[] = [{ group: 'extauth', name: ROW, request: { headers: { cookie: COOKIE } }, start: async (ctx) => expectAllowed(await ctx.gatehouse(files(ctx), ['--access-log', 'false'])) }];

export const goals: BenchModule['goals'] = [{ row: ROW, against: 'gatehouse run, route without auth', minThroughputRatio: 0.7 }];
