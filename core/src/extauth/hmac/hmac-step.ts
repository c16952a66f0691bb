/**
 * Gloo's `hmacAuth` step with `parametersInHeaders`: the client signs parts of the request with a
 * shared secret and sends the signature's parameters in the `Authorization` header, in the form of
 * draft-cavage-http-signatures-10 (section 2.1: `keyId`/`username`, `algorithm`, `headers`,
 * `signature`). Keys come from Gloo credentials Secrets (`username` is the key id, `password` the
 * shared secret), as `glooctl create secret authcredentials` writes them.
 *
 * Gloo documents only "parameters in headers, SHA-1"; the exact string is draft-cavage's
 * (section 2.3): one line per signed header, `name: value`, with `(request-target)` (or
 * `@request-target`) as `<method lowercase> <path>` and `request-line` as `<METHOD> <path> HTTP/1.1`.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { HmacAuthSpec } from '../../config/schema/auth-config.ts';
import type { ResourceRef } from '../../config/schema/common.ts';
import { deepFreeze } from '../../config/resource.ts';
import { allow, deny, type Denied } from '../decision.ts';
import type { AuthDecision, AuthStep, CheckRequest } from '../step.ts';

/** HMAC algorithms accepted in the `algorithm` parameter (draft-cavage names). */
const ALGORITHMS: ReadonlyMap<string, string> = new Map([
  ['hmac-sha1', 'sha1'],
  ['hmac-sha256', 'sha256'],
  ['hmac-sha512', 'sha512'],
]);
/** Signed headers assumed when the client sends no `headers` parameter (draft-cavage 2.1.3). */
const DEFAULT_SIGNED = ['date'];
/** How far a signed `date` may be from the server's clock, either way (default 300 s, as APISIX and Kong). */
export const DEFAULT_CLOCK_SKEW_MS = 300_000;
/** Longest `Authorization` value parsed; longer ones are a 401 unparsed. */
const MAX_HEADER = 4096;
/** Most headers one signature may cover. */
const MAX_SIGNED_HEADERS = 32;

/** A problem with the step's configuration, relative to the step. */
export interface HmacProblem {
  readonly path: (string | number)[];
  readonly message: string;
}

/** The step compiled once per AuthConfig version: key id → secret. */
export interface CompiledHmacAuth {
  readonly keys: ReadonlyMap<string, Buffer>;
}

/** The credentials Secrets of the step (`secretRefs.secretRefs`). */
export function hmacSecretRefs(spec: HmacAuthSpec): ResourceRef[] {
  return spec.secretRefs.secretRefs;
}

/** Reads the key id and secret of each referenced Secret (`username`, `password`), or says what is missing. */
export function compileHmacAuth(spec: HmacAuthSpec, namespace: string, byRef: (ref: { name: string; namespace: string }) => Readonly<Record<string, string>> | undefined): { compiled?: CompiledHmacAuth; problems: HmacProblem[] } {
  const keys = new Map<string, Buffer>();
  const problems: HmacProblem[] = [];
  hmacSecretRefs(spec).forEach((ref, i) => {
    const at = ['secretRefs', 'secretRefs', i];
    const data = byRef({ name: ref.name, namespace: ref.namespace ?? namespace });
    if (!data) return problems.push({ path: at, message: `Secret ${ref.namespace ?? namespace}/${ref.name} is not served` });
    const username = data.username;
    const password = data.password;
    if (!username || !password) return problems.push({ path: at, message: `Secret ${ref.namespace ?? namespace}/${ref.name} needs the keys "username" (the key id) and "password" (the shared secret), as glooctl create secret authcredentials writes them` });
    if (keys.has(username)) return problems.push({ path: at, message: `key id "${username}" is defined by two Secrets` });
    keys.set(username, Buffer.from(password, 'utf8'));
  });
  return problems.length > 0 ? { problems } : { compiled: { keys }, problems };
}

/** The signature parameters of an `Authorization: hmac …` / `Signature …` header. */
interface SignatureParams {
  keyId: string;
  algorithm: string;
  headers: string[];
  signature: Buffer;
}

const PARAM = /^[ \t]*([A-Za-z]+)="([^"]*)"[ \t]*$/;

