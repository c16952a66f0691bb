import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** What importing one `exports` entry of a package gave. */
export interface ExportResult {
  readonly specifier: string;
  /** `module`: imported, with that many named exports; `types`: a types-only entry whose file exists; `error`: why not. */
  readonly outcome: 'module' | 'types' | 'error';
  readonly names?: number;
  readonly error?: string;
}

/**
 * A module script that imports every non-pattern `exports` entry of `packages`, as installed
 * under `node_modules` of the directory it runs in (a types-only entry: its file must exist),
 * and prints one JSON array of {@link ExportResult}.
 */
function checkScript(packages: readonly string[]): string {
  return `
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
const results = [];
for (const name of ${JSON.stringify(packages)}) {
  const dir = realpathSync(join(process.cwd(), 'node_modules', name));
  const exports = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).exports ?? {};
  for (const [key, target] of Object.entries(exports)) {
    if (key.includes('*')) continue;
    const specifier = name + key.slice(1);
    const runtime = typeof target === 'string' ? !target.endsWith('.d.ts') : 'default' in target || 'import' in target;
    if (!runtime) {
      const file = typeof target === 'string' ? target : target.types;
      results.push(existsSync(join(dir, file)) ? { specifier, outcome: 'types' } : { specifier, outcome: 'error', error: 'missing ' + file });
      continue;
    }
    try {
      const ns = await import(specifier);
      results.push({ specifier, outcome: 'module', names: Object.keys(ns).length });
    } catch (error) {
      results.push({ specifier, outcome: 'error', error: String(error?.message ?? error).slice(0, 500) });
    }
  }
}
process.stdout.write(JSON.stringify(results));
`;
}

/** Imports every `exports` entry of `packages` from `cwd` (its `node_modules`), in a fresh Node process. */
export async function importEveryExport(node: string, cwd: string, packages: readonly string[]): Promise<ExportResult[]> {
  const { stdout } = await run(node, ['--no-node-snapshot', '--input-type=module', '-e', checkScript(packages)], { cwd, timeout: 120_000, maxBuffer: 4 * 1024 * 1024, env: { ...process.env, GATEHOUSE_FROM_SOURCE: '1' } });
  return JSON.parse(stdout) as ExportResult[];
}
