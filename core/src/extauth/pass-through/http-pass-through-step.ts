import { Agent, request as undiciRequest } from 'undici';
import type { PassThroughAuthSpec } from '../../config/schema/auth-config.ts';
import { durationMs } from '../../config/schema/common.ts';
import type { Logger } from '../../log/logger.ts';
import { allow, deny, forbidden } from '../decision.ts';
import type { AuthDecision, AuthStep, CheckRequest, HeaderToSet, StepContext } from '../step.ts';
import type { PassThroughStepOptions } from './pass-through-step.ts';

/** The auth server's answer is read up to this size: it carries headers and maybe a State, not content. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * `passThroughAuth.http` (Gloo's PassThroughHttp): POSTs each check to the user's HTTP auth
 * server. The request carries the client's `allowedHeaders` and the step's `headersToAdd`, and
 * a JSON body `{body, state, filterMetadata, config}` with the parts the options ask for (no
 * body when none is asked for). 200 allows, copying `allowedUpstreamHeaders` from the answer to
 * the upstream request (appended, as Gloo documents) and, with `readStateFromResponse`, taking
 * `{"state": {...}}` from its body as the chain's State; its `allowedClientHeadersOnSuccess` go on
 * the client's response, as gRPC passThrough's `response_headers_to_add` do. A 4xx denies with that status and the
 * answer's `allowedClientHeadersOnDenied`; anything else (5xx, unreachable, a timeout, an
 * unreadable State) is a failure: 403, or an allow with `failureModeAllow`.
 */
export class HttpPassThroughStep implements AuthStep {
  readonly type = 'passThroughAuth';
  readonly name: string;
  private readonly url: string;
  private readonly spec: NonNullable<PassThroughAuthSpec['http']>;
  private readonly config: Record<string, unknown> | undefined;
  private readonly failureModeAllow: boolean;
  private readonly timeoutMs: number;
  private readonly logger: Logger;
  private readonly agent: Agent;
  private readonly allowedHeaders: readonly string[];
  private readonly upstreamHeaders: ReadonlySet<string>;
  private readonly clientHeaders: ReadonlySet<string>;
  private readonly successClientHeaders: ReadonlySet<string>;
  /** `allowedUpstreamHeaders` belong to the auth server: the chain drops the client's own copies (they would be appended to). */
  readonly ownedHeaders: readonly string[];

  constructor(spec: PassThroughAuthSpec, options: PassThroughStepOptions) {
    const http = spec.http!;
    const url = URL.parse(http.url);
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw new Error(`url "${http.url}" is not an absolute http(s) URL`);
    this.name = options.name;
    this.logger = options.logger;
    this.url = url.href;
    this.spec = http;
    this.config = spec.config;
    this.failureModeAllow = spec.failureModeAllow === true;
    this.timeoutMs = http.connectionTimeout ? durationMs(http.connectionTimeout) : (options.timeoutMs ?? 1_000);
    this.agent = new Agent({ connections: 64, headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs, connect: { timeout: this.timeoutMs } });
    this.allowedHeaders = (http.request?.allowedHeaders ?? []).map((name) => name.toLowerCase());
    this.upstreamHeaders = new Set((http.response?.allowedUpstreamHeaders ?? []).map((name) => name.toLowerCase()));
    this.clientHeaders = new Set((http.response?.allowedClientHeadersOnDenied ?? []).map((name) => name.toLowerCase()));
    this.successClientHeaders = new Set((http.response?.allowedClientHeadersOnSuccess ?? []).map((name) => name.toLowerCase()));
    this.ownedHeaders = [...this.upstreamHeaders];
  }

