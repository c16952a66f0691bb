// The same forwarding as bare-undici-proxy.ts, but through Hono + @hono/node-server's
// request path (Request/Response objects): measures what that path costs a proxy.
// Usage: node hono-proxy.ts UPSTREAM_URL
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { Pool } from 'undici';

const [upstream = 'http://127.0.0.1:9102'] = process.argv.slice(2);
const pool = new Pool(upstream, { connections: 128 });
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding']);
const app = new Hono();
app.all('*', async (c) => {
  const url = new URL(c.req.url);
  const raw = c.req.raw;
  const response = await pool.request({
    path: url.pathname + url.search,
    method: c.req.method as 'GET',
    headers: Object.fromEntries(raw.headers),
    body: raw.body ? Readable.fromWeb(raw.body as unknown as WebReadableStream) : null,
  });
  const out = new Headers();
  for (const [k, v] of Object.entries(response.headers)) if (v !== undefined && !HOP.has(k)) out.set(k, Array.isArray(v) ? v.join(', ') : v);
  // ReadableStream.from pulls through the body's async iterator. Readable.toWeb pushes, and
  // crashed the process ("Controller is already closed") when a client left mid-response.
  return new Response(ReadableStream.from(response.body), { status: response.statusCode, headers: out });
});
serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => console.log(JSON.stringify({ msg: 'listening', port: info.port })));