/** Parses the parameters; undefined for anything malformed, duplicated or missing. */
export function parseSignatureHeader(value: string): SignatureParams | undefined {
  const space = value.indexOf(' ');
  if (space <= 0) return undefined;
  const scheme = value.slice(0, space).toLowerCase();
  if (scheme !== 'hmac' && scheme !== 'signature') return undefined;
  const params = new Map<string, string>();
  // Values are base64, header names and key ids: none needs a comma or a quote inside.
  for (const part of value.slice(space + 1).split(',')) {
    const match = PARAM.exec(part);
    if (!match) return undefined;
    const name = match[1]!.toLowerCase();
    if (params.has(name)) return undefined;
    params.set(name, match[2]!);
  }
  const keyId = params.get('keyid') ?? params.get('username');
  if (params.has('keyid') && params.has('username')) return undefined;
  const algorithm = (params.get('algorithm') ?? 'hmac-sha1').toLowerCase();
  const signature = params.get('signature');
  if (!keyId || !signature || !/^[A-Za-z0-9+/]+={0,2}$/.test(signature) || signature.length % 4 !== 0) return undefined;
  const headers = params.has('headers') ? params.get('headers')!.toLowerCase().split(' ').filter((h) => h !== '') : DEFAULT_SIGNED;
  if (headers.length === 0 || headers.length > MAX_SIGNED_HEADERS || new Set(headers).size !== headers.length) return undefined;
  return { keyId, algorithm, headers, signature: Buffer.from(signature, 'base64') };
}

/** The string a client signs for `headers` of `request` (draft-cavage 2.3), or undefined when a signed header is absent. */
export function signingString(request: CheckRequest, headers: readonly string[]): string | undefined {
  const http = request.attributes.request.http;
  const lines: string[] = [];
  for (const name of headers) {
    if (name === '(request-target)' || name === '@request-target') lines.push(`${name}: ${http.method.toLowerCase()} ${http.path}`);
    else if (name === 'request-line') lines.push(`${http.method.toUpperCase()} ${http.path} HTTP/1.1`);
    else {
      const value = Object.hasOwn(http.headers, name) ? http.headers[name] : undefined;
      if (value === undefined) return undefined;
      lines.push(`${name}: ${value}`);
    }
  }
  return lines.join('\n');
}

/** Options of {@link HmacAuthStep}. */
export interface HmacAuthStepOptions {
  name: string;
  clockSkewMs?: number;
  /** The clock (tests). */
  now?: () => number;
}

/**
 * Verifies the signature with every comparison in constant time, and requires the `date` header
 * (or `x-date`) to be signed and within the clock skew, which bounds how long a captured request
 * can be replayed (docs/auth.md "hmacAuth": replay).
 */
export class HmacAuthStep implements AuthStep {
  readonly type = 'hmacAuth';
  readonly name: string;
  private readonly keys: ReadonlyMap<string, Buffer>;
  private readonly skewMs: number;
  private readonly now: () => number;
  private readonly unauthorized: Denied = deepFreeze(deny(401, [{ key: 'www-authenticate', value: 'hmac headers="date (request-target)"' }, { key: 'content-length', value: '0' }]));
  /** Compared against when the key id is unknown, so that an unknown id costs as much as a bad signature. */
  private readonly decoy = Buffer.alloc(32);

  constructor(compiled: CompiledHmacAuth, options: HmacAuthStepOptions) {
    this.keys = compiled.keys;
    this.name = options.name;
    this.skewMs = options.clockSkewMs ?? DEFAULT_CLOCK_SKEW_MS;
    this.now = options.now ?? Date.now;
  }

  async authorize(request: CheckRequest): Promise<AuthDecision> {
    const header = request.attributes.request.http.headers.authorization;
    if (header === undefined || header.length > MAX_HEADER) return this.unauthorized;
    const params = parseSignatureHeader(header);
    if (!params) return this.unauthorized;
    const hash = ALGORITHMS.get(params.algorithm);
    if (!hash) return this.unauthorized;
    // Without a signed date a captured request could be replayed forever.
    const dateHeader = params.headers.includes('date') ? 'date' : params.headers.includes('x-date') ? 'x-date' : undefined;
    if (!dateHeader) return this.unauthorized;
    const signed = signingString(request, params.headers);
    if (signed === undefined) return this.unauthorized;
    const date = Date.parse(request.attributes.request.http.headers[dateHeader]!);
    if (!Number.isFinite(date) || Math.abs(this.now() - date) > this.skewMs) return this.unauthorized;
    const key = this.keys.get(params.keyId);
    const expected = createHmac(hash, key ?? this.decoy).update(signed, 'utf8').digest();
    // The length is the algorithm's, not a secret: only equal-length buffers are compared.
    const ok = expected.length === params.signature.length && timingSafeEqual(expected, params.signature);
    if (!ok || !key) return this.unauthorized;
    return allow([{ key: 'x-user-id', value: params.keyId, append: false }]);
  }
}
