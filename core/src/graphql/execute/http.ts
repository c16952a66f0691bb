import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * GraphQL over HTTP framing (SPEC 3.3; graphql-over-http draft): request parameters from
 * GET query strings or JSON POST bodies, media-type negotiation and JSON responses.
 */

export type MediaType = 'application/json' | 'application/graphql-response+json';

/** The parameters of one GraphQL request. */
export interface RequestParams {
  readonly query: string;
  readonly operationName?: string | undefined;
  readonly variables?: Record<string, unknown> | undefined;
  readonly extensions?: Record<string, unknown> | undefined;
  /** The POST body as received (forwarded unchanged by the remote executor). */
  readonly rawBody?: Buffer | undefined;
}

/** A request that is not a usable GraphQL request: answered with `status` and a GraphQL error. */
export class RequestFailure {
  readonly status: number;
  readonly message: string;
  readonly headers: Readonly<Record<string, string>>;
  constructor(status: number, message: string, headers: Record<string, string> = {}) {
    this.status = status;
    this.message = message;
    this.headers = headers;
  }
}

/**
 * A batch (Apollo `BatchHttpLink`, graphql-request `batchRequests`): a POST body that is a JSON
 * array of requests, answered with an array of results in the same order. An entry that is not a
 * usable request is a {@link RequestFailure} in its place (the others still run).
 */
export interface BatchRequest {
  readonly batch: readonly (RequestParams | RequestFailure)[];
}

/** Largest accepted POST body. */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * The response media type for an `Accept` header: `application/graphql-response+json` when the
 * client asks for it, `application/json` for `application/json`, `application/*`, `*\/*` or no
 * header; null when neither is acceptable (406). Entries with `q=0` are refused.
 */
export function negotiate(accept: string | undefined): MediaType | null {
  if (!accept) return 'application/json';
  // Clients send the same few Accept values: each is read once.
  const known = negotiated.get(accept);
  if (known !== undefined) return known;
  const media = negotiateUncached(accept);
  if (negotiated.size >= MAX_NEGOTIATED) negotiated.clear();
  negotiated.set(accept, media);
  return media;
}

/** Accept header values already negotiated (at most {@link MAX_NEGOTIATED}; then it starts over). */
const negotiated = new Map<string, MediaType | null>();
const MAX_NEGOTIATED = 256;

function negotiateUncached(accept: string): MediaType | null {
  let best: MediaType | null = null;
  let bestQ = 0;
  for (const entry of accept.split(',')) {
    const [rawType, ...params] = entry.split(';');
    const type = rawType!.trim().toLowerCase();
    let q = 1;
    let charsetOk = true;
    for (const p of params) {
      const [k, v] = p.split('=').map((s) => s.trim().toLowerCase());
      if (k === 'q') q = Number(v);
      else if (k === 'charset') charsetOk = v === 'utf-8' || v === 'utf8';
    }
    if (!charsetOk || !(q > 0)) continue;
    const media: MediaType | null =
      type === 'application/graphql-response+json' ? 'application/graphql-response+json' : type === 'application/json' || type === 'application/*' || type === '*/*' ? 'application/json' : null;
    if (!media) continue;
    // The specific media type wins over wildcards at equal weight.
    if (q > bestQ || (q === bestQ && media === 'application/graphql-response+json' && type !== '*/*' && type !== 'application/*')) {
      best = media;
      bestQ = q;
    }
  }
  return best;
}

/** True for a browser navigation (`Accept: text/html, ...`). */
export function acceptsHtml(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes('text/html');
}

/** Reads the request's GraphQL parameters (a batch for a JSON array body), or the failure to answer with. */
export function readParams(req: IncomingMessage): Promise<RequestParams | BatchRequest | RequestFailure> | RequestParams | RequestFailure {
  if (req.method === 'GET') {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const search = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
    let variables: unknown;
    let extensions: unknown;
    try {
      const v = search.get('variables');
      if (v) variables = JSON.parse(v);
      const e = search.get('extensions');
      if (e) extensions = JSON.parse(e);
    } catch {
      return new RequestFailure(400, 'the "variables" or "extensions" query parameter is not valid JSON');
    }
    return checkParams({ query: search.get('query') ?? undefined, operationName: search.get('operationName') ?? undefined, variables, extensions });
  }
  if (req.method !== 'POST') return new RequestFailure(405, `${req.method} is not supported; use GET or POST`, { allow: 'GET, POST' });
  const contentType = req.headers['content-type'];
  if (contentType !== 'application/json' && !jsonUtf8(contentType)) {
    return drain(req).then(() => new RequestFailure(415, 'a POST body must be application/json (utf-8)'));
  }
  // Parsed where the body ends: no async frame and no extra turn per request.
  return readBody(req, paramsOf);
}

