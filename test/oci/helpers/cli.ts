import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

const BINS = {
  'gatehouse-plugin': join(ROOT, 'plugin-sdk/bin/gatehouse-plugin.js'),
  'gatehouse-init': join(ROOT, 'init-container/bin/gatehouse-init.js'),
  gatehouse: join(ROOT, 'core/bin/gatehouse.js'),
} as const;

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs one of the repository's CLIs as a real process (Node 24 running the .ts sources). */
export function runCli(bin: keyof typeof BINS, args: string[], options: { env?: Record<string, string | undefined>; cwd?: string } = {}): Promise<RunResult> {
  return runTool(process.execPath, [BINS[bin], ...args], options);
}

/** Runs any program, collecting its output. */
export function runTool(command: string, args: string[], options: { env?: Record<string, string | undefined>; cwd?: string } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries({ ...process.env, ...options.env })) if (value !== undefined) env[key] = value;
    const child = spawn(command, args, { env, cwd: options.cwd ?? ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/** The env a CLI run gets in tests: no credentials or Docker config leaking in from the machine. */
export function cleanEnv(extra: Record<string, string> = {}): Record<string, string | undefined> {
  return {
    GATEHOUSE_REGISTRY_USERNAME: undefined,
    GATEHOUSE_REGISTRY_PASSWORD: undefined,
    REGISTRY_AUTH_FILE: undefined,
    DOCKER_CONFIG: join(tmpdir(), 'gh-no-docker-config'),
    GATEHOUSE_INSECURE: undefined,
    ...extra,
  };
}

/** A new directory below `parent` (the test's work dir, removed by the test) with small plugin stand-in files. */
export async function pluginDir(parent: string, files: Record<string, string> = { 'hello.js': 'var hello = 1;\n' }): Promise<string> {
  const dir = await mkdtemp(join(parent, 'plugins-'));
  for (const [name, text] of Object.entries(files)) {
    await mkdir(join(dir, name, '..'), { recursive: true });
    await writeFile(join(dir, name), text);
  }
  return dir;
}

/** The digest printed by `image build` / `image push`. */
export function printedDigest(output: string): string {
  const match = /sha256:[a-f0-9]{64}/.exec(output);
  if (!match) throw new Error(`no digest in output: ${output}`);
  return match[0];
}
