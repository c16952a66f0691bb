/**
 * HTTP/2 conformance (SPEC 3.2.1, issue 29): h2spec (github.com/summerwind/h2spec, built by
 * install-go-tools.sh) against the gateway's h2c listener and its TLS listener (h2 by ALPN), and
 * against a real Envoy set up as a comparable edge proxy (an h2c and a TLS listener with the same
 * self-signed certificate in front of the same echo upstream). The threshold: the gateway fails
 * no case outside the set Envoy fails (ENVOY_FAILS below, by h2spec case id). Envoy is run too and
 * its result logged, so a new Envoy release that fails more is noticed; its runs only have to be
 * valid runs, because two of Envoy's answers depend on timing (http2/5.1/5 and generic/3.8/1 each
 * passed in some fresh-clone runs and failed in others) and a peer's flake must not fail CI. The
 * gateway's threshold never depends on that: it is the fixed list below.
 *
 * The upstream holds every answer HOLD_MS (see there): without that, whether a frame sent after a
 * request's END_STREAM lands on a half-closed or an already closed stream depends on scheduling.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startEnvoy, type EnvoyProcess } from '../envoy/envoy.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startServer, type TestServer } from '../support/upstream.ts';
import { catchAllVirtualService, describeWithTools, minus, selfSignedCert, staticUpstream } from './support.ts';

const run = promisify(execFile);

/**
 * The h2spec cases Envoy 1.40.0 (nghttp2 1.x codec, default options) fails in this setup: h2spec
 * 2.2.1, default (non-strict) cases, 3 s timeout; the union over 5 runs on each listener (the set
 * did not vary between runs), and the union of the two listeners: http2/3.5/2 Envoy fails on h2c
 * only (an invalid preface there is not HTTP/2 to it: it falls back to HTTP/1.1 and answers 400).
 */
const ENVOY_FAILS: readonly string[] = [
  'generic/3.8/1', // GOAWAY: expects the connection to stay usable (ping answered)
  'http2/3.5/2', // invalid connection preface (h2c only)
  'http2/5.1/8', // closed: DATA after RST_STREAM → STREAM_CLOSED expected
  'http2/5.1/9', // closed: HEADERS after RST_STREAM
  'http2/5.1/11', // closed: DATA
  'http2/5.1/12', // closed: HEADERS
  'http2/5.1.1/2', // stream id smaller than the previous
  'http2/5.3.1/2', // PRIORITY depending on itself
  'http2/6.3/1', // PRIORITY with stream id 0
  'http2/6.9.1/2', // connection window above 2^31-1
  'http2/6.9.1/3', // stream window above 2^31-1
  'http2/7/1', // GOAWAY with an unknown error code
];

/**
 * How long the upstream holds each answer. h2spec's stream-state cases (http2/5.1/6: a second
 * HEADERS after the request's END_STREAM) write their frames one after the other and expect the
 * stream still half-closed (remote) when the second one arrives: answered by then, the stream is
 * closed and gone, and the frame is ignored (the closed-stream cases Envoy fails too). An upstream
 * that answers in a millisecond made that a race a scheduling stall of h2spec between its two
 * writes could lose (the project CI run on 7a36a6c failed http2/5.1/6 that way: the answer's DATA
 * frame before any RST_STREAM). Held 250 ms, the stream stays half-closed far longer than such a
 * stall; the gateway h2c run's failed-case set is otherwise the same with 0, 300 and 1000 ms
 * (2026-11-30), and the ~50 cases that wait for an answer add ~12 s to each run.
 */
const HOLD_MS = 250;

const H2SPEC = { name: 'h2spec', env: 'GATEHOUSE_H2SPEC', installed: 'conformance/bin/h2spec', script: 'test/conformance/install-go-tools.sh' };
const ENVOY = { name: 'envoy', env: 'GATEHOUSE_ENVOY', installed: 'envoy', script: 'test/envoy/install-envoy.sh' };

/** One h2spec run: the id (`http2/6.9.1/2`, `hpack/4.2/1`, …) of every case, and of the failed ones. */
interface H2specResult {
  readonly cases: string[];
  readonly failed: string[];
  readonly output: string;
}

/** Runs h2spec against 127.0.0.1:`port` (over TLS with `tls`) and reads its JUnit report. */
async function h2spec(binary: string, port: number, tls: boolean, work: string): Promise<H2specResult> {
  const report = join(work, `h2spec-${port}-${Date.now()}.xml`);
  // h2spec exits 1 when a case fails; the report says which.
  const { stdout } = await run(binary, ['-h', '127.0.0.1', '-p', String(port), ...(tls ? ['-t', '-k'] : []), '-o', '3', '-j', report], { maxBuffer: 16 * 1024 * 1024 }).catch((error: { stdout?: string; code?: number }) => {
    if (error.code === 1 && error.stdout) return { stdout: error.stdout };
    throw error;
  });
  return { ...parseJUnit(await readFile(report, 'utf8')), output: stdout };
}

/**
 * Case ids from h2spec's JUnit report: each <testsuite package="http2/6.9.1"> holds numbered
 * <testcase>s (their order is the case number, as h2spec prints them); a failed one has <failure>
 * or <error> in it (a skipped one, <skipped/>, counts as neither).
 */
