/**
 * The Helm chart's generated files, from the same code as `gatehouse install render`:
 * crds/crds.yaml (= `gatehouse install crds`), values.schema.json (= the values schema) and
 * dashboards/gatehouse.json (the Grafana dashboard install render puts in its ConfigMap).
 * `node test/helm/chart-files.ts --write` rewrites them; test/helm/helm-chart.test.ts checks
 * that the committed copies are current.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { crdsYaml } from '../../core/src/cli/install.ts';
import { DEFAULT_API_GROUP_DOMAIN } from '../../core/src/config/schema/kinds.ts';
import { dashboardJson } from '../../core/src/install/dashboard.ts';
import { valuesJsonSchema } from '../../core/src/install/values.ts';
import { GATEWAY_VERSION } from '../../core/src/version.ts';

export const CHART_DIR = fileURLToPath(new URL('../../core/helm/gatehouse', import.meta.url));

/** Chart-relative path → the content the generator makes for it. */
export function generatedChartFiles(): Record<string, string> {
  return {
    'crds/crds.yaml': crdsYaml(DEFAULT_API_GROUP_DOMAIN, GATEWAY_VERSION),
    'values.schema.json': valuesJsonSchema(),
    'dashboards/gatehouse.json': dashboardJson(),
  };
}

/** The committed content of each generated file (undefined when missing). */
export async function committedChartFiles(): Promise<Record<string, string | undefined>> {
  const out: Record<string, string | undefined> = {};
  for (const path of Object.keys(generatedChartFiles())) out[path] = await readFile(`${CHART_DIR}/${path}`, 'utf8').catch(() => undefined);
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv.includes('--write')) {
  for (const [path, text] of Object.entries(generatedChartFiles())) {
    await writeFile(`${CHART_DIR}/${path}`, text);
    console.log(`wrote ${CHART_DIR}/${path}`);
  }
}
