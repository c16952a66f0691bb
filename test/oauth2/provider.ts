/**
 * A real OpenID provider for the OIDC tests: the `oidc-provider` package on 127.0.0.1 (port 0, or a
 * given address), with the authorization code flow, refresh tokens (offline_access), introspection,
 * revocation and RP-initiated logout, and its own login and consent pages (HTML forms a test's
 * HTTP client fills in: user `admin`, password `password`). Token lifetimes are short when asked,
 * so refresh can be tested without waiting minutes.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';
import { signingKey } from '../plugin-kit/oidc-provider.ts';

export const USER = { name: 'admin', password: 'password' };
export const CLIENT = { id: 'gloo', secret: 'secretvalue' };

/** The parts of oidc-provider's API the helper uses (the package ships no types). */
interface ProviderApi {
  callback(): (req: IncomingMessage, res: ServerResponse) => void;
  interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<{ uid: string; prompt: { name: string; details: Record<string, string[] | undefined> }; params: Record<string, string>; session?: { accountId: string }; grantId?: string }>;
  interactionFinished(req: IncomingMessage, res: ServerResponse, result: object, options: { mergeWithLastSubmission: boolean }): Promise<void>;
  Grant: { new (init: { accountId: string; clientId: string }): GrantApi; find(id: string): Promise<GrantApi | undefined> };
}
interface GrantApi {
  addOIDCScope(scope: string): void;
  addOIDCClaims(claims: string[]): void;
  addResourceScope(resource: string, scope: string): void;
  save(): Promise<string>;
}

export interface TestProvider {
  readonly issuer: string;
  readonly server: Server;
  /** Requests per path so far (e.g. `/token`, `/jwks`, `/token/introspection`). */
  readonly hits: Map<string, number>;
  /** Login forms submitted with the right password. */
  readonly logins: number;
  /** Serves from a new provider instance signing with the first of `keys` (the others stay published). */
  rotate(keys: Record<string, unknown>[]): void;
  /** A client_credentials access token (opaque) of the test client. */
  clientCredentialsToken(): Promise<string>;
  close(): Promise<void>;
}

/** Reads a small urlencoded body. */
async function form(req: IncomingMessage): Promise<URLSearchParams> {
  let body = '';
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

const page = (title: string, action: string, fields: string) =>
  `<!doctype html><title>${title}</title><form method="post" action="${action}">${fields}<button type="submit">${title}</button></form>`;

/**
 * Starts the provider. `redirectUris`: the app's callback URLs; `postLogoutUris`: where logout may return;
 * `ttl`: seconds of ID and access tokens (default 300).
 */
export async function startProvider(options: { redirectUris: string[]; postLogoutUris: string[]; ttl?: number; host?: string; port?: number; issuer?: string; client?: { id: string; secret: string }; routes?: Record<string, string> }): Promise<TestProvider> {
  const client = options.client ?? CLIENT;
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve));
  const issuer = options.issuer ?? `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const ttl = options.ttl ?? 300;
  const ProviderClass = Provider as unknown as new (issuer: string, config: Record<string, unknown>) => ProviderApi;
  const make = (keys: Record<string, unknown>[]) => new ProviderClass(issuer, {
    clients: [
      {
        client_id: client.id,
        client_secret: client.secret,
        redirect_uris: options.redirectUris,
        post_logout_redirect_uris: options.postLogoutUris,
        grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    jwks: { keys },
    cookies: { keys: ['cookie-key-for-tests'] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    findAccount: (_ctx: unknown, id: string) => ({ accountId: id, claims: () => ({ sub: id, email: `${id}@example.com`, email_verified: true, name: `The ${id}` }) }),
    ...(options.routes ? { routes: options.routes } : {}),
    interactions: { url: (_ctx: unknown, interaction: { uid: string }) => `/interaction/${interaction.uid}` },
    ttl: { IdToken: ttl, AccessToken: ttl, ClientCredentials: 300, Session: 3600, Grant: 3600, Interaction: 600, RefreshToken: 3600, AuthorizationCode: 60 },
    pkce: { required: () => true },
    // As Dex and most providers: the scopes' claims (email) are in the ID token itself.
    conformIdTokenClaims: false,
    // Rotated on every use, as many providers do: a refresh must store the new one.
    rotateRefreshToken: true,
    features: {
      devInteractions: { enabled: false },
      revocation: { enabled: true },
      introspection: { enabled: true },
      clientCredentials: { enabled: true },
      rpInitiatedLogout: { enabled: true },
    },
  });
  let provider = make([signingKey('provider-key-1')]);
  let handle = provider.callback();
  const hits = new Map<string, number>();
  let logins = 0;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0]!;
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const m = /^\/interaction\/([^/]+)(?:\/(login|confirm))?$/.exec(path);
    if (!m) return handle(req, res);
    void (async () => {
      const details = await provider.interactionDetails(req, res);
      if (req.method === 'GET') {
        const body = details.prompt.name === 'login'
          ? page('Sign in', `/interaction/${m[1]}/login`, '<input name="username"><input name="password" type="password">')
          : page('Authorize', `/interaction/${m[1]}/confirm`, '');
        res.writeHead(200, { 'content-type': 'text/html' }).end(body);
        return;
      }
      if (m[2] === 'login') {
        const fields = await form(req);
        if (fields.get('username') !== USER.name || fields.get('password') !== USER.password) {
          res.writeHead(401, { 'content-type': 'text/html' }).end(page('Sign in', `/interaction/${m[1]}/login`, '<p>wrong password</p>'));
          return;
        }
        logins++;
        await provider.interactionFinished(req, res, { login: { accountId: USER.name } }, { mergeWithLastSubmission: false });
        return;
      }
      const grant = details.grantId ? await provider.Grant.find(details.grantId) : new provider.Grant({ accountId: details.session!.accountId, clientId: details.params.client_id! });
      const missing = details.prompt.details;
      if (missing.missingOIDCScope) grant!.addOIDCScope(missing.missingOIDCScope.join(' '));
      if (missing.missingOIDCClaims) grant!.addOIDCClaims(missing.missingOIDCClaims);
      const grantId = await grant!.save();
      await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    })().catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' }).end(String((error as Error).message));
    });
  });
  return {
    issuer,
    server,
    hits,
    get logins() {
      return logins;
    },
    rotate(keys) {
      // A new instance behind the same server and issuer (its in-memory sessions and grants start empty).
      provider = make(keys);
      handle = provider.callback();
    },
    async clientCredentialsToken() {
      const address = server.address() as AddressInfo;
      const response = await fetch(`http://${address.address}:${address.port}/token`, {
        method: 'POST',
        body: new URLSearchParams({ grant_type: 'client_credentials' }),
        headers: { authorization: `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString('base64')}` },
      });
      const answer = (await response.json()) as { access_token?: string };
      if (!answer.access_token) throw new Error(`no token: ${JSON.stringify(answer)}`);
      return answer.access_token;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