export function parseJUnit(xml: string): { cases: string[]; failed: string[] } {
  const cases: string[] = [];
  const failed: string[] = [];
  for (const suite of xml.matchAll(/<testsuite\b([^>]*)>([\s\S]*?)<\/testsuite>/g)) {
    const pkg = /\bpackage="([^"]*)"/.exec(suite[1]!)?.[1];
    if (!pkg) continue;
    let n = 0;
    for (const testcase of suite[2]!.matchAll(/<testcase\b[^>]*?(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
      const id = `${pkg}/${++n}`;
      cases.push(id);
      if (/<(failure|error)\b/.test(testcase[1] ?? '')) failed.push(id);
    }
  }
  return { cases, failed };
}

/** An Envoy edge proxy like the gateway: one h2c/HTTP/1.1 listener and one TLS listener (ALPN h2, http/1.1), every host to `upstreamPort`. */
function envoyEdge(upstreamPort: number, certFile: string, keyFile: string): object {
  const manager = (prefix: string) => ({
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
      stat_prefix: prefix,
      codec_type: 'AUTO',
      route_config: { virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'echo' } }] }] },
      http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } }],
    },
  });
  return {
    admin: { address: { socket_address: { address: '127.0.0.1', port_value: 0 } } },
    static_resources: {
      listeners: [
        { name: 'h2c', address: { socket_address: { address: '127.0.0.1', port_value: 0 } }, filter_chains: [{ filters: [manager('h2c')] }] },
        {
          name: 'tls',
          address: { socket_address: { address: '127.0.0.1', port_value: 0 } },
          filter_chains: [
            {
              filters: [manager('tls')],
              transport_socket: {
                name: 'envoy.transport_sockets.tls',
                typed_config: {
                  '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
                  common_tls_context: { alpn_protocols: ['h2', 'http/1.1'], tls_certificates: [{ certificate_chain: { filename: certFile }, private_key: { filename: keyFile } }] },
                },
              },
            },
          ],
        },
      ],
      clusters: [{ name: 'echo', type: 'STATIC', connect_timeout: '1s', load_assignment: { cluster_name: 'echo', endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: upstreamPort } } } }] }] } }],
    },
  };
}

describeWithTools('h2spec: the gateway fails no HTTP/2 case Envoy passes', [H2SPEC, ENVOY], (tools) => {
  let work: string;
  let echo: TestServer;
  let dir: ConfigDir;
  let gatehouse: GatehouseProcess;
  let envoy: EnvoyProcess;
  let envoyTlsPort: number;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'gatehouse-h2spec-'));
    const pair = await selfSignedCert(work, 'edge', ['localhost', '127.0.0.1']);
    echo = await startServer((req, res) => {
      req.resume();
      req.on('end', () => setTimeout(() => res.end(JSON.stringify({ method: req.method, url: req.url })), HOLD_MS));
    });
    dir = await makeConfigDir({
      'upstream.yaml': staticUpstream('echo', echo.port),
      // A default (no sniDomains) TLS VirtualService: h2spec sends SNI 127.0.0.1, i.e. none.
      'vs.yaml': [catchAllVirtualService('plain', 'echo'), catchAllVirtualService('tls', 'echo', { sslFiles: { tlsCert: pair.certFile, tlsKey: pair.keyFile } })],
    });
    gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
    envoy = await startEnvoy(tools.envoy!, envoyEdge(echo.port, pair.certFile, pair.keyFile));
    const listeners = (await (await fetch(`${envoy.adminUrl}/listeners?format=json`)).json()) as { listener_statuses: { name: string; local_address: { socket_address: { port_value: number } } }[] };
    envoyTlsPort = listeners.listener_statuses.find((l) => l.name === 'tls')!.local_address.socket_address.port_value;
  });

  afterAll(async () => {
    await gatehouse?.stop();
    await envoy?.stop();
    await echo?.close();
    await dir?.cleanup();
    if (work) await rm(work, { recursive: true, force: true });
  });

  // The four runs at once: h2spec mostly waits (a failed case waits out its timeout), so one
  // after the other would take four times as long for no gain.
  const check = (label: string, target: () => { port: number; tls: boolean }, threshold: boolean) =>
    it.concurrent(threshold ? `${label}: no failed case outside Envoy's set` : `${label}: a valid run, its failures logged`, { timeout: 120_000 }, async () => {
      const { port, tls } = target();
      const result = await h2spec(tools.h2spec!, port, tls, work);
      const outside = minus(result.failed, ENVOY_FAILS);
      console.log(`h2spec ${label}: ${result.cases.length - result.failed.length}/${result.cases.length} passed; failed: ${result.failed.join(' ') || 'none'}${outside.length > 0 ? `; outside ENVOY_FAILS: ${outside.join(' ')}` : ''}`);
      // A broken run (h2spec could not connect) has no cases: that is not a pass.
      expect(result.cases.length).toBeGreaterThan(140);
      // The message: h2spec's summary of failures (its last part), which says what each case expected.
      if (threshold) expect(outside, result.output.slice(result.output.lastIndexOf('Failures:'))).toEqual([]);
    });

  check('Envoy h2c (reference)', () => ({ port: envoy.port, tls: false }), false);
  check('Envoy TLS (reference)', () => ({ port: envoyTlsPort, tls: true }), false);
  check('gateway h2c', () => ({ port: gatehouse.port, tls: false }), true);
  check('gateway TLS', () => ({ port: gatehouse.listening.httpsPort as number, tls: true }), true);
});
