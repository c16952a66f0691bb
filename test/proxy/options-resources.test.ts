/**
 * VirtualHostOption and RouteOption resources (issue 31, SPEC 3.2.0) through a real `gatehouse run`:
 * an edit to an options resource reaches the virtual hosts and routes that name it without touching
 * them, and a removed one leaves them serving their own options with a warning.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { eventually, send } from '../support/http.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';

let upstream: TestServer;
let dir: ConfigDir;
let gw: GatehouseProcess;

const vho = (origin: string) => ({ apiVersion: 'gateway.solo.io/v1', kind: 'VirtualHostOption', metadata: { name: 'cors', namespace: 'shared' }, spec: { options: { cors: { allowOrigin: [origin] } } } });
const rto = (value: string) => ({ apiVersion: 'gateway.solo.io/v1', kind: 'RouteOption', metadata: { name: 'headers', namespace: 'shared' }, spec: { options: { prefixRewrite: '/rewritten/', headerManipulation: { requestHeadersToAdd: [{ header: { key: 'x-option', value }, append: false }] } } } });

beforeAll(async () => {
  upstream = await startEcho('app');
  const up = { apiVersion: 'gloo.solo.io/v1', kind: 'Upstream', metadata: { name: 'app', namespace: 'team' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: upstream.port }] } } };
  const vs = {
    apiVersion: 'gateway.solo.io/v1',
    kind: 'VirtualService',
    metadata: { name: 'app', namespace: 'team' },
    spec: {
      virtualHost: {
        domains: ['app.example'],
        optionsConfigRefs: { delegateOptions: [{ name: 'cors', namespace: 'shared' }] },
        routes: [{ matchers: [{ prefix: '/' }], optionsConfigRefs: { delegateOptions: [{ name: 'headers', namespace: 'shared' }] }, routeAction: { single: { upstream: { name: 'app' } } } }],
      },
    },
  };
  dir = await makeConfigDir({ 'app.yaml': [up, vs], 'vho.yaml': vho('https://one.example'), 'rto.yaml': rto('first') });
  gw = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
});

afterAll(async () => {
  await gw?.stop();
  await dir?.cleanup();
  await upstream?.close();
});

const ask = (origin = 'https://one.example') => send(gw.url, { path: '/p', headers: { host: 'app.example', origin } });
const statusOf = async (kind: string, name: string) => ((JSON.parse((await send(gw.adminUrl, { path: '/config' })).body) as { resources: { kind: string; name: string; state: string; reasons: { code: string; path?: string }[] }[] }).resources.find((r) => r.kind === kind && r.name === name));

describe('options resources under a running gateway', () => {
  it('apply to the virtual host and route that name them', async () => {
    const r = await ask();
    const seen = JSON.parse(r.body) as Echo;
    expect(seen.url).toBe('/rewritten/p');
    expect(seen.headers['x-option']).toBe('first');
    expect(r.headers['access-control-allow-origin']).toBe('https://one.example');
  });

  it('an edited options resource reaches them without a change to the VirtualService', async () => {
    await dir.write('vho.yaml', vho('https://two.example'));
    await dir.write('rto.yaml', rto('second'));
    await eventually(async () => (await ask('https://two.example')).headers['access-control-allow-origin'] === 'https://two.example');
    expect((await ask('https://one.example')).headers['access-control-allow-origin']).toBeUndefined();
    await eventually(async () => (JSON.parse((await ask()).body) as Echo).headers['x-option'] === 'second');
  });

  it('a removed RouteOption leaves the route serving its own options, with a warning on the VirtualService', async () => {
    await dir.remove('rto.yaml');
    await eventually(async () => (JSON.parse((await ask()).body) as Echo).url === '/p');
    expect((JSON.parse((await ask()).body) as Echo).headers['x-option']).toBeUndefined();
    const status = await statusOf('VirtualService', 'app');
    expect(status).toMatchObject({ state: 'Warning', reasons: [expect.objectContaining({ code: 'GH_CONFIG_MISSING_REF', path: 'spec.virtualHost.routes[0].optionsConfigRefs.delegateOptions[0]' })] });
  });
});
