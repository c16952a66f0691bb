/**
 * Rego compiled to WebAssembly by the real `opa` binary (`opa build -t wasm`) at config load, and
 * evaluated per request with OPA's own Wasm runtime (`@open-policy-agent/opa-wasm`): OPA's
 * semantics without an OPA process on the request path. The binary is needed where AuthConfigs
 * are loaded (the gateway/extauth image carries it; docs/auth.md "opaAuth").
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import type { LoadedPolicy } from '@open-policy-agent/opa-wasm';

/** Longest an `opa build` may take (a cold start on a busy machine included). */
const BUILD_TIMEOUT_MS = 60_000;
/** Largest Rego source accepted per step, all modules together. */
export const MAX_REGO_BYTES = 1024 * 1024;
/** A query that is just a rule reference: evaluated as that entrypoint, its value checked by Gloo's rule. */
const REF_QUERY = /^\s*data((?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*$/;
const WRAPPER_PACKAGE = 'gatehouse_opa_query';

/** Where `opa` is: `GATEHOUSE_OPA_PATH`, else `opa` on PATH. */
export function opaBinary(): string {
  return process.env.GATEHOUSE_OPA_PATH || 'opa';
}

/**
 * Built-ins the Wasm runtime does not carry and Gatehouse provides (OPA's Wasm target calls the
 * host for them): Gloo's OPA guide decodes the OIDC token with `io.jwt.decode`. Implemented to
 * OPA's documented results; an error (a malformed token) fails the evaluation, which denies.
 */
const CUSTOM_BUILTINS: Record<string, (...args: unknown[]) => unknown> = {
  'io.jwt.decode': (token: unknown) => {
    const parts = typeof token === 'string' ? token.split('.') : [];
    if (parts.length !== 3) throw new Error('io.jwt.decode: not a compact JWS');
    const json = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as unknown;
    return [json(parts[0]!), json(parts[1]!), Buffer.from(parts[2]!, 'base64url').toString('hex')];
  },
  'time.now_ns': () => Date.now() * 1e6,
};

interface Capabilities {
  builtins: { name: string }[];
  future_keywords?: string[];
  features?: string[];
  wasm_abi_versions?: unknown;
}

let capabilities: Promise<string> | undefined;

/**
 * The capabilities `opa build` compiles against: the built-ins the Wasm runtime and
 * {@link CUSTOM_BUILTINS} can run (declared as this opa declares them), so a policy calling any
 * other built-in (http.send, crypto, …) is refused at load, naming it, instead of failing per
 * request.
 */
function capabilitiesJson(binary: string): Promise<string> {
  capabilities ??= (async () => {
    const sdk = JSON.parse(await readFile(createRequire(import.meta.url).resolve('@open-policy-agent/opa-wasm').replace(/src[\\/]index\.c?js$/, 'capabilities.json'), 'utf8')) as Capabilities;
    const current = JSON.parse(await run(binary, ['capabilities', '--current'])) as Capabilities;
    const supported = new Set([...sdk.builtins.map((b) => b.name), ...Object.keys(CUSTOM_BUILTINS)]);
    return JSON.stringify({ ...current, builtins: current.builtins.filter((b) => supported.has(b.name)), wasm_abi_versions: sdk.wasm_abi_versions });
  })().catch((error: unknown) => {
    capabilities = undefined;
    throw error;
  });
  return capabilities;
}

/** How a query is evaluated: a rule's value (checked with Gloo's rule), or a wrapper rule that is true when the query succeeds. */
export interface CompiledQuery {
  readonly entrypoint: string;
  /** `value`: the entrypoint is the query's own rule; `success`: it is the wrapper's `allow`. */
  readonly kind: 'value' | 'success';
  readonly wrapper?: string;
}

/**
 * The entrypoint for a Gloo query. A bare `data.a.b` is evaluated as rule `a/b`; anything else
 * (`data.test.allow == true`, several expressions) becomes the body of a wrapper rule, which
 * succeeds exactly when the query has a result, the first expression then being true for the
 * comparisons and calls Gloo's docs use.
 */
export function compileQuery(query: string): CompiledQuery {
  const ref = REF_QUERY.exec(query);
  if (ref) return { entrypoint: ref[1]!.slice(1).replaceAll('.', '/'), kind: 'value' };
  // v0 syntax, as the modules are compiled (--v0-compatible): Gloo's guides write v0 Rego.
  const wrapper = `package ${WRAPPER_PACKAGE}\n\ndefault allow = false\n\nallow {\n${query.replace(/\r/g, '')}\n}\n`;
  return { entrypoint: `${WRAPPER_PACKAGE}/allow`, kind: 'success', wrapper };
}

/** A compiled policy and how to read its decision. */
export interface OpaWasmPolicy {
  readonly policy: LoadedPolicy;
  readonly query: CompiledQuery;
}

/**
 * Compiles `modules` (file name → Rego) and the query with `opa build -t wasm -e <entrypoint>
 * --v0-compatible`. Throws with opa's own message when the policy or query does not compile.
 */
export async function compileOpaWasm(modules: Readonly<Record<string, string>>, query: string, binary = opaBinary()): Promise<OpaWasmPolicy> {
  const compiled = compileQuery(query);
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-opa-'));
  try {
    const files: string[] = [];
    let index = 0;
    for (const [name, source] of Object.entries(modules)) {
      // Own file names: a ConfigMap key never becomes a path.
      const file = join(dir, `module-${index++}-${name.replace(/[^A-Za-z0-9._-]/g, '_')}${name.endsWith('.rego') ? '' : '.rego'}`);
      await writeFile(file, source);
      files.push(file);
    }
    if (compiled.wrapper) {
      const file = join(dir, 'gatehouse-query.rego');
      await writeFile(file, compiled.wrapper);
      files.push(file);
    }
    const bundle = join(dir, 'bundle.tar.gz');
    const caps = join(dir, 'capabilities.json');
    await writeFile(caps, await capabilitiesJson(binary));
    await run(binary, ['build', '-t', 'wasm', '-e', compiled.entrypoint, '--v0-compatible', '--capabilities', caps, '-o', bundle, ...files]);
    const wasm = policyWasm(gunzipSync(await readFile(bundle)));
    // Loaded with the first policy: a gateway without OPA steps never holds the SDK.
    const { loadPolicy } = await import('@open-policy-agent/opa-wasm');
    const policy = await loadPolicy(wasm, undefined, CUSTOM_BUILTINS);
    return { policy, query: compiled };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Gloo's decision for `input` under a compiled policy. */
export function evaluateOpaWasm(compiled: OpaWasmPolicy, input: unknown): { allowed: boolean; value: unknown } {
  const results = compiled.policy.evaluate(input, compiled.query.entrypoint) as { result: unknown }[];
  const value = results[0]?.result;
  return { allowed: compiled.query.kind === 'value' ? value === true || (Array.isArray(value) && value[0] === true) : value === true, value };
}

function run(binary: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(binary, args, { timeout: BUILD_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024, env: { PATH: process.env.PATH ?? '', HOME: tmpdir() } }, (error, stdout, stderr) => {
      if (!error) return resolve(stdout);
      const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
      // opa prints compile errors on stdout or stderr depending on the command and version.
      const said = `${stderr}\n${stdout}`.trim().split('\n').filter((l) => l.trim() !== '').slice(0, 8).join(' ');
      reject(new Error(missing ? `the opa binary (${binary}) is not installed: opaAuth compiles Rego with it (set GATEHOUSE_OPA_PATH)` : `opa ${args[0]} failed: ${said || error.message}`));
    });
  });
}

/** `/policy.wasm` from an uncompressed tar (the bundle `opa build` writes). */
function policyWasm(tar: Buffer): Buffer {
  for (let offset = 0; offset + 512 <= tar.length; ) {
    const header = tar.subarray(offset, offset + 512);
    if (header.every((b) => b === 0)) break;
    const name = header.subarray(0, 100).toString('utf8').replace(/\0.*$/s, '');
    const size = Number.parseInt(header.subarray(124, 136).toString('utf8').replace(/\0.*$/s, '').trim() || '0', 8);
    const start = offset + 512;
    if (name === '/policy.wasm' || name === 'policy.wasm') return tar.subarray(start, start + size);
    offset = start + Math.ceil(size / 512) * 512;
  }
  throw new Error('opa build wrote no policy.wasm');
}
