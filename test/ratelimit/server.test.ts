/**
 * RateLimitConfig through real processes: Gloo's guide manifests load unchanged in `gatehouse
 * validate`, a bad one is rejected naming the field, and `gatehouse extauth` serves the guides'
 * behaviour over Envoy's RateLimitService, keeping the last good version across a bad reload.
 */
import { execFile } from 'node:child_process';
import { cp, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { credentials, loadPackageDefinition, Metadata, type Client, type ServiceError } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { rateLimitPackage } from '../../core/src/ratelimit/grpc-service.ts';
import { makeConfigDir, type ConfigDir } from '../support/config-dir.ts';
import { startGatehouse, type GatehouseProcess } from '../support/gatehouse.ts';

const CLI = fileURLToPath(new URL('../../core/bin/gatehouse.js', import.meta.url));
const FIXTURES = fileURLToPath(new URL('./fixtures', import.meta.url));

function validate(dir: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...NODE_FLAGS, CLI, 'validate', dir], { env: { ...process.env, GATEHOUSE_LOG_LEVEL: 'error' }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

type RlsClient = Client & { ShouldRateLimit(request: object, metadata: Metadata, options: { deadline: number }, callback: (error: ServiceError | null, answer: { overall_code: number }) => void): void };
function rlsClient(port: number): RlsClient {
  const pkg = loadPackageDefinition(rateLimitPackage()) as unknown as { envoy: { service: { ratelimit: { v3: { RateLimitService: new (address: string, creds: ReturnType<typeof credentials.createInsecure>) => RlsClient } } } } };
  return new pkg.envoy.service.ratelimit.v3.RateLimitService(`127.0.0.1:${port}`, credentials.createInsecure());
}
const CODES = ['UNKNOWN', 'OK', 'OVER_LIMIT'];
function code(client: RlsClient, request: object): Promise<string> {
  return new Promise((resolve, reject) => client.ShouldRateLimit(request, new Metadata(), { deadline: Date.now() + 10_000 }, (error, answer) => (error ? reject(error) : resolve(CODES[answer.overall_code]!))));
}

/** What Envoy sends for the rule-priority guide's two action lists, with Gloo's RateLimitConfig prefix. */
const rulePriority = (type: string, number: string) => {
  const config = { key: 'generic_key', value: 'gloo-system.rule-priority' };
  return { domain: 'crd', descriptors: [{ entries: [config, { key: 'type', value: type }] }, { entries: [config, { key: 'type', value: type }, { key: 'number', value: number }] }] };
};

async function awayFromMinuteEnd(marginMs = 10_000): Promise<void> {
  for (;;) {
    const left = 60_000 - (Date.now() % 60_000);
    if (left > marginMs) return;
    await new Promise((r) => setTimeout(r, Math.min(left + 50, 1000)));
  }
}

describe('gatehouse validate', () => {
  test("Gloo's rate-limiting guide manifests load unchanged", async () => {
    const result = await validate(FIXTURES);
    expect(result.code).toBe(0);
    expect(result.out).not.toMatch(/Rejected|Warning/);
    expect(result.out.match(/^Accepted RateLimitConfig /gm)).toHaveLength(5);
  });

  test('a RateLimitConfig that does not compile is rejected with its code and field path', async () => {
    const dir = await makeConfigDir({
      'bad.yaml': {
        apiVersion: 'ratelimit.solo.io/v1alpha1',
        kind: 'RateLimitConfig',
        metadata: { name: 'bad', namespace: 'gloo-system' },
        spec: { raw: { descriptors: [{ key: 'k', value: 'v' }, { key: 'k', value: 'v' }], rateLimits: [{ actions: [{ requestHeaders: { headerName: 'x' } }] }] } },
      },
    });
    try {
      const result = await validate(dir.path);
      expect(result.code).toBe(1);
      expect(result.out).toContain('GH_RATELIMIT_CONFIG_INVALID');
      expect(result.out).toContain('spec.raw.descriptors[1]');
      expect(result.out).toContain('requestHeaders needs descriptorKey');
    } finally {
      await dir.cleanup();
    }
  });
});

describe('gatehouse extauth serves RateLimitConfigs over Envoy RateLimitService', () => {
  let config: ConfigDir;
  let extauth: GatehouseProcess;
  let client: RlsClient;

  beforeAll(async () => {
    config = await makeConfigDir();
    await cp(FIXTURES, config.path, { recursive: true });
    extauth = await startGatehouse('extauth', ['--config-dir', config.path, '--host', '127.0.0.1']);
    client = rlsClient(extauth.port);
  }, 60_000);
  afterAll(async () => {
    client?.close();
    await extauth?.stop();
    await config?.cleanup();
  });

  test('the rule-priority guide: Messenger 429 on the third, Whatsapp on the second, Whatsapp to 411 not limited', async () => {
    await awayFromMinuteEnd();
    const seq = async (n: number, type: string, number: string) => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) out.push(await code(client, rulePriority(type, number)));
      return out;
    };
    expect(await seq(3, 'Messenger', '311')).toEqual(['OK', 'OK', 'OVER_LIMIT']);
    expect(await seq(2, 'Whatsapp', '311')).toEqual(['OK', 'OVER_LIMIT']);
    expect(await seq(5, 'Whatsapp', '411')).toEqual(['OK', 'OK', 'OK', 'OK', 'OK']);
  });

  test('a bad update keeps the last accepted version serving; a good one applies, counters kept', async () => {
    await awayFromMinuteEnd();
    const limited = { domain: 'crd', descriptors: [{ entries: [{ key: 'generic_key', value: 'gloo-system.my-rate-limit-policy' }, { key: 'generic_key', value: 'counter' }] }] };
    expect(await code(client, limited)).toBe('OK');
    const original = await readFile(`${config.path}/crds-guide.yaml`, 'utf8');
    const loads = () => extauth.logs.filter((l) => l.msg === 'configuration loaded').length;
    let before = loads();
    // requestsPerUnit 10 → a duplicate descriptor: rejected, the old limit of 10 keeps serving.
    await config.write('crds-guide.yaml', original.replace('value: counter\n', 'value: counter\n      descriptors: [{ key: a }, { key: a }]\n'));
    await extauth.waitForLog((l) => l.msg === 'configuration loaded' && loads() > before && (l.rejected as number) > 0, 15_000);
    for (let i = 0; i < 8; i++) expect(await code(client, limited)).toBe('OK');
    expect(await code(client, limited)).toBe('OK'); // the 10th
    expect(await code(client, limited)).toBe('OVER_LIMIT');
    // A good update raising the limit to 12 applies to the current window: two more pass.
    before = loads();
    await config.write('crds-guide.yaml', original.replace('requestsPerUnit: 10', 'requestsPerUnit: 12'));
    await extauth.waitForLog((l) => l.msg === 'configuration loaded' && loads() > before && l.rejected === 0, 15_000);
    // The refused 11th counted too (the reference service's rule): 12 is reached by one more.
    expect(await code(client, limited)).toBe('OK');
    expect(await code(client, limited)).toBe('OVER_LIMIT');
  });
});
