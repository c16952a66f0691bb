import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CorsPolicySpec } from '../../config/schema/virtual-service.ts';
import { durationMs } from '../../config/schema/common.ts';
import { fullMatcher } from '../routing/re2.ts';

/** A CORS policy compiled at load time (Envoy's cors filter semantics). */
export interface CompiledCors {
  allows(origin: string): boolean;
  /**
   * Headers for an allowed actual (non-preflight) response, as a flat `[name, value, …]`
   * list: they go into the one `writeHead` call of the response (a `setHeader` first would
   * push every other header of it through Node's slower path). Appended to `into` when given
   * (no list made per request), which is returned.
   */
  responseHeaders(origin: string, into?: string[]): string[];
  /** Names in `responseHeaders` that replace an upstream's own (Envoy's cors filter does too); `vary` is added to. */
  readonly replaces: ReadonlySet<string>;
  /** Headers for a preflight answer. */
  preflightHeaders(origin: string): Record<string, string>;
}

export function compileCors(spec: CorsPolicySpec | undefined): CompiledCors | undefined {
  if (!spec) return undefined;
  const exact = new Set(spec.allowOrigin ?? []);
  // Envoy's allow_origin_string_match: RE2, full match.
  const patterns = (spec.allowOriginRegex ?? []).map((r) => fullMatcher(r));
  const allows = (origin: string) => exact.has('*') || exact.has(origin) || patterns.some((full) => full(origin));
  const common = (origin: string): Record<string, string> => ({
    'access-control-allow-origin': origin,
    vary: 'origin',
    ...(spec.allowCredentials ? { 'access-control-allow-credentials': 'true' } : {}),
  });
  const tail = Object.entries({ ...common(''), ...(spec.exposeHeaders?.length ? { 'access-control-expose-headers': spec.exposeHeaders.join(',') } : {}) })
    .filter(([name]) => name !== 'access-control-allow-origin')
    .flat();
  return {
    allows,
    responseHeaders: (origin, into = []) => {
      into.push('access-control-allow-origin', origin);
      for (let i = 0; i < tail.length; i++) into.push(tail[i]!);
      return into;
    },
    replaces: new Set(['access-control-allow-origin', 'access-control-allow-credentials', 'access-control-expose-headers']),
    preflightHeaders: (origin) => ({
      ...common(origin),
      ...(spec.allowMethods?.length ? { 'access-control-allow-methods': spec.allowMethods.join(',') } : {}),
      ...(spec.allowHeaders?.length ? { 'access-control-allow-headers': spec.allowHeaders.join(',') } : {}),
      ...(spec.maxAge ? { 'access-control-max-age': maxAgeSeconds(spec.maxAge) } : {}),
    }),
  };
}

/** True for a CORS preflight: OPTIONS with Origin and Access-Control-Request-Method. */
export function isPreflight(req: IncomingMessage): boolean {
  return req.method === 'OPTIONS' && typeof req.headers.origin === 'string' && req.headers['access-control-request-method'] !== undefined;
}

/** Answers a preflight directly; a disallowed origin gets no CORS headers, so the browser blocks it. */
export function answerPreflight(cors: CompiledCors, req: IncomingMessage, res: ServerResponse): void {
  const origin = req.headers.origin as string;
  res.writeHead(200, { ...(cors.allows(origin) ? cors.preflightHeaders(origin) : {}), 'content-length': '0' });
  res.end();
}

/** `maxAge` in seconds: Envoy's string of seconds as is, or a duration (`1d` as Gloo's CORS guide writes it). */
function maxAgeSeconds(maxAge: string): string {
  if (/^[0-9]+$/.test(maxAge)) return maxAge;
  const days = /^([0-9]+(?:\.[0-9]+)?)d$/.exec(maxAge);
  return String(Math.floor(days ? Number(days[1]) * 86_400 : durationMs(maxAge) / 1000));
}
