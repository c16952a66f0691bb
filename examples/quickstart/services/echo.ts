import { createServer } from 'node:http';

/** Answers every request with what it received (method, path, headers, body size) on 127.0.0.1:9102. */
export default async function start() {
  const server = createServer((req, res) => {
    let bytes = 0;
    req.on('data', (chunk: Buffer) => (bytes += chunk.length));
    req.on('end', () => {
      const text = JSON.stringify({ method: req.method, path: req.url, headers: req.headers, bodyBytes: bytes }, null, 2) + '\n';
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(9102, '127.0.0.1', resolve));
  return { name: 'echo', url: 'http://127.0.0.1:9102', close: () => new Promise<void>((r) => server.close(() => r())) };
}
