/**
 * Issue 17's configuration crashes against real processes: manifests that made `gatehouse run`
 * exit (alias floods, self-referencing anchors, an Upstream address the pool could not take)
 * and made `gatehouse validate` print a stack. Each one is now a diagnostic on its own file or
 * resource; the rest of the configuration keeps serving.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { makeConfigDir, manifests, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';
import { eventually, send } from '../support/http.ts';
import { startEcho, type TestServer } from '../support/upstream.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));

/** 150 uses of one alias: more than the parser's 100. */
const ALIAS_FLOOD = `apiVersion: gatehouse.gatehouse.dev/v1
kind: Upstream
metadata: {name: flood}
spec:
  static:
    hosts: [{addr: &a 127.0.0.1, port: 1}]
  x: [${Array.from({ length: 150 }, () => '*a').join(', ')}]
`;

/** An AuthConfig whose plugin config contains itself. */
const SELF_REFERENCE = `apiVersion: enterprise.gatehouse.dev/v1
kind: AuthConfig
metadata: {name: loop}
spec:
  configs:
    - pluginAuth:
        name: RequiredHeader
        config: &c {self: *c}
`;

const routeTo = (upstream: string, domain: string) =>
  manifests.virtualService(`vs-${upstream}`, { domains: [domain], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: upstream } } } }] });

function validate(...paths: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return validateWith({}, ...paths);
}

function validateWith(env: NodeJS.ProcessEnv, ...paths: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...NODE_FLAGS, CLI, 'validate', ...paths], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error', ...env }, timeout: 20_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

let echo: TestServer;
let config: ConfigDir;
let gw: GatehouseProcess;

beforeAll(async () => {
  echo = await startEcho('good');
  // The hostile files are there from the start: the gateway used to exit and could not start.
  config = await makeConfigDir({
    'good.yaml': [manifests.upstream('good', [{ addr: '127.0.0.1', port: echo.port }]), routeTo('good', 'good.test')],
    'flood.yaml': ALIAS_FLOOD,
    'loop.yaml': SELF_REFERENCE,
    'bad-addr.yaml': [manifests.upstream('evil', [{ addr: 'evil.com/path?x', port: 80 }]), routeTo('evil', 'evil.test')],
    'redos.yaml': [manifests.virtualService('redos', { domains: ['redos.test'], routes: [{ matchers: [{ regex: '/(a+)+$' }], routeAction: { single: { upstream: { name: 'good' } } } }] })],
  });
  gw = await startGatehouse('run', ['--config-dir', config.path]);
});

afterAll(async () => {
  await gw?.stop();
  await echo?.close();
  await config?.cleanup();
});

async function statuses(): Promise<{ kind: string; name: string; state: string; reasons: { message: string }[] }[]> {
  return (JSON.parse((await send(gw.adminUrl, { path: '/config' })).body) as { resources: never[] }).resources;
}

