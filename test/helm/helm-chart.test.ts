import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { renderCrdsOnly } from '../../core/src/install/render.ts';
import { resolveValues } from '../../core/src/install/values.ts';
import { GATEWAY_VERSION } from '../../core/src/version.ts';
import { CHART_DIR, committedChartFiles, generatedChartFiles } from './chart-files.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const gatehouse = (...args: string[]) => spawnSync(process.execPath, [join(ROOT, 'core/bin/gatehouse.js'), ...args], { encoding: 'utf8', cwd: ROOT, maxBuffer: 64 * 1024 * 1024 });

// No helm binary needed: what the chart shares with the code, checked so that it cannot drift.
describe('the Helm chart (core/helm/gatehouse)', () => {
  it('is versioned with the gateway version (root package.json)', async () => {
    const chart = parse(await readFile(join(CHART_DIR, 'Chart.yaml'), 'utf8')) as { version: string; appVersion: string };
    const root = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(root.version).toBe(GATEWAY_VERSION);
    expect(chart.version).toBe(root.version);
    expect(chart.appVersion).toBe(root.version);
  });

  it('commits crds/crds.yaml and values.schema.json as the code generates them (regenerate: node test/helm/chart-files.ts --write)', async () => {
    const committed = await committedChartFiles();
    for (const [path, text] of Object.entries(generatedChartFiles())) expect(committed[path], path).toBe(text);
  });

  it('crds/crds.yaml is what `gatehouse install crds` prints: every CRD kind, for gatehouse.dev', async () => {
    const printed = gatehouse('install', 'crds');
    expect(printed.stderr).toBe('');
    expect(printed.status).toBe(0);
    expect(printed.stdout).toBe(await readFile(join(CHART_DIR, 'crds/crds.yaml'), 'utf8'));
    const crds = parseAllDocuments(printed.stdout).map((d) => d.toJS());
    expect(crds).toEqual(JSON.parse(JSON.stringify(renderCrdsOnly('gatehouse.dev', GATEWAY_VERSION))));
    expect(crds.map((c) => c.metadata.name)).toContain('virtualservices.gateway.gatehouse.dev');
  });

  it('`gatehouse install crds --api-group-domain` renames the groups; an empty domain is a usage error', () => {
    const other = gatehouse('install', 'crds', '--api-group-domain', 'example.org');
    expect(other.status).toBe(0);
    const groups = parseAllDocuments(other.stdout).map((d) => (d.toJS() as { spec: { group: string } }).spec.group);
    expect([...new Set(groups)].sort()).toEqual(['enterprise.example.org', 'gatehouse.example.org', 'gateway.example.org', 'graphql.example.org', 'ratelimit.example.org']);
    expect(gatehouse('install', 'crds', '--api-group-domain', '').status).toBe(2);
    expect(gatehouse('install', 'crds', 'extra').status).toBe(2);
  });

  it("values.yaml holds install render's defaults under the same keys", async () => {
    const values = parse(await readFile(join(CHART_DIR, 'values.yaml'), 'utf8')) as Record<string, unknown>;
    expect(resolveValues(values, GATEWAY_VERSION)).toEqual(resolveValues({}, GATEWAY_VERSION));
    expect(Object.keys(values).sort()).toEqual(Object.keys(JSON.parse(generatedChartFiles()['values.schema.json']!).properties).sort());
  });
});
