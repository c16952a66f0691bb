import { generateKeyPairSync, randomUUID, sign, timingSafeEqual, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

/**
 * A small OAuth 2.0 token issuer on 127.0.0.1:9105 for the quickstart's JWT route (not for
 * production): the client_credentials grant (`POST /token`, client quickstart-cli /
 * quickstart-secret by HTTP Basic or form fields) issues RS256 JWT access tokens for the
 * audience `quickstart-api`, its public keys at `/jwks.json` (and OpenID discovery), and
 * `POST /rotate` switches to a new signing key (the old one stays published), to watch the Jwt
 * plugin refetch the JWKS on the new `kid`.
 */
export const ISSUER = 'http://127.0.0.1:9105';
export const CLIENT = { id: 'quickstart-cli', secret: 'quickstart-secret' };
export const AUDIENCE = 'quickstart-api';

interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

function newKey(): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { kid: `quickstart-${randomUUID().slice(0, 8)}`, privateKey, publicKey };
}

const b64url = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

function json(res: ServerResponse, status: number, body: object, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers }).end(JSON.stringify(body) + '\n');
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The client's id and secret from HTTP Basic (RFC 6749 2.3.1) or the form. */
function clientOf(req: IncomingMessage, form: URLSearchParams): { id: string; secret: string } | undefined {
  const basic = /^Basic +(\S+)$/i.exec(req.headers.authorization ?? '');
  if (basic) {
    const decoded = Buffer.from(basic[1]!, 'base64').toString();
    const colon = decoded.indexOf(':');
    return colon < 0 ? undefined : { id: decodeURIComponent(decoded.slice(0, colon)), secret: decodeURIComponent(decoded.slice(colon + 1)) };
  }
  const id = form.get('client_id');
  const secret = form.get('client_secret');
  return id && secret ? { id, secret } : undefined;
}

export default async function start() {
  // Newest first: the first key signs; the others stay published for tokens already issued.
  const keys: SigningKey[] = [newKey()];

  const issue = (clientId: string, scope: string): string => {
    const now = Math.floor(Date.now() / 1000);
    const claims = { iss: ISSUER, sub: clientId, aud: AUDIENCE, client_id: clientId, scope, iat: now, exp: now + 300, jti: randomUUID(), org: { name: 'Acme Corp', plan: 'gold' } };
    const key = keys[0]!;
    const input = `${b64url({ alg: 'RS256', typ: 'at+jwt', kid: key.kid })}.${b64url(claims)}`;
    return `${input}.${sign('sha256', Buffer.from(input), key.privateKey).toString('base64url')}`;
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method === 'GET' && path === '/jwks.json') {
        return json(res, 200, { keys: keys.map((k) => ({ ...k.publicKey.export({ format: 'jwk' }), kid: k.kid, use: 'sig', alg: 'RS256' })) });
      }
      if (req.method === 'GET' && path === '/.well-known/openid-configuration') {
        return json(res, 200, { issuer: ISSUER, token_endpoint: `${ISSUER}/token`, jwks_uri: `${ISSUER}/jwks.json`, grant_types_supported: ['client_credentials'], id_token_signing_alg_values_supported: ['RS256'] });
      }
      if (req.method === 'POST' && path === '/token') {
        const form = new URLSearchParams(Buffer.concat(chunks).toString());
        if (form.get('grant_type') !== 'client_credentials') return json(res, 400, { error: 'unsupported_grant_type' });
        const client = clientOf(req, form);
        if (!client || client.id !== CLIENT.id || !sameSecret(client.secret, CLIENT.secret)) return json(res, 401, { error: 'invalid_client' }, { 'www-authenticate': 'Basic realm="token"' });
        return json(res, 200, { access_token: issue(client.id, form.get('scope') ?? 'echo:read'), token_type: 'Bearer', expires_in: 300 });
      }
      if (req.method === 'POST' && path === '/rotate') {
        keys.unshift(newKey());
        keys.length = Math.min(keys.length, 2);
        return json(res, 200, { signing: keys[0]!.kid, published: keys.map((k) => k.kid) });
      }
      json(res, 404, { error: 'not_found' });
    });
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(9105, '127.0.0.1', resolve));
  return { name: 'token-issuer', url: ISSUER, close: () => new Promise<void>((r) => server.close(() => r())) };
}
