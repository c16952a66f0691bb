// The Node limit: the least a reverse proxy on node:http + undici can do. No routing,
// no logging, no metrics. Usage: node bare-undici-proxy.ts UPSTREAM_URL [WORKERS] [shared|reuseport]
// (workers share the primary's listening socket, or each binds its own with SO_REUSEPORT).
import cluster from 'node:cluster';
import { createServer } from 'node:http';
import { Pool } from 'undici';

const [upstream = 'http://127.0.0.1:9102', workers = '1', sockets = 'shared'] = process.argv.slice(2);
const reusePort = sockets === 'reuseport';
if (cluster.isPrimary && Number(workers) > 1) {
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  for (let i = 0; i < Number(workers); i++) cluster.fork();
  let ready = 0;
  // reuseport: the first worker to ask binds port 0; the others wait for the port it got.
  let port: number | undefined;
  let binder = false;
  const waiting: { send(m: unknown): void }[] = [];
  cluster.on('message', (w, m: { type?: string; port: number }) => {
    if (m.type === 'ready') {
      if (!binder) return void ((binder = true), w.send({ port: 0 }));
      return port === undefined ? void waiting.push(w) : void w.send({ port });
    }
    if (port === undefined) {
      port = m.port;
      for (const other of waiting) other.send({ port });
    }
    if (++ready === Number(workers)) console.log(JSON.stringify({ msg: 'listening', port: m.port }));
  });
} else {
  const pool = new Pool(upstream, { connections: 128 });
  const server = createServer((req, res) => {
    const body = req.headers['content-length'] || req.headers['transfer-encoding'] ? req : null;
    pool.stream({ path: req.url!, method: req.method as 'GET', headers: req.headers, body }, ({ statusCode, headers }) => {
      res.writeHead(statusCode, headers as Record<string, string>);
      return res;
    }).catch(() => (res.headersSent ? res.destroy() : res.writeHead(503).end()));
  });
  const bind = (port: number) =>
    server.listen({ port, host: '127.0.0.1', reusePort }, () => {
      const bound = (server.address() as { port: number }).port;
      if (cluster.isWorker) process.send!({ port: bound });
      else console.log(JSON.stringify({ msg: 'listening', port: bound }));
    });
  if (cluster.isWorker && reusePort) {
    process.once('message', (m: { port: number }) => bind(m.port));
    process.send!({ type: 'ready' });
  } else {
    bind(Number(process.env.PORT ?? 0));
  }
}
