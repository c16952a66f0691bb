import { Agent, interceptors, type Dispatcher } from 'undici';
import { digestMismatch, digestOf, hasherFor, isDigest, sha256, tooLarge, verifyDigest, verifyStream, type Digest } from './digest.ts';
import { OciCodes, OciError } from './errors.ts';
import type { Descriptor } from './manifest.ts';
import { MANIFEST_ACCEPT } from './media-types.ts';
import { parseChallenge, type Challenge } from './www-authenticate.ts';

/** Username and password (or a registry token as password) for one registry. */
export interface RegistryCredentials {
  username: string;
  password: string;
}

export interface RegistryClientOptions {
  /** `host[:port]` where the distribution API is served. */
  host: string;
  /** Speak plain HTTP. Never the default: credentials and content would travel unprotected. */
  insecure?: boolean;
  credentials?: RegistryCredentials;
  /** Blobs larger than this are uploaded in chunks of this size (PATCH); smaller ones in one PUT. */
  chunkSize?: number;
  /** Largest manifest accepted (distribution's own limit is 4 MiB). */
  maxManifestBytes?: number;
  /** Milliseconds to wait for response headers, and between body chunks. */
  timeoutMs?: number;
  /** Use this dispatcher instead of a private undici Agent (the caller closes it). */
  dispatcher?: Dispatcher;
}

/** A blob to upload: its descriptor and a way to read any byte range of it. */
export interface BlobSource {
  digest: Digest;
  size: number;
  /** Bytes `[start, end)`. */
  read(start: number, end: number): Promise<Uint8Array>;
}

/** A manifest as the registry returned it, already checked against its digest. */
export interface FetchedManifest {
  bytes: Uint8Array;
  mediaType: string | undefined;
  digest: Digest;
}

const DEFAULT_CHUNK = 8 * 1024 * 1024;
const DEFAULT_MAX_MANIFEST = 4 * 1024 * 1024;
const USER_AGENT = 'gatehouse-oci/1';

type Access = 'pull' | 'push';

interface Call {
  method: 'GET' | 'HEAD' | 'PUT' | 'POST' | 'PATCH';
  /** Absolute URL or a path below the registry root. */
  url: string;
  repository?: string;
  access?: Access;
  headers?: Record<string, string>;
  body?: Uint8Array;
  what: string;
}

/**
 * A client for the OCI distribution API v2 (distribution-spec, spec.md) on undici: version
 * check, anonymous, Basic and Bearer-token auth following `WWW-Authenticate`, manifests, blobs
 * with digest verification, monolithic and chunked uploads with existing-blob skip.
 */
export class RegistryClient {
  readonly host: string;
  readonly insecure: boolean;
  readonly #base: string;
  readonly #credentials: RegistryCredentials | undefined;
  readonly #chunkSize: number;
  readonly #maxManifestBytes: number;
  readonly #dispatcher: Dispatcher;
  readonly #ownAgent: Agent | undefined;
  /** The scheme learnt from the last challenge; `undefined` until the registry asked. */
  #challenge: Challenge | undefined;
  readonly #tokens = new Map<string, { token: string; expires: number }>();

  constructor(options: RegistryClientOptions) {
    if (!options || typeof options.host !== 'string' || !/^[A-Za-z0-9.\-[\]:]+$/.test(options.host)) {
      throw new OciError(OciCodes.BAD_REFERENCE, `registry host ${JSON.stringify(options?.host)} must be host[:port]`);
    }
    const chunkSize = options.chunkSize ?? DEFAULT_CHUNK;
    if (!Number.isSafeInteger(chunkSize) || chunkSize < 1) throw new OciError(OciCodes.BAD_INPUT, `chunkSize must be a positive integer (got ${chunkSize})`);
    this.host = options.host;
    this.insecure = options.insecure === true;
    this.#base = `${this.insecure ? 'http' : 'https'}://${options.host}`;
    this.#credentials = options.credentials;
    this.#chunkSize = chunkSize;
    this.#maxManifestBytes = options.maxManifestBytes ?? DEFAULT_MAX_MANIFEST;
    const timeout = options.timeoutMs ?? 30_000;
    this.#ownAgent = options.dispatcher ? undefined : new Agent({ headersTimeout: timeout, bodyTimeout: timeout, connect: { timeout } });
    // Blob downloads are often redirected to object storage; undici drops Authorization on cross-origin hops.
    this.#dispatcher = (options.dispatcher ?? this.#ownAgent!).compose(interceptors.redirect({ maxRedirections: 5 }));
  }

