/**
 * Gloo's `faults` through a real `gatehouse run` (issue 31 item 4): abort and delay at 100% and
 * 0%, a client leaving during a delay never reaches the upstream; and the downstream request
 * duration histogram (issue 27) on the admin `/metrics`, by virtual host, route and status class.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startBodyRecorder } from '../support/upstream.ts';

let upstream: Awaited<ReturnType<typeof startBodyRecorder>>;
let config: ConfigDir;
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  upstream = await startBodyRecorder('upstream ok');
  const to = { single: { upstream: { name: 'up' } } };
  config = await makeConfigDir({
    'faults.yaml': [
      manifests.upstream('up', [{ addr: '127.0.0.1', port: upstream.port }]),
      manifests.virtualService('faults', {
        domains: ['*'],
        routes: [
          { name: 'abort-all', matchers: [{ prefix: '/abort-all' }], routeAction: to, options: { faults: { abort: { percentage: 100, httpStatus: 418 } } } },
          { name: 'abort-none', matchers: [{ prefix: '/abort-none' }], routeAction: to, options: { faults: { abort: { percentage: 0, httpStatus: 418 } } } },
          { name: 'delay-all', matchers: [{ prefix: '/delay-all' }], routeAction: to, options: { faults: { delay: { percentage: 100, fixedDelay: '200ms' } } } },
          { name: 'delay-long', matchers: [{ prefix: '/delay-long' }], routeAction: to, options: { faults: { delay: { percentage: 100, fixedDelay: '1h' } } } },
          { name: 'plain', matchers: [{ prefix: '/' }], routeAction: to },
        ],
      }),
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', config.path], { timeoutMs: 60_000 });
}, 90_000);

afterAll(async () => {
  await gatehouse?.stop();
  await upstream?.close();
  await config?.cleanup();
});

describe('faults through gatehouse run', () => {
  it('abort at 100%: every request gets httpStatus and none reaches the upstream; at 0%: every request goes through', async () => {
    const before = upstream.seen.length;
    for (let i = 0; i < 10; i++) {
      const reply = await send(gatehouse.url, { path: '/abort-all' });
      expect(reply.status).toBe(418);
      expect(reply.headers['x-gatehouse-error']).toBe('GH_FAULT_ABORT');
      expect(reply.body).toBe('fault filter abort\n');
    }
    expect(upstream.seen.length).toBe(before);
    for (let i = 0; i < 10; i++) expect((await send(gatehouse.url, { path: '/abort-none' })).status).toBe(200);
    expect(upstream.seen.length).toBe(before + 10);
  });

  it('delay at 100%: the request is answered by the upstream after the delay', async () => {
    const reply = await send(gatehouse.url, { path: '/delay-all/x' });
    expect(reply.status).toBe(200);
    expect(upstream.seen.at(-1)!.path).toBe('/delay-all/x');
  });

  it('a client that leaves during a delay is forgotten: nothing reaches the upstream, the gateway keeps serving', async () => {
    const before = upstream.seen.length;
    const req = httpRequest({ host: '127.0.0.1', port: gatehouse.port, path: '/delay-long/gone', agent: false });
    req.on('error', () => {});
    req.end();
    // The gateway has the request (its access line comes when the client leaves, with status 0).
    await new Promise((r) => req.once('socket', (s) => s.once('connect', r)));
    req.destroy();
    await eventually(async () => gatehouse.logs.some((l) => l.path === '/delay-long/gone' && l.status === 0), 10_000);
    expect((await send(gatehouse.url, { path: '/plain' })).status).toBe(200);
    expect(upstream.seen.slice(before).some((s) => s.path === '/delay-long/gone')).toBe(false);
  });
});

describe('the downstream request duration histogram', () => {
  it('is recorded by virtual host, route and status class, with bounded labels', async () => {
    await send(gatehouse.url, { path: '/plain/h' });
    await send(gatehouse.url, { path: '/abort-all' });
    const metrics = await eventually(async () => {
      const text = await (await fetch(`${gatehouse.adminUrl}/metrics`)).text();
      return text.includes('gatehouse_request_duration_seconds_count{virtual_host="default/faults",route="abort-all",status_class="4xx"}') ? text : undefined;
    });
    const count = (route: string, cls: string) => Number(new RegExp(`gatehouse_request_duration_seconds_count\\{virtual_host="default/faults",route="${route}",status_class="${cls}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0);
    expect(count('plain', '2xx')).toBeGreaterThanOrEqual(2);
    expect(count('abort-all', '4xx')).toBeGreaterThanOrEqual(11);
    expect(metrics).toMatch(/gatehouse_request_duration_seconds_bucket\{le="\+Inf",virtual_host="default\/faults",route="plain",status_class="2xx"\} \d+/);
    // The client that left during the delay: no response was sent.
    expect(count('delay-long', 'none')).toBe(1);
    // Status classes only: no per-status series.
    expect(metrics).not.toMatch(/gatehouse_request_duration_seconds_count\{[^}]*status_class="418"/);
  });
});
