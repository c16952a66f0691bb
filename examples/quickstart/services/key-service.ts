import { createServer } from 'node:http';

/**
 * The quickstart's API key service on 127.0.0.1:9106, asked by the ApiKey plugin:
 * `GET /keys/<key>` answers 200 `{"user", "customer"}` for a known key and 404 otherwise.
 * It counts lookups (`GET /stats`), to see the plugin's cache at work.
 */
export const KEYS: Record<string, { user: string; customer: string }> = {
  'qs-key-acme': { user: 'alice', customer: 'acme' },
  'qs-key-globex': { user: 'bob', customer: 'globex' },
};

export default async function start() {
  let lookups = 0;
  const server = createServer((req, res) => {
    const match = /^\/keys\/([^/?]+)$/.exec(req.url ?? '');
    if (req.method === 'GET' && req.url === '/stats') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ lookups }) + '\n');
    if (req.method !== 'GET' || !match) return res.writeHead(404).end();
    lookups++;
    const found = KEYS[decodeURIComponent(match[1]!)];
    if (!found) return res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"unknown key"}\n');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(found) + '\n');
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(9106, '127.0.0.1', resolve));
  return { name: 'key-service', url: 'http://127.0.0.1:9106', close: () => new Promise<void>((r) => server.close(() => r())) };
}