/** The parameters of a POST body (a batch for a JSON array), or the failure to answer with. */
function paramsOf(body: Buffer): RequestParams | BatchRequest | RequestFailure {
  const text = body.toString('utf8');
  const known = text.length <= MAX_KNOWN_BODY_LENGTH ? knownBodies.get(text) : undefined;
  if (known) return known;
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return new RequestFailure(400, 'the request body is not valid JSON');
  }
  if (Array.isArray(data)) {
    // Each entry is re-serialized when forwarded: there is no raw body of one entry.
    return { batch: data.map((entry: unknown) => (isObject(entry) ? checkParams(entry) : new RequestFailure(400, 'each entry of a batch must be a JSON object'))) };
  }
  if (!isObject(data)) return new RequestFailure(400, 'the request body must be a JSON object or an array of them (a batch)');
  const { query, operationName, variables, extensions } = data;
  const params = checkParams({ query, operationName, variables, extensions, rawBody: body });
  if (!(params instanceof RequestFailure) && text.length <= MAX_KNOWN_BODY_LENGTH && isEmpty(params.variables) && isEmpty(params.extensions)) {
    if (knownBodies.size >= MAX_KNOWN_BODIES) knownBodies.clear();
    // A copy: the body may be a slice of a larger socket buffer. Shared by every request that sends these bytes, so frozen.
    knownBodies.set(text, Object.freeze({ ...params, variables: freezeEmpty(params.variables), extensions: freezeEmpty(params.extensions), rawBody: Buffer.from(body) }));
  }
  return params;
}

/**
 * Bodies read before, with their parameters: clients send the same few operations, so a body
 * seen before is not parsed again (and its query is the same string, whose hash the document
 * cache has already computed). Only bodies without variables or extensions (or empty ones) are
 * kept, at most {@link MAX_KNOWN_BODIES} (then it starts over), each at most
 * {@link MAX_KNOWN_BODY_LENGTH} characters.
 */
const knownBodies = new Map<string, RequestParams>();
const MAX_KNOWN_BODIES = 256;
const MAX_KNOWN_BODY_LENGTH = 4096;

function isEmpty(value: Record<string, unknown> | undefined): boolean {
  if (value === undefined) return true;
  for (const _ in value) return false;
  return true;
}

function freezeEmpty(value: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  return value === undefined ? undefined : Object.freeze({});
}