  async authorize(request: CheckRequest, context?: StepContext): Promise<AuthDecision> {
    const http = request.attributes.request.http;
    const headers: Record<string, string> = {};
    for (const name of this.allowedHeaders) {
      const value = http.headers[name];
      if (value !== undefined) headers[name] = value;
    }
    for (const [name, value] of Object.entries(this.spec.request?.headersToAdd ?? {})) headers[name.toLowerCase()] = value;
    const body = this.bodyOf(request, context);
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      const answer = await undiciRequest(this.url, { method: 'POST', headers, body: body ?? '', dispatcher: this.agent, signal: AbortSignal.timeout(this.timeoutMs) });
      const text = await readLimited(answer.body);
      if (answer.statusCode === 200) return this.allowed(answer.headers, text);
      if (answer.statusCode >= 400 && answer.statusCode < 500) return deny(answer.statusCode, this.picked(answer.headers, this.clientHeaders, false), '');
      return this.failed(request, `the auth server answered ${answer.statusCode}`);
    } catch (error) {
      return this.failed(request, (error as Error).message);
    }
  }

  /** Gloo's body: only the parts asked for; none at all (an empty body) when nothing is asked for. */
  private bodyOf(request: CheckRequest, context: StepContext | undefined): string | undefined {
    const options = this.spec.request ?? {};
    const http = request.attributes.request.http;
    const out: Record<string, unknown> = {};
    if (options.passThroughBody) {
      const raw = http.raw_body;
      out.body = http.body ?? (raw === undefined ? '' : typeof raw === 'string' ? Buffer.from(raw, 'base64').toString('utf8') : Buffer.from(raw).toString('utf8'));
    }
    if (options.passThroughState) out.state = context?.state ?? {};
    if (options.passThroughFilterMetadata) out.filterMetadata = (request.attributes as { metadata_context?: { filter_metadata?: unknown } }).metadata_context?.filter_metadata ?? {};
    if (this.config) out.config = this.config;
    return Object.keys(out).length > 0 ? JSON.stringify(out) : undefined;
  }

  private allowed(headers: Record<string, string | string[] | undefined>, text: string): AuthDecision {
    const picked = allow(this.picked(headers, this.upstreamHeaders, true));
    const response = this.clientResponseHeaders(headers);
    // The chain validates these as it does gRPC passThrough's and plugins' (sanitize-decision.ts).
    const decision = response.length > 0 ? { ...picked, responseHeaders: response } : picked;
    if (!this.spec.response?.readStateFromResponse) return decision;
    let state: unknown;
    try {
      state = (JSON.parse(text) as { state?: unknown }).state;
    } catch {
      state = undefined;
    }
    if (typeof state !== 'object' || state === null || Array.isArray(state)) {
      this.logger.error({ step: this.name, url: this.url }, 'passThroughAuth denied the request: readStateFromResponse is set but the answer has no {"state": {...}} JSON body');
      return forbidden();
    }
    return { ...decision, state: state as Record<string, unknown> };
  }

  private picked(headers: Record<string, string | string[] | undefined>, names: ReadonlySet<string>, append: boolean): HeaderToSet[] {
    const out: HeaderToSet[] = [];
    for (const name of names) {
      const value = headers[name];
      if (value === undefined) continue;
      out.push({ key: name, value: Array.isArray(value) ? value.join(',') : value, append });
    }
    return out;
  }

  /**
   * The 200 answer's `allowedClientHeadersOnSuccess`, for the client's response. Every value of a
   * repeated header is kept as its own header (several `set-cookie` must never be comma-joined):
   * the first replaces the upstream's, the rest are appended.
   */
  private clientResponseHeaders(headers: Record<string, string | string[] | undefined>): HeaderToSet[] {
    const out: HeaderToSet[] = [];
    for (const name of this.successClientHeaders) {
      const value = headers[name];
      if (value === undefined) continue;
      const values = Array.isArray(value) ? value : [value];
      values.forEach((one, index) => out.push({ key: name, value: one, append: index > 0 }));
    }
    return out;
  }

  private failed(request: CheckRequest, cause: string): AuthDecision {
    const config_id = request.attributes.context_extensions.config_id;
    if (this.failureModeAllow) {
      this.logger.warn({ step: this.name, url: this.url, config_id }, `passThroughAuth allowed the request (failureModeAllow): ${cause}`);
      return allow();
    }
    this.logger.error({ step: this.name, url: this.url, config_id }, `passThroughAuth denied the request: ${cause}`);
    return forbidden();
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

/** The body as text, at most {@link MAX_ANSWER_BYTES}; a longer one is cut off (and its rest discarded). */
async function readLimited(body: AsyncIterable<Buffer> & { destroy?: () => void }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > MAX_ANSWER_BYTES) {
      body.destroy?.();
      break;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