  /** Closes the private connection pool (no-op when a dispatcher was passed in). */
  async close(): Promise<void> {
    await this.#ownAgent?.close();
  }

  /** API version check (`GET /v2/`), authenticating if the registry asks to. */
  async ping(): Promise<void> {
    const res = await this.#send({ method: 'GET', url: '/v2/', what: `registry ${this.host}` });
    await drain(res);
    if (res.statusCode !== 200) throw await registryError(res, `registry ${this.host}: GET /v2/`);
  }

  /**
   * Fetches a manifest or index by tag or digest. Content fetched by digest is verified
   * against it; by tag, against the `Docker-Content-Digest` header when the registry sends one.
   */
  async getManifest(repository: string, reference: string): Promise<FetchedManifest> {
    const what = `${this.host}/${repository}${isDigest(reference) ? '@' : ':'}${reference}`;
    const res = await this.#send({ method: 'GET', url: `/v2/${repository}/manifests/${reference}`, repository, access: 'pull', headers: { accept: MANIFEST_ACCEPT }, what });
    if (res.statusCode !== 200) throw await registryError(res, `manifest ${what}`);
    const bytes = await readLimited(res, this.#maxManifestBytes, `manifest ${what}`);
    const headerDigest = header(res, 'docker-content-digest');
    let digest: Digest;
    if (isDigest(reference)) {
      verifyDigest(bytes, reference, `manifest ${what}`);
      digest = reference;
    } else if (isDigest(headerDigest)) {
      const actual = digestOf(hasherFor(headerDigest).update(bytes), headerDigest);
      if (actual !== headerDigest) throw digestMismatch(`manifest ${what}`, headerDigest, actual);
      digest = headerDigest;
    } else {
      digest = sha256(bytes);
    }
    const contentType = header(res, 'content-type')?.split(';')[0]?.trim();
    return { bytes, mediaType: contentType || undefined, digest };
  }

  /** Uploads a manifest under a tag or its digest; returns its digest. */
  async putManifest(repository: string, reference: string, bytes: Uint8Array, mediaType: string): Promise<Digest> {
    const digest = sha256(bytes);
    const what = `${this.host}/${repository}${isDigest(reference) ? '@' : ':'}${reference}`;
    const res = await this.#send({ method: 'PUT', url: `/v2/${repository}/manifests/${reference}`, repository, access: 'push', headers: { 'content-type': mediaType }, body: bytes, what });
    await drain(res);
    if (res.statusCode !== 201 && res.statusCode !== 200) throw await registryError(res, `pushing manifest ${what}`);
    const echoed = header(res, 'docker-content-digest');
    if (isDigest(echoed) && echoed.startsWith('sha256:') && echoed !== digest) throw digestMismatch(`pushing manifest ${what}`, digest, echoed);
    return digest;
  }

  /** Whether the repository already holds the blob (HEAD). */
  async hasBlob(repository: string, digest: Digest): Promise<boolean> {
    const what = `${this.host}/${repository}@${digest}`;
    const res = await this.#send({ method: 'HEAD', url: `/v2/${repository}/blobs/${digest}`, repository, access: 'pull', what });
    await drain(res);
    if (res.statusCode === 200) return true;
    if (res.statusCode === 404) return false;
    throw await registryError(res, `checking blob ${what}`);
  }

  /** Downloads a whole blob, verified against its descriptor. */
  async getBlob(repository: string, descriptor: Pick<Descriptor, 'digest' | 'size'>, maxBytes: number = Infinity): Promise<Buffer> {
    const parts: Uint8Array[] = [];
    for await (const chunk of this.openBlob(repository, descriptor, maxBytes)) parts.push(chunk);
    return Buffer.concat(parts);
  }

  /** Streams a blob; the stream throws at its end unless size and digest match (and early once over `maxBytes`). */
  openBlob(repository: string, descriptor: Pick<Descriptor, 'digest' | 'size'>, maxBytes: number = Infinity): AsyncIterable<Uint8Array> {
    const what = `blob ${this.host}/${repository}@${descriptor.digest}`;
    if (descriptor.size > maxBytes) throw tooLarge(what, descriptor.size, maxBytes);
    const send = () => this.#send({ method: 'GET', url: `/v2/${repository}/blobs/${descriptor.digest}`, repository, access: 'pull', what });
    async function* body(): AsyncGenerator<Uint8Array> {
      const res = await send();
      if (res.statusCode !== 200) throw await registryError(res, what);
      try {
        yield* res.body as AsyncIterable<Buffer>;
      } finally {
        // A consumer that stops early (an oversize or refused layer) must not leave the socket busy.
        if (!res.body.destroyed) res.body.destroy();
      }
    }
    return verifyStream(body(), descriptor, what, maxBytes);
  }

  /**
   * Uploads a blob unless the repository already has it. Blobs up to `chunkSize` go in one
   * PUT (monolithic); larger ones in PATCH chunks followed by a closing PUT (spec.md, pushing blobs).
   */
  async pushBlob(repository: string, source: BlobSource): Promise<'exists' | 'uploaded'> {
    if (await this.hasBlob(repository, source.digest)) return 'exists';
    const what = `blob ${this.host}/${repository}@${source.digest}`;
    const started = await this.#send({ method: 'POST', url: `/v2/${repository}/blobs/uploads/`, repository, access: 'push', headers: { 'content-length': '0' }, what });
    await drain(started);
    if (started.statusCode !== 202) throw await registryError(started, `starting upload of ${what}`);
    let location = this.#location(started, what);
    if (source.size <= this.#chunkSize) {
      const body = await source.read(0, source.size);
      const done = await this.#send({ method: 'PUT', url: withDigest(location, source.digest), repository, access: 'push', headers: { 'content-type': 'application/octet-stream' }, body, what });
      await drain(done);
      if (done.statusCode !== 201) throw await registryError(done, `uploading ${what}`);
      return 'uploaded';
    }
    for (let start = 0; start < source.size; start += this.#chunkSize) {
      const end = Math.min(start + this.#chunkSize, source.size);
      const body = await source.read(start, end);
      const res = await this.#send({
        method: 'PATCH',
        url: location,
        repository,
        access: 'push',
        headers: { 'content-type': 'application/octet-stream', 'content-range': `${start}-${end - 1}` },
        body,
        what,
      });
      await drain(res);
      if (res.statusCode !== 202) throw await registryError(res, `uploading bytes ${start}-${end - 1} of ${what}`);
      location = this.#location(res, what);
    }
    const done = await this.#send({ method: 'PUT', url: withDigest(location, source.digest), repository, access: 'push', headers: { 'content-length': '0' }, what });
    await drain(done);
    if (done.statusCode !== 201) throw await registryError(done, `finishing upload of ${what}`);
    return 'uploaded';
  }

