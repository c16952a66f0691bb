/**
 * The real `opa` binary for the OPA plugin's tests (test/opa/install-opa.sh builds it): Rego
 * compiled to Wasm with `opa build -t wasm`, and the expected decisions from `opa eval`.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { OPA } from '../../../test/opa/opa.ts';

export { describeWithOpa, OPA } from '../../../test/opa/opa.ts';

function opa(args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(OPA, args, { timeout: 120_000, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => (error ? reject(new Error(`opa ${args[0]} failed: ${stderr || stdout || error.message}`)) : resolve(stdout))),
  );
}

/** `policy.wasm` of `opa build -t wasm -e <entrypoint>` over `rego`, base64-encoded (the plugin's `PolicyWasm`). */
export async function compilePolicy(rego: string, entrypoint: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'opa-plugin-build-'));
  try {
    await writeFile(join(dir, 'policy.rego'), rego);
    await opa(['build', '-t', 'wasm', '-e', entrypoint, '-o', join(dir, 'bundle.tar.gz'), join(dir, 'policy.rego')]);
    return policyWasm(gunzipSync(await readFile(join(dir, 'bundle.tar.gz')))).toString('base64');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `opa eval` of `query` over `rego`, `data` and `input`: the first expression's value, or undefined when there is no result. */
export async function opaEval(rego: string, data: unknown, input: unknown, query: string): Promise<unknown> {
  const dir = await mkdtemp(join(tmpdir(), 'opa-plugin-eval-'));
  try {
    await writeFile(join(dir, 'policy.rego'), rego);
    await writeFile(join(dir, 'data.json'), JSON.stringify(data));
    await writeFile(join(dir, 'input.json'), JSON.stringify(input));
    const out = JSON.parse(await opa(['eval', '--format', 'json', '-d', join(dir, 'policy.rego'), '-d', join(dir, 'data.json'), '-i', join(dir, 'input.json'), query])) as { result?: { expressions: { value: unknown }[] }[] };
    return out.result?.[0]?.expressions[0]?.value;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `/policy.wasm` from the uncompressed tar of a bundle. */
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

/** The policy the tests run: request fields, data lookups, built-ins (startswith, regex, count, substring, json, base64). */
export const POLICY = `package authz

default allow := false

allow if {
  input.http_request.method == "GET"
  startswith(input.http_request.path, "/public/")
}

allow if {
  token := input.http_request.headers.authorization
  startswith(token, "Bearer ")
  user := data.tokens[substring(token, 7, -1)]
  user.role == "admin"
}

allow if {
  input.http_request.method == "POST"
  input.check_request.attributes.context_extensions.source_name == "test"
  regex.match("^/api/v[0-9]+/items$", input.http_request.path)
  claims := json.unmarshal(base64url.decode(input.http_request.headers["x-claims"]))
  claims.team in data.teams
  count(claims.scopes) > 0
}

reasons contains "no-auth" if not input.http_request.headers.authorization
reasons contains "write" if input.http_request.method != "GET"
`;

/** The data document. */
export const DATA = { tokens: { abc: { role: 'admin' }, def: { role: 'viewer' } }, teams: ['core', 'edge'] };
