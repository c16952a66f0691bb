import { createHash, timingSafeEqual } from 'node:crypto';
import type { ApiKeyAuthSpec } from '../../config/schema/auth-config.ts';
import type { ResourceRef } from '../../config/schema/common.ts';
import { secretReadableFrom } from '../../config/secret-grants.ts';
import { allow, deny } from '../decision.ts';
import type { AuthDecision, AuthStep, CheckRequest, HeaderToSet } from '../step.ts';

/** The Secret key holding the API key (Gloo's `extauth.solo.io/apikey` Secrets); the others are its metadata. */
export const API_KEY_FIELD = 'api-key';
/** The Secret type of Gloo's API key Secrets (`glooctl create secret apikey`): the only ones a label selects. */
export const API_KEY_SECRET_TYPE = 'extauth.solo.io/apikey';
/** Gloo's default header. */
export const DEFAULT_API_KEY_HEADER = 'api-key';

/** A Secret as the step needs it. */
export interface ApiKeySecret {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly data: Readonly<Record<string, string>>;
  /** `type` (Opaque when absent). */
  readonly type?: string | undefined;
  /** Other namespaces that may read it (config/secret-grants.ts). */
  readonly referableFrom?: readonly string[] | undefined;
}

/** Where the step's Secrets come from: by reference, and by label across the config source. */
export interface ApiKeySecretSource {
  byRef(ref: ResourceRef): ApiKeySecret | undefined;
  all(): readonly ApiKeySecret[];
}

/** An {@link ApiKeySecretSource} over a config snapshot's (or a load's) resources. */
export function secretSource(resources: ReadonlyMap<string, { kind: string; namespace: string; name: string; labels: Readonly<Record<string, string>>; spec: unknown }>): ApiKeySecretSource {
  const toSecret = (r: { namespace: string; name: string; labels: Readonly<Record<string, string>>; spec: unknown }): ApiKeySecret => {
    const spec = r.spec as { type?: string; data: Record<string, string>; referableFrom?: string[] };
    return { namespace: r.namespace, name: r.name, labels: r.labels, data: spec.data, type: spec.type, referableFrom: spec.referableFrom };
  };
  let all: ApiKeySecret[] | undefined;
  return {
    byRef(ref) {
      const found = resources.get(`Secret/${ref.namespace}/${ref.name}`);
      return found?.kind === 'Secret' ? toSecret(found) : undefined;
    },
    all() {
      all ??= [...resources.values()].filter((r) => r.kind === 'Secret').map(toSecret);
      return all;
    },
  };
}

/** A problem that keeps the step from being built, with the field it is about. */
export interface ApiKeyProblem {
  readonly path: (string | number)[];
  readonly message: string;
  readonly severity: 'error' | 'warning';
}

interface Entry {
  readonly digest: Buffer;
  readonly metadata: Readonly<Record<string, string>>;
}

/** What a built step checks: keys by the hex of their SHA-256, and the headers to add. */
export interface CompiledApiKeyAuth {
  readonly headerName: string;
  readonly keys: ReadonlyMap<string, Entry>;
  readonly headers: readonly { header: string; name: string; required: boolean }[];
}