  #location(res: Dispatcher.ResponseData, what: string): string {
    const location = header(res, 'location');
    if (!location) throw new OciError(OciCodes.REGISTRY, `${what}: the registry answered ${res.statusCode} without a Location header for the upload`);
    return new URL(location, this.#base).toString();
  }

  /** Sends a request, answering one 401 challenge (Basic or Bearer) and retrying once. */
  async #send(call: Call): Promise<Dispatcher.ResponseData> {
    const first = await this.#attempt(call);
    if (first.statusCode !== 401) return first;
    const challenge = parseChallenge(header(first, 'www-authenticate'));
    await drain(first);
    if (!challenge) throw new OciError(OciCodes.UNAUTHORIZED, `${call.what}: the registry answered 401 without a usable WWW-Authenticate challenge`);
    this.#challenge = challenge;
    if (challenge.scheme === 'bearer') await this.#fetchToken(challenge, scopeOf(call), call.what);
    else if (!this.#credentials) throw new OciError(OciCodes.UNAUTHORIZED, `${call.what}: the registry requires credentials (Basic realm ${JSON.stringify(challenge.params.realm ?? '')}); set GATEHOUSE_REGISTRY_USERNAME and GATEHOUSE_REGISTRY_PASSWORD or log in with a Docker config file`);
    const second = await this.#attempt(call);
    if (second.statusCode === 401) {
      await drain(second);
      throw new OciError(OciCodes.UNAUTHORIZED, `${call.what}: the registry rejected the ${this.#credentials ? `credentials of user ${JSON.stringify(this.#credentials.username)}` : 'anonymous token'}; check the username and password`);
    }
    return second;
  }

  async #attempt(call: Call): Promise<Dispatcher.ResponseData> {
    const headers: Record<string, string> = { 'user-agent': USER_AGENT, ...call.headers };
    const authorization = this.#authorization(scopeOf(call));
    if (authorization) headers.authorization = authorization;
    const url = new URL(call.url.startsWith('/') ? `${this.#base}${call.url}` : call.url);
    try {
      return await this.#dispatcher.request({
        origin: url.origin,
        path: url.pathname + url.search,
        method: call.method,
        headers,
        ...(call.body ? { body: call.body } : {}),
      });
    } catch (error) {
      throw this.#unreachable(error, call.what);
    }
  }