describe('hostile manifests (issue 17 findings 2, 3, 4)', () => {
  it('the gateway starts and serves the good files while the hostile ones are present', async () => {
    const r = await send(gw.url, { headers: { host: 'good.test' } });
    expect(r.status).toBe(200);
    const evil = (await statuses()).find((s) => s.name === 'evil');
    expect(evil?.state).toBe('Rejected');
    expect(JSON.stringify(evil?.reasons)).toContain('addr');
    // The route to the rejected Upstream is not served either: no catch-all, no crash.
    expect((await send(gw.url, { headers: { host: 'evil.test' } })).status).toBe(404);
  });

  it('a route regex that backtracks catastrophically in JavaScript (finding 13) runs on RE2 in linear time', async () => {
    // Refused at load while regexes ran on JavaScript's engine; on RE2 (as Envoy) it is a valid,
    // harmless pattern, so Gloo manifests that use such shapes load unchanged.
    const redos = (await statuses()).find((s) => s.name === 'redos');
    expect(redos?.state).toBe('Accepted');
    const started = performance.now();
    // 33 characters blocked the event loop for 10 s under the backtracking engine; 4,000 are nothing to RE2.
    expect((await send(gw.url, { path: `/${'a'.repeat(33)}!`, headers: { host: 'redos.test' } })).status).toBe(404);
    expect((await send(gw.url, { path: `/${'a'.repeat(4_000)}!`, headers: { host: 'redos.test' } })).status).toBe(404);
    expect((await send(gw.url, { path: `/${'a'.repeat(4_000)}`, headers: { host: 'redos.test' } })).status).toBe(200);
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('hostile files written while running are reported and the last good config keeps serving', async () => {
    const before = gw.logs.length;
    await writeFile(join(config.path, 'flood2.yaml'), ALIAS_FLOOD.replace('name: flood', 'name: flood2'));
    await writeFile(join(config.path, 'loop2.yaml'), SELF_REFERENCE.replace('name: loop', 'name: loop2'));
    await eventually(async () => gw.logs.slice(before).some((l) => String(l.msg).includes('too many YAML alias uses')) && gw.logs.slice(before).some((l) => String(l.msg).includes('refers to itself')));
    expect(gw.child.exitCode).toBeNull();
    expect((await send(gw.url, { headers: { host: 'good.test' } })).status).toBe(200);
  });

  it('a later reload is applied (not silently dropped) after an unusable Upstream address', async () => {
    await writeFile(join(config.path, 'later.yaml'), [manifests.upstream('later', [{ addr: '127.0.0.1', port: echo.port }]), routeTo('later', 'later.test')].map((d) => JSON.stringify(d)).join('\n---\n'));
    await eventually(async () => (await send(gw.url, { headers: { host: 'later.test' } })).status === 200);
  });

  it('gatehouse validate reports each one with a GH_CONFIG code and exits 1, never a stack', async () => {
    const { code, stdout, stderr } = await validate(join(config.path, 'flood.yaml'), join(config.path, 'loop.yaml'), join(config.path, 'bad-addr.yaml'));
    expect(code).toBe(1);
    const out = stdout + stderr;
    expect(out).toContain('GH_CONFIG_LIMITS');
    expect(out).toContain('too many YAML alias uses');
    expect(out).toContain('refers to itself');
    expect(out).toMatch(/Upstream default\/evil.*addr/);
    expect(out).not.toMatch(/\n\s+at .*\(.*:\d+:\d+\)/);
  });
});

describe('a 20,000-route reload (issue 17 finding 15)', () => {
  it('keeps the event loop answering while the file is parsed, and serves the new routes', async () => {
    const routes = Array.from({ length: 20_000 }, (_, i) => ({ matchers: [{ prefix: `/r${i}/` }], routeAction: { single: { upstream: { name: 'good' } } } }));
    const started = gw.logs.filter((l) => l.msg === 'configuration loaded').length;
    // The gateway's own event-loop delay (prom-client's monitorEventLoopDelay, reset by every
    // scrape): what the reload blocked in the gateway, not the test runner's or other files' load.
    const lagMax = async () => Number(/^gatehouse_process_nodejs_eventloop_lag_max_seconds (\S+)$/m.exec((await send(gw.adminUrl, { path: '/metrics' })).body)?.[1]);
    await lagMax();
    const pid = gw.child.pid as number;
    const mainCpuBefore = await threadCpuSeconds(pid, pid);
    let worst = 0;
    let pinging = true;
    const pinger = (async () => {
      while (pinging) {
        const t = performance.now();
        await send(gw.url, { headers: { host: 'good.test' } });
        worst = Math.max(worst, performance.now() - t);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await writeFile(join(config.path, 'many.yaml'), JSON.stringify(manifests.virtualService('many', { domains: ['many.test'], routes })));
    await eventually(async () => gw.logs.filter((l) => l.msg === 'configuration loaded').length > started, 20_000);
    await eventually(async () => (await send(gw.url, { path: '/r19999/x', headers: { host: 'many.test' } })).status === 200, 20_000);
    const mainCpu = (await threadCpuSeconds(pid, pid)) - mainCpuBefore;
    pinging = false;
    await pinger;
    const blocked = await lagMax();
    // The parse (1.3 s of the ~1.9 s the reload blocked before) runs on a worker thread; what is
    // left on the event loop is validation and the route table. The bound is on the CPU the
    // gateway's main thread spent over the whole reload, which bounds its longest block's CPU
    // and, unlike the wall-clock lag, does not stretch when other tests load the machine: one
    // fresh-clone CI run saw the lag at 1,089 ms for a reload whose blocks were 0.34 s alone.
    // Measured on the 2-core machine under other load: main-thread CPU 0.52–0.53 s for the whole
    // reload with the parse on a worker (lag 0.67–0.76 s wall); 1.48 s with the parse forced onto
    // the event loop.
    console.log(`20,000-route reload: the gateway's main thread used ${Math.round(mainCpu * 1000)} ms of CPU; its event loop blocked at most ${Math.round(blocked * 1000)} ms (wall); worst client ping ${Math.round(worst)} ms`);
    expect(blocked).toBeGreaterThan(0);
    expect(mainCpu).toBeGreaterThan(0);
    expect(mainCpu).toBeLessThan(1.0);
  });
});

/** CPU seconds (user + system) one thread of a process has used, from /proc (Linux; 100 ticks a second). */
async function threadCpuSeconds(pid: number, tid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/task/${tid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at state: utime and stime are 14 and 15 overall.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** `n` RouteTables, each delegating everything to the next (issue 24 finding 11: 500 of them stalled the process). */
function delegationChain(n: number): string {
  const tables = Array.from({ length: n }, (_, i) => {
    const route = i < n - 1 ? `{matchers: [{prefix: /}], delegateAction: {ref: {name: chain-${i + 1}}}}` : '{matchers: [{prefix: /}], routeAction: {single: {upstream: {name: good}}}}';
    return `apiVersion: gateway.solo.io/v1\nkind: RouteTable\nmetadata: {name: chain-${i}}\nspec:\n  routes: [${route}]\n`;
  });
  const vs = 'apiVersion: gateway.solo.io/v1\nkind: VirtualService\nmetadata: {name: chain}\nspec:\n  virtualHost:\n    domains: [chain.test]\n    routes: [{matchers: [{prefix: /}], delegateAction: {ref: {name: chain-0}}}]\n';
  return [...tables, vs].join('---\n');
}

/** `levels` levels of two RouteTables; each selects both of the next level by label: 2^levels routes from a few KB. */
function delegationFanOut(levels: number): string {
  const tables = Array.from({ length: levels * 2 }, (_, i) => {
    const level = Math.floor(i / 2);
    const route = level < levels - 1 ? `{matchers: [{prefix: /}], delegateAction: {selector: {labels: {fan: "${level + 1}"}}}}` : '{matchers: [{prefix: /}], routeAction: {single: {upstream: {name: good}}}}';
    return `apiVersion: gateway.solo.io/v1\nkind: RouteTable\nmetadata: {name: fan-${level}-${i % 2}, labels: {fan: "${level}"}}\nspec:\n  weight: ${i % 2}\n  routes: [${route}]\n`;
  });
  const vs = 'apiVersion: gateway.solo.io/v1\nkind: VirtualService\nmetadata: {name: fan}\nspec:\n  virtualHost:\n    domains: [fan.test]\n    routes: [{matchers: [{prefix: /}], delegateAction: {selector: {labels: {fan: "0"}}}}]\n';
  return [...tables, vs].join('---\n');
}

describe('delegation that stalled or crashed the gateway (issue 24 finding 11)', () => {
  let echo2: TestServer;
  let dir: ConfigDir;
  let gw2: GatehouseProcess;

  beforeAll(async () => {
    echo2 = await startEcho('good');
    // Present from the start: `gatehouse run` took 28 s to listen (then the watchdog) with the
    // chain, and exited 2 (stack overflow) with the fan-out.
    dir = await makeConfigDir({
      'good.yaml': [manifests.upstream('good', [{ addr: '127.0.0.1', port: echo2.port }]), routeTo('good', 'good.test'), manifests.virtualService('catch-all', { domains: ['*'], routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'good' } } } }] })],
      'chain.yaml': delegationChain(500),
      'fan.yaml': delegationFanOut(18),
    });
    gw2 = await startGatehouse('run', ['--config-dir', dir.path], { timeoutMs: 60_000 });
  }, 90_000);

  afterAll(async () => {
    await gw2?.stop();
    await echo2?.close();
    await dir?.cleanup();
  });

  const status = async (kind: string, name: string) => {
    const all = (JSON.parse((await send(gw2.adminUrl, { path: '/config' })).body) as { resources: { kind: string; name: string; state: string; reasons: { code: string; path?: string; message: string }[] }[] }).resources;
    return all.find((s) => s.kind === kind && s.name === name);
  };

  it('starts with both files present, rejects the tables over the limits naming the chain, and serves the rest', async () => {
    expect((await send(gw2.url, { headers: { host: 'good.test' } })).status).toBe(200);
    const head = await status('RouteTable', 'chain-0');
    expect(head?.state).toBe('Rejected');
    expect(head?.reasons[0]).toMatchObject({ code: 'GH_CONFIG_DELEGATION_LIMIT', path: 'spec.routes[0].delegateAction', message: expect.stringContaining('deeper than 16 RouteTables (limit GATEHOUSE_MAX_DELEGATION_DEPTH): RouteTable default/chain-0 → RouteTable default/chain-1 →') });
    // The end of the chain is within the limit and served.
    expect((await status('RouteTable', 'chain-499'))?.state).toBe('Accepted');
    const fanHead = await status('RouteTable', 'fan-0-0');
    expect(fanHead?.state).toBe('Rejected');
    expect(fanHead?.reasons[0]?.code).toBe('GH_CONFIG_DELEGATION_LIMIT');
    // The VirtualServices stay, serving nothing under the rejected tables (404), not the catch-all.
    expect((await status('VirtualService', 'chain'))?.reasons[0]?.message).toContain('RouteTable default/chain-0');
    expect(gw2.stderr()).not.toContain('GH_WATCHDOG');
  });

  it('a VirtualService added while they are present is applied: its Basic Auth answers 401, not the catch-all\'s 200', async () => {
    const salt = 'pepper';
    const hashedPassword = createHash('sha1').update(`secret${salt}`).digest('hex');
    await writeFile(
      join(dir.path, 'secure.yaml'),
      [
        manifests.authConfig('secure-basic', [{ basicAuth: { realm: 'secure', encryption: { sha1: {} }, userList: { users: { ann: { salt, hashedPassword } } } } }]),
        manifests.virtualService('secure', { domains: ['secure.test'], options: { extauth: { configRef: { name: 'secure-basic' } } }, routes: [{ matchers: [{ prefix: '/' }], routeAction: { single: { upstream: { name: 'good' } } } }] }),
      ].map((d) => JSON.stringify(d)).join('\n---\n'),
    );
    await eventually(async () => (await send(gw2.url, { headers: { host: 'secure.test' } })).status === 401, 30_000);
    const basic = `Basic ${Buffer.from('ann:secret').toString('base64')}`;
    expect((await send(gw2.url, { headers: { host: 'secure.test', authorization: basic } })).status).toBe(200);
    expect(gw2.child.exitCode).toBeNull();
    expect(gw2.stderr()).not.toContain('GH_WATCHDOG');
  }, 40_000);

  it('gatehouse validate reports both files with the chain, quickly and without a stack', async () => {
    const started = performance.now();
    const { code, stdout, stderr } = await validate(join(dir.path, 'good.yaml'), join(dir.path, 'chain.yaml'), join(dir.path, 'fan.yaml'));
    expect(code).toBe(1);
    expect(stdout).toMatch(/chain\.yaml:\d+: error: RouteTable default\/chain-0: spec\.routes\[0\]\.delegateAction: the delegation is deeper than 16 RouteTables .*\[GH_CONFIG_DELEGATION_LIMIT\]/);
    expect(stdout).toMatch(/fan\.yaml:\d+: error: RouteTable default\/fan-0-0: .*\[GH_CONFIG_DELEGATION_LIMIT\]/);
    expect(stdout + stderr).not.toMatch(/Maximum call stack|\n\s+at .*\(.*:\d+:\d+\)/);
    // 22.7 s before on this chain; the generous bound is for a busy machine.
    expect(performance.now() - started).toBeLessThan(15_000);
  }, 30_000);
});

describe('RE2 program size (issue 24 finding 12)', () => {
  let echo3: TestServer;
  let dir: ConfigDir;
  let gw3: GatehouseProcess;
  /** Valid RE2, program size 20,008: 2 s of event loop per 15,000-character path when it was accepted. */
  const HUGE = `/${'[a-z0-9]{1000}'.repeat(20)}`;
  /** Program size 203: over Envoy's default 100. */
  const OVER = '/[a-z]{200}';
  const regexRoute = (name: string, domain: string, regex: string) => manifests.virtualService(name, { domains: [domain], routes: [{ matchers: [{ regex }], routeAction: { single: { upstream: { name: 'good' } } } }] });

  beforeAll(async () => {
    echo3 = await startEcho('good');
    dir = await makeConfigDir({
      'good.yaml': [manifests.upstream('good', [{ addr: '127.0.0.1', port: echo3.port }]), routeTo('good', 'good.test')],
      'huge.yaml': [regexRoute('huge', 'huge.test', HUGE)],
      'over.yaml': [regexRoute('over', 'over.test', OVER)],
      'fine.yaml': [regexRoute('fine', 'fine.test', '/[a-z]{90}')],
    });
    gw3 = await startGatehouse('run', ['--config-dir', dir.path]);
  });

  afterAll(async () => {
    await gw3?.stop();
    await echo3?.close();
    await dir?.cleanup();
  });

  it('refuses route regexes over 100 instructions by default, naming the field, and serves the rest', async () => {
    const resources = (JSON.parse((await send(gw3.adminUrl, { path: '/config' })).body) as { resources: { name: string; state: string; reasons: { code: string; path?: string; message: string }[] }[] }).resources;
    const over = resources.find((r) => r.name === 'over');
    expect(over).toMatchObject({ state: 'Rejected', reasons: [{ code: 'GH_CONFIG_BAD_REGEX', path: 'spec.virtualHost.routes[0].matchers[0].regex', message: expect.stringContaining("RE2 program size is 203, over the limit of 100 (GATEHOUSE_REGEX_MAX_PROGRAM_SIZE") }] });
    const huge = resources.find((r) => r.name === 'huge');
    expect(huge).toMatchObject({ state: 'Rejected', reasons: [{ code: 'GH_CONFIG_BAD_REGEX', path: 'spec.virtualHost.routes[0].matchers[0].regex', message: expect.stringContaining('far larger than the limit of 100') }] });
    expect(resources.find((r) => r.name === 'fine')?.state).toBe('Accepted');
    // The refused hosts are not served: a 15,000-character path costs nothing.
    expect((await send(gw3.url, { path: `/${'a'.repeat(15_000)}`, headers: { host: 'huge.test' } })).status).toBe(404);
    expect((await send(gw3.url, { path: `/${'a'.repeat(90)}`, headers: { host: 'fine.test' } })).status).toBe(200);
    expect((await send(gw3.url, { headers: { host: 'good.test' } })).status).toBe(200);
  });

  it('the limit is a setting (GATEHOUSE_REGEX_MAX_PROGRAM_SIZE), read by validate too; a bad value is a usage error', async () => {
    const strict = await validate(join(dir.path, 'good.yaml'), join(dir.path, 'over.yaml'));
    expect(strict.code).toBe(1);
    expect(strict.stdout).toMatch(/over\.yaml:\d+: error: VirtualService default\/over: spec\.virtualHost\.routes\[0\]\.matchers\[0\]\.regex: the regex's RE2 program size is 203, over the limit of 100 .*\[GH_CONFIG_BAD_REGEX\]/);
    const raised = await validateWith({ GATEHOUSE_REGEX_MAX_PROGRAM_SIZE: '250' }, join(dir.path, 'good.yaml'), join(dir.path, 'over.yaml'));
    expect(raised.code).toBe(0);
    const bad = await validateWith({ GATEHOUSE_REGEX_MAX_PROGRAM_SIZE: 'lots' }, join(dir.path, 'good.yaml'));
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('GATEHOUSE_REGEX_MAX_PROGRAM_SIZE must be a positive integer, got "lots" [GH_BAD_ARGUMENT]');
  });
});