/** A `content-type` of JSON in UTF-8 (the charset may be left out). */
function jsonUtf8(value: string | undefined): boolean {
  const [mediaType, ...params] = (value ?? '').toLowerCase().split(';').map((s) => s.trim());
  const charset = params.find((p) => p.startsWith('charset='))?.slice(8);
  return mediaType === 'application/json' && (charset === undefined || charset === 'utf-8' || charset === 'utf8');
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function checkParams(p: { query?: unknown; operationName?: unknown; variables?: unknown; extensions?: unknown; rawBody?: Buffer | undefined }): RequestParams | RequestFailure {
  // Apollo's automatic persisted queries send only a hash: the endpoint's gate looks the query up.
  const persisted = p.extensions !== null && typeof p.extensions === 'object' && (p.extensions as Record<string, unknown>).persistedQuery !== undefined;
  if ((p.query === undefined || p.query === null) && persisted) p = { ...p, query: '' };
  if (p.query === undefined || p.query === null) return new RequestFailure(400, 'missing "query"');
  if (typeof p.query !== 'string') return new RequestFailure(400, '"query" must be a string');
  if (p.operationName !== undefined && p.operationName !== null && typeof p.operationName !== 'string') return new RequestFailure(400, '"operationName" must be a string');
  if (p.variables !== undefined && p.variables !== null && (typeof p.variables !== 'object' || Array.isArray(p.variables))) return new RequestFailure(400, '"variables" must be an object');
  if (p.extensions !== undefined && p.extensions !== null && (typeof p.extensions !== 'object' || Array.isArray(p.extensions))) return new RequestFailure(400, '"extensions" must be an object');
  return {
    query: p.query,
    operationName: (p.operationName as string | null) ?? undefined,
    variables: (p.variables as Record<string, unknown> | null) ?? undefined,
    extensions: (p.extensions as Record<string, unknown> | null) ?? undefined,
    rawBody: p.rawBody,
  };
}

/** Reads the body and resolves with `read(body)`, or the failure to answer with. */
function readBody<T>(req: IncomingMessage, read: (body: Buffer) => T): Promise<T | RequestFailure> {
  // Already read to its end (an empty body buffered for auth, SPEC 5.3): no `end` is coming.
  if (req.readableEnded) return Promise.resolve(Buffer.alloc(0)).then(read);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        failed = true;
        resolve(new RequestFailure(413, `the request body is larger than ${MAX_BODY_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (failed) return;
      // Never a throw out of an event listener (it would take the process down).
      try {
        resolve(read(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
      } catch (error) {
        reject(error);
      }
    });
    req.on('error', () => {
      if (!failed) {
        failed = true;
        resolve(new RequestFailure(400, 'the request body could not be read'));
      }
    });
  });
}

function drain(req: IncomingMessage): Promise<void> {
  if (req.readableEnded) return Promise.resolve();
  return new Promise((resolve) => {
    req.resume();
    req.on('end', resolve);
    req.on('error', () => resolve());
  });
}

/** Sends a JSON body with `content-type: <media>; charset=utf-8`. */
export function sendJson(res: ServerResponse, status: number, media: MediaType | 'text/html', body: string | Buffer, headers?: Readonly<Record<string, string>>): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(status, {
    ...headers,
    'content-type': `${media}; charset=utf-8`,
    'content-length': typeof body === 'string' ? Buffer.byteLength(body) : body.length,
  });
  res.end(body);
}

/** One operation's answer before it is written: alone, or as one entry of a batch's array. */
export interface Answer {
  readonly status: number;
  /** A JSON value (a GraphQL response). */
  readonly body: string | Buffer;
  /** The content type when it is not the negotiated media type (the remote upstream's own). */
  readonly contentType?: string | undefined;
  readonly headers?: Readonly<Record<string, string | readonly string[]>> | undefined;
  /** Whether the body holds GraphQL errors, when the code that built it already knows (a remote answer). */
  readonly errors?: boolean | undefined;
}

/**
 * What the plain (non-streaming) request path needs to know of a client that leaves: an
 * AbortSignal has it; {@link ClientWatch} is its cheaper stand-in (no AbortController, no
 * EventTarget per request).
 */
export interface ClientSignal {
  readonly aborted: boolean;
  /** `listener` runs once when the client leaves (never when it already has: check {@link aborted}). */
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
}

/** Aborts when the client closes the connection before its response is complete. */
export class ClientWatch implements ClientSignal {
  aborted = false;
  private listeners: (() => void)[] | undefined;

  constructor(res: ServerResponse) {
    // `on`, not `once` (a bound wrapper per request): a response closes once.
    if (res.destroyed) this.aborted = true;
    else
      res.on('close', () => {
        if (!res.writableFinished) this.abort();
      });
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    // As an AbortSignal: a listener added after the abort never runs.
    if (!this.aborted) (this.listeners ??= []).push(listener);
  }

  private abort(): void {
    this.aborted = true;
    const listeners = this.listeners;
    this.listeners = undefined;
    if (listeners) for (const listener of listeners) listener();
  }
}

/** A {@link ClientSignal} that never aborts (local execution does not watch the client). */
export const NEVER_GONE: ClientSignal = Object.freeze({ aborted: false, addEventListener() {} });

/** An answer of `{errors: [...]}`. */
export function errorAnswer(status: number, errors: readonly { message: string }[], headers?: Readonly<Record<string, string>>): Answer {
  return { status, body: JSON.stringify({ errors }), headers };
}

/**
 * Buffer bodies up to this size are written as latin1 strings (the same bytes): Node sends a
 * string body in one write with the head, where a Buffer goes through the socket's corked
 * writev path (measured: ~1 µs less CPU per response).
 */
const SMALL_BODY_BYTES = 64 * 1024;

/** Writes one answer (`content-type` the answer's own or `<media>; charset=utf-8`). */
export function sendAnswer(res: ServerResponse, media: MediaType, answer: Answer): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const body = answer.body;
  res.writeHead(answer.status, {
    ...answer.headers,
    'content-type': answer.contentType ?? `${media}; charset=utf-8`,
    'content-length': typeof body === 'string' ? Buffer.byteLength(body) : body.length,
  });
  if (typeof body !== 'string' && body.length <= SMALL_BODY_BYTES) res.end(body.toString('latin1'), 'latin1');
  else res.end(body);
}

/** Sends `{errors: [...]}`. */
export function sendErrors(res: ServerResponse, status: number, media: MediaType, errors: readonly { message: string }[], headers?: Readonly<Record<string, string>>): void {
  sendJson(res, status, media, JSON.stringify({ errors }), headers);
}
