import { createSign, randomUUID, X509Certificate } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A small real token server (distribution auth spec, token.md): Basic-authenticated GET
 * `/token?service&scope` answering a JWT that docker-registry's `auth.token` verifies with
 * the test certificate (x5c header). Users get the actions their grant allows; anonymous none.
 */
export interface TokenServer {
  readonly realm: string;
  readonly service: string;
  readonly issuer: string;
  readonly certFile: string;
  /** Every token request seen (for asserting that auth actually went through here). */
  readonly requests: { user: string | undefined; scope: string[]; service: string | null }[];
  close(): Promise<void>;
}

export async function startTokenServer(users: Record<string, { password: string; actions: string[] }>): Promise<TokenServer> {
  const dir = await mkdtemp(join(tmpdir(), 'gh-token-'));
  const keyFile = join(dir, 'key.pem');
  const certFile = join(dir, 'cert.pem');
  // openssl makes the self-signed certificate the registry trusts (rootcertbundle).
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-subj', '/CN=gatehouse-test-token', '-days', '2'], { stdio: 'ignore' });
  const key = await readFile(keyFile, 'utf8');
  const certDer = new X509Certificate(await readFile(certFile)).raw.toString('base64');
  const service = 'gatehouse-test-registry';
  const issuer = 'gatehouse-test-issuer';
  const requests: TokenServer['requests'] = [];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    let user: string | undefined;
    const auth = req.headers.authorization;
    if (auth?.startsWith('Basic ')) {
      const [name, ...rest] = Buffer.from(auth.slice(6), 'base64').toString().split(':');
      if (!users[name!] || users[name!]!.password !== rest.join(':')) {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="token"' }).end();
        return;
      }
      user = name;
    }
    const scopes = url.searchParams.getAll('scope');
    requests.push({ user, scope: scopes, service: url.searchParams.get('service') });
    const access = scopes.flatMap((scope) => {
      const [type, name, actions] = scope.split(':');
      const allowed = (actions ?? '').split(',').filter((a) => user !== undefined && users[user]!.actions.includes(a));
      return type === 'repository' && name ? [{ type, name, actions: allowed }] : [];
    });
    const now = Math.floor(Date.now() / 1000);
    const token = jwt({ alg: 'RS256', typ: 'JWT', x5c: [certDer] }, { iss: issuer, sub: user ?? '', aud: service, exp: now + 300, nbf: now - 10, iat: now, jti: randomUUID(), access }, key);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token, expires_in: 300 }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    realm: `http://127.0.0.1:${port}/token`,
    service,
    issuer,
    certFile,
    requests,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function jwt(header: object, claims: object, key: string): string {
  const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const input = `${encode(header)}.${encode(claims)}`;
  const signature = createSign('RSA-SHA256').update(input).sign(key).toString('base64url');
  return `${input}.${signature}`;
}

