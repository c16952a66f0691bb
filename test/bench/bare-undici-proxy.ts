// The Node limit: the least a reverse proxy on node:http + undici can do. No routing,
// no logging, no metrics. Usage: node bare-undici-proxy.ts UPSTREAM_URL [WORKERS]
import cluster from 'node:cluster';
import { createServer } from 'node:http';
import { Pool } from 'undici';

const [upstream = 'http://127.0.0.1:9102', workers = '1'] = process.argv.slice(2);
if (cluster.isPrimary && Number(workers) > 1) {
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  for (let i = 0; i < Number(workers); i++) cluster.fork();
  let ready = 0;
  cluster.on('message', (_w, m: { port: number }) => ++ready === Number(workers) && console.log(JSON.stringify({ msg: 'listening', port: m.port })));
} else {
  const pool = new Pool(upstream, { connections: 128 });
  const server = createServer((req, res) => {
    const body = req.headers['content-length'] || req.headers['transfer-encoding'] ? req : null;
    pool.stream({ path: req.url!, method: req.method as 'GET', headers: req.headers, body }, ({ statusCode, headers }) => {
      res.writeHead(statusCode, headers as Record<string, string>);
      return res;
    }).catch(() => (res.headersSent ? res.destroy() : res.writeHead(503).end()));
  });
  server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
    const port = (server.address() as { port: number }).port;
    if (cluster.isWorker) process.send!({ port });
    else console.log(JSON.stringify({ msg: 'listening', port }));
  });
}
