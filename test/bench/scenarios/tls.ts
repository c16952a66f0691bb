// TLS rows (issue 12): the same route over HTTPS (keep-alive, so the handshake is amortised as
// clients amortise it) against plain HTTP in the same run, with nginx's TLS proxy as a reference.
import { execFileSync } from 'node:child_process';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BenchContext, BenchModule, BenchScenario } from '../scenario.ts';
import { benchManifests, startNginx } from '../tools.ts';

/** A self-signed EC certificate for the bench (made once per run with the openssl CLI). */
async function certificate(ctx: BenchContext): Promise<{ cert: string; key: string; certFile: string; keyFile: string }> {
  const dir = join(ctx.workDir, 'tls');
  await mkdir(dir, { recursive: true });
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', keyFile, '-out', certFile, '-subj', '/CN=bench.test', '-addext', 'subjectAltName=DNS:bench.test,IP:127.0.0.1', '-days', '1'], { stdio: 'ignore' });
  return { cert: await readFile(certFile, 'utf8'), key: await readFile(keyFile, 'utf8'), certFile, keyFile };
}

function tlsConfig(ctx: BenchContext, pem: { cert: string; key: string }) {
  const [upstream, vs] = benchManifests(ctx.upstreamPort) as [object, { spec: object }];
  const secret = { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name: 'bench-tls' }, stringData: { 'tls.crt': pem.cert, 'tls.key': pem.key } };
  return { 'tls.yaml': [upstream, secret, { ...vs, spec: { ...vs.spec, sslConfig: { secretRef: { name: 'bench-tls' } } } }] };
}

export const scenarios: BenchScenario[] = [
  { group: 'tls', name: 'gatehouse run, HTTP route', start: (ctx) => ctx.gatehouse({ 'plain.yaml': benchManifests(ctx.upstreamPort) }, ['--access-log', 'false']) },
  {
    group: 'tls',
    name: 'gatehouse run, HTTPS route (keep-alive)',
    start: async (ctx) => {
      const target = await ctx.gatehouse(tlsConfig(ctx, await certificate(ctx)), ['--access-log', 'false']);
      if (!target.httpsUrl) throw new Error('gatehouse did not report an HTTPS port');
      return { url: target.httpsUrl, stop: target.stop };
    },
  },
  {
    group: 'tls',
    name: 'nginx TLS proxy (1 worker)',
    start: async (ctx) => {
      const pem = await certificate(ctx);
      const n = await startNginx(ctx.workDir, 'tls-proxy', (port) => `upstream up { server 127.0.0.1:${ctx.upstreamPort}; keepalive 64; }
  server { listen 127.0.0.1:${port} ssl; ssl_certificate ${pem.certFile}; ssl_certificate_key ${pem.keyFile};
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; } }`);
      return { url: `https://127.0.0.1:${n.port}`, stop: n.stop };
    },
  },
];

export const goals: BenchModule['goals'] = [{ row: 'gatehouse run, HTTPS route (keep-alive)', against: 'gatehouse run, HTTP route', minThroughputRatio: 0.75 }];
