/**
 * The real `opa` binary for the OPA tests (test/opa/install-opa.sh builds it from OPA's Go
 * module): the expected decisions come from `opa eval`, and `opa run --server` is the peer of
 * `opaServerAuth`.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { freePort } from '../support/ports.ts';

/** `GATEHOUSE_OPA_PATH`, else install-opa.sh's link under the tools dir. */
export const OPA = process.env.GATEHOUSE_OPA_PATH ?? join(process.env.GATEHOUSE_TOOLS_DIR ?? join(homedir(), '.cache', 'gatehouse-tools'), 'opa', 'bin', 'opa');

/** A suite that needs opa: fails under CI=true without it, skipped loudly elsewhere. */
export function describeWithOpa(title: string, testFile: string, body: () => void): void {
  if (existsSync(OPA)) return void describe(title, body);
  const message = `opa not found at ${OPA}: run test/opa/install-opa.sh (or set GATEHOUSE_OPA_PATH)`;
  if (process.env.CI === 'true') {
    describe(title, () => {
      it('needs opa on CI', () => {
        throw new Error(message);
      });
    });
    return;
  }
  console.warn(`\n*** SKIPPED ${testFile}: ${message} ***\n`);
  describe.skip(title, body);
}

/** `opa eval` of `query` over `modules` and `input`: the first result's first expression value (undefined: no result). */
export async function opaEval(modules: Record<string, string>, query: string, input: unknown): Promise<{ defined: boolean; value: unknown }> {
  const dir = await mkdtemp(join(tmpdir(), 'opa-eval-'));
  try {
    const args = ['eval', '--v0-compatible', '--format', 'json', '-i', join(dir, 'input.json')];
    await writeFile(join(dir, 'input.json'), JSON.stringify(input));
    let i = 0;
    for (const source of Object.values(modules)) {
      const file = join(dir, `m${i++}.rego`);
      await writeFile(file, source);
      args.push('-d', file);
    }
    args.push(query);
    const out = await new Promise<string>((resolve, reject) => execFile(OPA, args, { timeout: 60_000 }, (error, stdout, stderr) => (error ? reject(new Error(`opa eval failed: ${stderr || error.message}`)) : resolve(stdout))));
    const parsed = JSON.parse(out) as { result?: { expressions: { value: unknown }[] }[] };
    const first = parsed.result?.[0];
    return first ? { defined: true, value: first.expressions[0]!.value } : { defined: false, value: undefined };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Gloo's rule over an `opa eval` answer: the first expression is `true`, or an array starting with `true`. */
export function glooDecision(result: { defined: boolean; value: unknown }): boolean {
  return result.defined && (result.value === true || (Array.isArray(result.value) && result.value[0] === true));
}

/** A running `opa run --server` with the given modules. */
export interface OpaServer {
  readonly address: string;
  stop(): Promise<void>;
}

export async function startOpaServer(modules: Record<string, string>, host = '127.0.0.1'): Promise<OpaServer> {
  const dir = await mkdtemp(join(tmpdir(), 'opa-server-'));
  const files: string[] = [];
  let i = 0;
  for (const source of Object.values(modules)) {
    const file = join(dir, `m${i++}.rego`);
    await writeFile(file, source);
    files.push(file);
  }
  const port = await freePort();
  const child = spawn(OPA, ['run', '--server', '--v0-compatible', '--addr', `${host}:${port}`, '--log-level', 'error', ...files], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stderr += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const until = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`opa run exited: ${stderr}`);
    const ok = await fetch(`http://${host}:${port}/health`).then((r) => r.ok, () => false);
    if (ok) break;
    if (Date.now() > until) {
      child.kill('SIGKILL');
      throw new Error(`opa run did not become healthy: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    address: `${host}:${port}`,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