/** The Secrets `spec` names: referenced ones (each must hold a key) and label-selected ones (those holding one). */
export function selectSecrets(spec: ApiKeyAuthSpec, namespace: string, source: ApiKeySecretSource): { secrets: ApiKeySecret[]; problems: ApiKeyProblem[] } {
  const problems: ApiKeyProblem[] = [];
  const secrets = new Map<string, ApiKeySecret>();
  const storage = spec.k8sSecretApikeyStorage;
  const refs: [ResourceRef, (string | number)[]][] = [
    ...(spec.apiKeySecretRefs ?? []).map((ref, i): [ResourceRef, (string | number)[]] => [ref, ['apiKeySecretRefs', i]]),
    ...(storage?.apiKeySecretRefs ?? []).map((ref, i): [ResourceRef, (string | number)[]] => [ref, ['k8sSecretApikeyStorage', 'apiKeySecretRefs', i]]),
  ];
  for (const [ref, path] of refs) {
    const secret = source.byRef({ name: ref.name, namespace: ref.namespace ?? namespace });
    // A missing Secret, or one of another namespace that does not grant this one, is reported by the reference check.
    if (!secret || !secretReadableFrom(secret, namespace)) continue;
    if (!Object.hasOwn(secret.data, API_KEY_FIELD)) {
      problems.push({ path, severity: 'error', message: `Secret ${secret.namespace}/${secret.name} has no "${API_KEY_FIELD}" key (an API key Secret holds its key there; other keys are metadata)` });
      continue;
    }
    secrets.set(`${secret.namespace}/${secret.name}`, secret);
  }
  for (const [selector, path] of [
    [spec.labelSelector, ['labelSelector']],
    [storage?.labelSelector, ['k8sSecretApikeyStorage', 'labelSelector']],
  ] as const) {
    if (!selector) continue;
    const wanted = Object.entries(selector);
    // `{}` would select every Secret of every namespace (a database password became a valid key).
    if (wanted.length === 0) {
      problems.push({ path: [...path], severity: 'error', message: 'an empty labelSelector would accept every Secret holding an "api-key" key as an API key: name at least one label (Gloo labels API key Secrets)' });
      continue;
    }
    // Label selection takes API key Secrets only (a labelled database password is no key), of the
    // AuthConfig's namespace or granting it (docs/tenancy.md).
    const matched = source
      .all()
      .filter((secret) => secret.type === API_KEY_SECRET_TYPE && wanted.every(([key, value]) => secret.labels[key] === value) && Object.hasOwn(secret.data, API_KEY_FIELD) && secretReadableFrom(secret, namespace));
    if (matched.length === 0) problems.push({ path: [...path], severity: 'warning', message: `selects no Secret of type ${API_KEY_SECRET_TYPE} holding an "api-key" key: every request is denied until one exists` });
    for (const secret of matched) secrets.set(`${secret.namespace}/${secret.name}`, secret);
  }
  if (refs.length === 0 && !spec.labelSelector && !storage?.labelSelector) {
    problems.push({ path: [], severity: 'error', message: 'names no API key Secrets: set labelSelector or apiKeySecretRefs' });
  }
  return { secrets: [...secrets.values()].sort((a, b) => `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`)), problems };
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/** Compiles `spec` over its Secrets; a key held by two Secrets is an error (which metadata would apply?). */
export function compileApiKeyAuth(spec: ApiKeyAuthSpec, secrets: readonly ApiKeySecret[]): { compiled: CompiledApiKeyAuth; problems: ApiKeyProblem[] } {
  const problems: ApiKeyProblem[] = [];
  const keys = new Map<string, Entry>();
  const owners = new Map<string, string>();
  for (const secret of secrets) {
    const value = secret.data[API_KEY_FIELD]!;
    if (value.length === 0) {
      problems.push({ path: [], severity: 'error', message: `Secret ${secret.namespace}/${secret.name} holds an empty API key` });
      continue;
    }
    const digest = sha256(value);
    const hex = digest.toString('hex');
    const owner = owners.get(hex);
    if (owner) {
      problems.push({ path: [], severity: 'error', message: `Secrets ${owner} and ${secret.namespace}/${secret.name} hold the same API key` });
      continue;
    }
    owners.set(hex, `${secret.namespace}/${secret.name}`);
    const metadata: Record<string, string> = {};
    for (const [key, v] of Object.entries(secret.data)) if (key !== API_KEY_FIELD) metadata[key] = v;
    keys.set(hex, { digest, metadata });
  }
  const headers = [
    ...Object.entries(spec.headersFromMetadata ?? {}).map(([header, name]) => ({ header: header.toLowerCase(), name, required: false })),
    ...Object.entries(spec.headersFromMetadataEntry ?? {}).map(([header, entry]) => ({ header: header.toLowerCase(), name: entry.name, required: entry.required === true })),
  ];
  return { compiled: { headerName: (spec.headerName ?? DEFAULT_API_KEY_HEADER).toLowerCase(), keys, headers }, problems };
}

/** 401 with no body, as Gloo answers a missing or unknown API key. */
const unauthorized = (): AuthDecision => deny(401);

/**
 * `apiKeyAuth` (Gloo): the request's `headerName` header must hold one of the API keys of the
 * step's Secrets. Keys are kept and compared as SHA-256 digests, the match confirmed in
 * constant time, so neither memory nor timing gives a key away. An allowed request gets the
 * headers `headersFromMetadataEntry` names, from its key's Secret; a key whose Secret lacks a
 * `required` entry is refused. Those headers are the step's own (`ownedHeaders`): the chain
 * removes a client's copy of them whatever the outcome.
 */
export class ApiKeyAuthStep implements AuthStep {
  readonly type = 'apiKeyAuth';
  readonly name: string;
  readonly ownedHeaders: readonly string[];
  private readonly compiled: CompiledApiKeyAuth;

  constructor(compiled: CompiledApiKeyAuth, options: { name: string }) {
    this.compiled = compiled;
    this.name = options.name;
    // The client's own `x-api-user` must never pass for one taken from a key's Secret.
    this.ownedHeaders = compiled.headers.map((h) => h.header);
  }

  async authorize(request: CheckRequest): Promise<AuthDecision> {
    const presented = request.attributes.request.http.headers[this.compiled.headerName];
    // Bounded before hashing: no key is this long, and hashing megabytes per request is a cost an attacker chooses.
    if (presented === undefined || presented.length === 0 || presented.length > 4096) return unauthorized();
    const digest = sha256(presented);
    const entry = this.compiled.keys.get(digest.toString('hex'));
    if (!entry || !timingSafeEqual(entry.digest, digest)) return unauthorized();
    const headers: HeaderToSet[] = [];
    for (const { header, name, required } of this.compiled.headers) {
      const value = entry.metadata[name];
      if (value === undefined) {
        if (required) return unauthorized();
        continue;
      }
      headers.push({ key: header, value });
    }
    return allow(headers);
  }
}
