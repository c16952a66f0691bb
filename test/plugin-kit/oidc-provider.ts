/**
 * A real OpenID provider for end-to-end tests: the `oidc-provider` package on 127.0.0.1, issuing
 * JWT access tokens (RS256) by the client_credentials grant with resource indicators. Its keys
 * rotate by replacing the provider instance behind the same server (same issuer URL), as an
 * issuer's deployment would.
 */
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

/** The audience every token is for (the API behind the gateway). */
export const API_AUDIENCE = 'https://api.test';
/** A resource whose tokens are for {@link API_AUDIENCE} but live three seconds (at least two whole seconds: `iat` is rounded down). */
export const SHORT_LIVED_RESOURCE = 'https://api.test/short-lived';

/** A private RSA signing key as a JWK, named `kid`. */
export function signingKey(kid: string): Record<string, unknown> {
  return { ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }), kid, use: 'sig', alg: 'RS256' };
}

export interface OidcIssuer {
  /** `http://127.0.0.1:<port>`: the `iss` of its tokens. */
  readonly issuer: string;
  /** Where it publishes its public keys. */
  readonly jwksUrl: string;
  /** Requests for the JWKS so far. */
  readonly jwksFetches: number;
  /** A client_credentials access token for `resource` (default: the API). */
  token(resource?: string): Promise<string>;
  /** Serves from a new provider instance holding `keys` (the first signs); tokens issued before stay valid where their key is still published. */
  useKeys(keys: Record<string, unknown>[]): void;
  close(): Promise<void>;
}

export const CLIENT = { id: 'orders-service', secret: 'client-secret-for-tests' };

/** Starts the provider with `keys` (the first signs); `extraClaims` go into every access token. */
export async function startOidcProvider(keys: Record<string, unknown>[], extraClaims: Record<string, unknown> = {}): Promise<OidcIssuer> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const make = (jwks: Record<string, unknown>[]) =>
    new Provider(issuer, {
      clients: [{ client_id: CLIENT.id, client_secret: CLIENT.secret, grant_types: ['client_credentials'], redirect_uris: [], response_types: [], token_endpoint_auth_method: 'client_secret_basic' }],
      jwks: { keys: jwks as never[] },
      // Each resource server's own TTL (the short-lived one: 3 s).
      ttl: { ClientCredentials: (_ctx: unknown, token: { resourceServer?: { accessTokenTTL?: number } }) => token.resourceServer?.accessTokenTTL ?? 300 },
      extraTokenClaims: () => extraClaims,
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        resourceIndicators: {
          enabled: true,
          defaultResource: () => API_AUDIENCE,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx: unknown, resource: string) => ({
            scope: 'orders:read',
            audience: resource === SHORT_LIVED_RESOURCE ? API_AUDIENCE : resource,
            accessTokenTTL: resource === SHORT_LIVED_RESOURCE ? 3 : 300,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          }),
        },
      },
    });
  let callback = make(keys).callback();
  let jwksFetches = 0;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.url === '/jwks') jwksFetches++;
    callback(req, res);
  });
  return {
    issuer,
    jwksUrl: `${issuer}/jwks`,
    get jwksFetches() {
      return jwksFetches;
    },
    async token(resource?: string) {
      const body = new URLSearchParams({ grant_type: 'client_credentials', scope: 'orders:read', ...(resource ? { resource } : {}) });
      const response = await fetch(`${issuer}/token`, { method: 'POST', body, headers: { authorization: `Basic ${Buffer.from(`${CLIENT.id}:${CLIENT.secret}`).toString('base64')}` } });
      const answer = (await response.json()) as { access_token?: string };
      if (response.status !== 200 || !answer.access_token) throw new Error(`the provider refused a token: ${response.status} ${JSON.stringify(answer)}`);
      return answer.access_token;
    },
    useKeys(next) {
      callback = make(next).callback();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The decoded header and payload of a JWT (not verified). */
export function decodeJwt(token: string): { header: Record<string, unknown>; payload: Record<string, unknown> } {
  const [header, payload] = token.split('.');
  return { header: JSON.parse(Buffer.from(header!, 'base64url').toString()), payload: JSON.parse(Buffer.from(payload!, 'base64url').toString()) };
}
