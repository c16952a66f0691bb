/**
 * Gloo's `opaAuth` (Rego from ConfigMaps, evaluated in the auth server: here compiled to Wasm by
 * `opa`, see ./opa-wasm.ts) and `opaServerAuth` (a decision from an OPA server's Data API). Both
 * deny with 403 (Gloo) and fail closed when the policy cannot be evaluated.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIPv6 } from 'node:net';
import { Agent, request as httpRequest } from 'undici';
import { allow, forbidden } from '../decision.ts';
import type { AuthDecision, AuthStep, CheckRequest, StepContext } from '../step.ts';
import { isAllowedValue, opaInput } from './opa-input.ts';
import { evaluateOpaWasm, type OpaWasmPolicy } from './opa-wasm.ts';

/** An `opaAuth` step over a compiled policy. */
export class OpaAuthStep implements AuthStep {
  readonly type = 'opaAuth';
  readonly name: string;
  private readonly policy: OpaWasmPolicy;
  private readonly fast: boolean;

  constructor(policy: OpaWasmPolicy, options: { name: string; fastInputConversion: boolean }) {
    this.policy = policy;
    this.name = options.name;
    this.fast = options.fastInputConversion;
  }

  async authorize(request: CheckRequest, context?: StepContext): Promise<AuthDecision> {
    const { allowed } = evaluateOpaWasm(this.policy, opaInput(request, context?.state ?? {}, this.fast));
    return allowed ? allow() : forbidden();
  }
}

/** Default deadline of one OPA server call. */
export const DEFAULT_OPA_SERVER_TIMEOUT_MS = 1000;
/** Largest OPA server answer read. */
const MAX_RESPONSE_BYTES = 1024 * 1024;

/** The URL `opaServerAuth` POSTs to: `<server>/v1/data/<package path>[/<rule>]`. */
export function opaDataUrl(serverAddr: string | undefined, pkg: string, ruleName: string | undefined): string | undefined {
  const base = serverAddr ? (/^https?:\/\//i.test(serverAddr) ? serverAddr : `http://${serverAddr}`) : 'http://localhost:8181';
  const url = URL.parse(base);
  if (!url || url.username || url.password || url.search || url.hash) return undefined;
  const segments = [...pkg.split('.'), ...(ruleName ? ruleName.split('/') : [])];
  if (segments.some((s) => !/^[A-Za-z_][A-Za-z0-9_-]*$/.test(s))) return undefined;
  return `${url.origin}${url.pathname.replace(/\/$/, '')}/v1/data/${segments.join('/')}`;
}

/** An `opaServerAuth` step. */
export class OpaServerAuthStep implements AuthStep {
  readonly type = 'opaServerAuth';
  readonly name: string;
  private readonly url: string;
  private readonly fast: boolean;
  private readonly timeoutMs: number;

  private readonly agent: Agent;

  constructor(url: string, options: { name: string; fastInputConversion: boolean; timeoutMs?: number; resolveHost?: (host: string) => string | undefined }) {
    this.url = url;
    this.name = options.name;
    this.fast = options.fastInputConversion;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_OPA_SERVER_TIMEOUT_MS;
    // Bounded: a slow OPA server holds at most this many sockets of this step.
    this.agent = new Agent({ connections: 32, connect: { timeout: this.timeoutMs, ...(options.resolveHost ? { lookup: resolvingLookup(options.resolveHost) } : {}) } });
  }

  async close(): Promise<void> {
    await this.agent.close();
  }

  async authorize(request: CheckRequest, context?: StepContext): Promise<AuthDecision> {
    const input = opaInput(request, context?.state ?? {}, this.fast);
    const response = await httpRequest(this.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input }),
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
      signal: AbortSignal.timeout(this.timeoutMs),
      dispatcher: this.agent,
    });
    const text = await readLimited(response.body, MAX_RESPONSE_BYTES);
    if (response.statusCode !== 200) throw new Error(`OPA server ${this.url} answered ${response.statusCode}`);
    const parsed = JSON.parse(text) as { result?: unknown };
    // An undefined decision (no `result`) is a deny, as OPA's Envoy plugin and Gloo treat it.
    return isAllowedValue(parsed.result) ? allow() : forbidden();
  }
}

async function readLimited(body: AsyncIterable<Buffer>, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) throw new Error(`OPA server answer is larger than ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A `net.connect` lookup that answers `--resolve` hosts itself and asks DNS for the others. */
function resolvingLookup(resolveHost: (host: string) => string | undefined) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    const address = resolveHost(hostname.toLowerCase());
    if (address === undefined) return void dnsLookup(hostname, options as never, callback as never);
    const family = isIPv6(address) ? 6 : 4;
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };
}
