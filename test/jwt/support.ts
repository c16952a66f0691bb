/** Keys, tokens and a JWKS server for the JWT filter's tests (unit and end to end). */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT } from 'jose';

/** A signing key and its public JWK. */
export interface Key {
  kid: string;
  alg: string;
  privateKey: KeyObject | Uint8Array;
  jwk: Record<string, unknown>;
}

export function rsaKey(kid: string, alg = 'RS256'): Key {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { kid, alg, privateKey, jwk: { ...publicKey.export({ format: 'jwk' }), kid, use: 'sig' } };
}
export function ecKey(kid: string): Key {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { kid, alg: 'ES256', privateKey, jwk: { ...publicKey.export({ format: 'jwk' }), kid } };
}
export function edKey(kid: string): Key {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { kid, alg: 'EdDSA', privateKey, jwk: { ...publicKey.export({ format: 'jwk' }), kid } };
}

export const nowS = () => Math.floor(Date.now() / 1000);

/** A token signed with `key` (iss solo.io, sub alice, valid an hour unless `claims` say otherwise). */
export function token(key: Key, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT({ iss: 'solo.io', sub: 'alice', exp: nowS() + 3600, ...claims }).setProtectedHeader({ alg: key.alg, kid: key.kid, ...header }).sign(key.privateKey);
}

export const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

/** A JWKS server on 127.0.0.1 whose key set a test changes (rotation), or whose answers it breaks. */
export class JwksServer {
  keys: Key[] = [];
  hits = 0;
  mode: 'ok' | 'hang' | 'huge' | 'garbage' | 'error' = 'ok';
  readonly server: Server;
  constructor() {
    this.server = createServer((_req, res) => {
      this.hits++;
      if (this.mode === 'hang') return;
      if (this.mode === 'error') return void res.writeHead(500).end();
      if (this.mode === 'garbage') return void res.writeHead(200).end('{"keys": [nope');
      if (this.mode === 'huge') {
        // 100 MB, chunked (no length to refuse it by): streamed for as long as the client reads.
        res.writeHead(200, { 'content-type': 'application/json' });
        let sent = 0;
        const chunk = Buffer.alloc(1 << 20, 0x20);
        const pump = () => {
          while (!res.destroyed && sent < 100 && res.write(chunk)) sent++;
          if (sent >= 100) return void res.end(']}');
          if (!res.destroyed) res.once('drain', pump);
        };
        res.write('{"keys": [');
        return pump();
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: this.keys.map((k) => k.jwk) }));
    });
  }
  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/jwks.json`;
  }
  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