  #authorization(scope: string): string | undefined {
    if (!this.#challenge) return undefined;
    if (this.#challenge.scheme === 'basic') {
      return this.#credentials ? `Basic ${Buffer.from(`${this.#credentials.username}:${this.#credentials.password}`).toString('base64')}` : undefined;
    }
    const cached = this.#tokens.get(scope);
    return cached && cached.expires > Date.now() ? `Bearer ${cached.token}` : undefined;
  }

  /** Token endpoint of the distribution auth spec (token.md): GET realm?service&scope, Basic-authenticated when we have credentials. */
  async #fetchToken(challenge: Challenge, scope: string, what: string): Promise<void> {
    const realm = challenge.params.realm;
    if (!realm) throw new OciError(OciCodes.UNAUTHORIZED, `${what}: the Bearer challenge names no realm (token server)`);
    let url: URL;
    try {
      url = new URL(realm);
    } catch {
      throw new OciError(OciCodes.UNAUTHORIZED, `${what}: the Bearer realm ${JSON.stringify(realm)} is not a URL`);
    }
    if (url.protocol === 'http:' && !this.insecure) {
      throw new OciError(OciCodes.INSECURE, `${what}: the token server ${url.origin} is plain HTTP; pass --insecure to allow it`);
    }
    if (challenge.params.service) url.searchParams.set('service', challenge.params.service);
    const wanted = scope || challenge.params.scope;
    if (wanted) url.searchParams.append('scope', wanted);
    const headers: Record<string, string> = { 'user-agent': USER_AGENT, accept: 'application/json' };
    if (this.#credentials) headers.authorization = `Basic ${Buffer.from(`${this.#credentials.username}:${this.#credentials.password}`).toString('base64')}`;
    let res: Dispatcher.ResponseData;
    try {
      res = await this.#dispatcher.request({ origin: url.origin, path: url.pathname + url.search, method: 'GET', headers });
    } catch (error) {
      throw this.#unreachable(error, `token server ${url.origin}`);
    }
    if (res.statusCode === 401 || res.statusCode === 403) {
      await drain(res);
      throw new OciError(OciCodes.UNAUTHORIZED, `${what}: the token server ${url.origin} refused ${this.#credentials ? `the credentials of user ${JSON.stringify(this.#credentials.username)}` : 'an anonymous token'} for ${wanted || 'the registry'} (HTTP ${res.statusCode})`);
    }
    if (res.statusCode !== 200) throw await registryError(res, `token server ${url.origin}`);
    const body = JSON.parse((await readLimited(res, 1024 * 1024, `token from ${url.origin}`)).toString('utf8')) as { token?: unknown; access_token?: unknown; expires_in?: unknown };
    const token = typeof body.token === 'string' ? body.token : typeof body.access_token === 'string' ? body.access_token : undefined;
    if (!token) throw new OciError(OciCodes.UNAUTHORIZED, `${what}: the token server ${url.origin} answered without a token`);
    const lifetime = typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : 60;
    // Renew a little early so a token does not expire between check and use.
    this.#tokens.set(scope, { token, expires: Date.now() + Math.max(lifetime - 10, 5) * 1000 });
  }

  #unreachable(error: unknown, what: string): OciError {
    if (error instanceof OciError) return error;
    const err = error as NodeJS.ErrnoException;
    const tlsToPlain = !this.insecure && /EPROTO|wrong version number|packet length too long|ssl3_get_record|ERR_SSL/i.test(`${err.code ?? ''} ${err.message}`);
    const hint = tlsToPlain ? '; the registry seems to speak plain HTTP: pass --insecure to allow that' : '';
    return new OciError(OciCodes.UNREACHABLE, `${what}: cannot reach ${this.#base} (${err.code ?? err.message})${hint}`, { cause: error });
  }
}

function scopeOf(call: Call): string {
  if (!call.repository) return '';
  return `repository:${call.repository}:${call.access === 'push' ? 'pull,push' : 'pull'}`;
}

function withDigest(location: string, digest: Digest): string {
  const url = new URL(location);
  url.searchParams.set('digest', digest);
  return url.toString();
}

function header(res: Dispatcher.ResponseData, name: string): string | undefined {
  const value = res.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

async function drain(res: Dispatcher.ResponseData): Promise<void> {
  try {
    await res.body.dump({ limit: 64 * 1024 });
  } catch {
    // Nothing useful to do with a body that fails while being discarded.
  }
}

async function readLimited(res: Dispatcher.ResponseData, limit: number, what: string): Promise<Buffer> {
  const declared = Number(header(res, 'content-length'));
  if (Number.isFinite(declared) && declared > limit) {
    res.body.destroy();
    throw tooLarge(what, declared, limit);
  }
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > limit) {
      res.body.destroy();
      throw tooLarge(what, size, limit);
    }
    parts.push(chunk);
  }
  return Buffer.concat(parts);
}

/** Turns a non-success answer into an error carrying the registry's own error codes (spec.md, error codes). */
async function registryError(res: Dispatcher.ResponseData, what: string): Promise<OciError> {
  let detail = '';
  try {
    const text = (await readLimited(res, 64 * 1024, what)).toString('utf8');
    const parsed = JSON.parse(text) as { errors?: { code?: string; message?: string }[] };
    detail = (parsed.errors ?? []).map((e) => `${e.code ?? 'ERROR'}: ${e.message ?? ''}`.trim()).join('; ');
  } catch {
    detail = '';
  }
  const suffix = detail ? ` (${detail})` : '';
  if (res.statusCode === 404) return new OciError(OciCodes.NOT_FOUND, `${what}: not found (HTTP 404)${suffix}`);
  if (res.statusCode === 401 || res.statusCode === 403) return new OciError(OciCodes.UNAUTHORIZED, `${what}: access denied (HTTP ${res.statusCode})${suffix}`);
  return new OciError(OciCodes.REGISTRY, `${what}: the registry answered HTTP ${res.statusCode}${suffix}`);
}
