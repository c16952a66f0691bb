/**
 * AuthConfig `booleanExpr` (Gloo) through a real `gatehouse run`: Basic Auth hashes from
 * htpasswd/openssl, a real ext_authz gRPC server for the passThrough step, a real upstream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extAuthChecks } from '../../core/src/extauth/checks.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { startEcho, type Echo, type TestServer } from '../support/upstream.ts';
import { authConfig, basic, htpasswdApr1, opensslSha1, snapshotter, startTeamAuthServer } from './support.ts';

const alice = htpasswdApr1('alice', 'wonderland');
const staff = { name: 'staff', basicAuth: { realm: 'staff', apr: { users: { alice: { salt: alice.salt, hashedPassword: alice.hashedPassword } } } } };
const partner = { name: 'partner', basicAuth: { realm: 'partner', encryption: { sha1: {} }, userList: { users: { bob: { salt: 'pepper', hashedPassword: opensslSha1('builder', 'pepper') } } } } };

let echo: TestServer;
let team: Awaited<ReturnType<typeof startTeamAuthServer>>;
let dir: ConfigDir;
let gatehouse: GatehouseProcess;

beforeAll(async () => {
  echo = await startEcho('echo');
  team = await startTeamAuthServer();
  const route = (prefix: string, config: string) => ({ matchers: [{ prefix }], options: { extauth: { configRef: { name: config } } }, routeAction: { single: { upstream: { name: 'echo' } } } });
  dir = await makeConfigDir({
    'auth.yaml': [
      { ...authConfig('either', [staff, partner]), spec: { configs: [staff, partner], booleanExpr: 'staff || partner' } },
      // The team server denies requests carrying x-deny: here its denial is what lets staff in.
      { ...authConfig('unless', []), spec: { configs: [staff, { name: 'blocked', passThroughAuth: { grpc: { address: team.address } } }], booleanExpr: 'staff && !blocked' } },
    ],
    'routes.yaml': [
      { apiVersion: 'gatehouse.gatehouse.dev/v1', kind: 'Upstream', metadata: { name: 'echo' }, spec: { static: { hosts: [{ addr: '127.0.0.1', port: echo.port }] } } },
      { apiVersion: 'gateway.gatehouse.dev/v1', kind: 'VirtualService', metadata: { name: 'api' }, spec: { virtualHost: { domains: ['*'], routes: [route('/either', 'either'), route('/unless', 'unless')] } } },
    ],
  });
  gatehouse = await startGatehouse('run', ['--config-dir', dir.path, '--access-log', 'false']);
});

afterAll(async () => {
  await gatehouse?.stop();
  await echo?.close();
  await team?.close();
  await dir?.cleanup();
});

async function get(path: string, headers: Record<string, string> = {}) {
  const response = await fetch(gatehouse.url + path, { headers });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

describe('booleanExpr through gatehouse run', () => {
  it('staff || partner: either user gets in, as that step says; nobody gets the last denial (its realm)', async () => {
    const viaAlice = await get('/either', { authorization: basic('alice', 'wonderland') });
    expect(viaAlice.status).toBe(200);
    expect((JSON.parse(viaAlice.body) as Echo).headers['x-user-id']).toBe('staff;alice');
    const viaBob = await get('/either', { authorization: basic('bob', 'builder') });
    expect(viaBob.status).toBe(200);
    expect((JSON.parse(viaBob.body) as Echo).headers['x-user-id']).toBe('partner;bob');
    const nobody = await get('/either');
    expect(nobody.status).toBe(401);
    expect(nobody.headers.get('www-authenticate')).toBe('Basic realm="partner"');
    expect(nobody.body).toBe('');
  });

  it('short-circuits: when staff allows, partner never runs (its decision counters stay still)', async () => {
    const partnerCount = async () => {
      const text = await (await fetch(`${gatehouse.adminUrl}/metrics`)).text();
      return text.split('\n').filter((line) => line.startsWith('gatehouse_auth_decisions_total{') && line.includes('config="default.either"') && line.includes('step="partner"')).reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
    };
    const before = await partnerCount();
    for (let i = 0; i < 3; i++) expect((await get('/either', { authorization: basic('alice', 'wonderland') })).status).toBe(200);
    expect(await partnerCount()).toBe(before);
    expect((await get('/either', { authorization: basic('bob', 'builder') })).status).toBe(200);
    expect(await partnerCount()).toBe(before + 1);
  });

  it('staff && !blocked: a step that allows makes its negation deny (403); its denial lets staff through', async () => {
    const asked = team.requests.length;
    // The team server allows this one, so !blocked is false: a plain 403, not the server's headers.
    const refused = await get('/unless', { authorization: basic('alice', 'wonderland') });
    expect(refused.status).toBe(403);
    expect(team.requests.length).toBe(asked + 1);
    // The team server denies (418, x-why) when x-deny is sent: !blocked is true, staff's answer goes upstream.
    const through = await get('/unless', { authorization: basic('alice', 'wonderland'), 'x-deny': '1' });
    expect(through.status).toBe(200);
    const seen = JSON.parse(through.body) as Echo;
    expect(seen.headers['x-user-id']).toBe('staff;alice');
    expect(seen.headers['x-why']).toBeUndefined();
    // Staff denies first: && short-circuits, the team server is not asked, staff's 401 goes out.
    const before = team.requests.length;
    const anonymous = await get('/unless', { 'x-deny': '1' });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Basic realm="staff"');
    expect(team.requests.length).toBe(before);
  });
});

describe('booleanExpr at load time', () => {
  const load = snapshotter(extAuthChecks);
  const diagnostics = (spec: object) => {
    const snapshot = load([{ apiVersion: 'enterprise.gloo.solo.io/v1', kind: 'AuthConfig', metadata: { name: 'x', namespace: 'default' }, spec }]);
    return snapshot.diagnostics.map((d) => `${d.severity} ${d.path} ${d.message}`);
  };

  it('a name that is not a step, a duplicate name or a syntax error rejects the AuthConfig, naming spec.booleanExpr', () => {
    expect(diagnostics({ configs: [staff], booleanExpr: 'staff || ghost' })).toEqual([expect.stringMatching(/^error .*booleanExpr.* names step "ghost", which this AuthConfig does not have \(its steps: staff\)/)]);
    expect(diagnostics({ configs: [staff, staff], booleanExpr: 'staff' })).toEqual([expect.stringMatching(/^error .*booleanExpr.* two steps are named "staff"/)]);
    expect(diagnostics({ configs: [staff], booleanExpr: 'staff &&' })).toEqual([expect.stringMatching(/^error .*booleanExpr.* does not parse at character 8/)]);
  });

  it('a step the expression never names is a warning (it never runs), and the AuthConfig is accepted', () => {
    expect(diagnostics({ configs: [staff, partner], booleanExpr: 'staff' })).toEqual([expect.stringMatching(/^warning .*configs.*1.* step "partner" is not named in booleanExpr, so it never runs/)]);
  });
});
