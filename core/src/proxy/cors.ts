import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CorsPolicySpec } from '../config/schema/virtual-service.ts';
import { durationMs } from '../config/schema/common.ts';

/** A CORS policy compiled at load time (Envoy's cors filter semantics). */
export interface CompiledCors {
  allows(origin: string): boolean;
  /** Headers for an allowed actual (non-preflight) response. */
  responseHeaders(origin: string): Record<string, string>;
  /** Headers for a preflight answer. */
  preflightHeaders(origin: string): Record<string, string>;
}

export function compileCors(spec: CorsPolicySpec | undefined): CompiledCors | undefined {
  if (!spec) return undefined;
  const exact = new Set(spec.allowOrigin ?? []);
  const patterns = (spec.allowOriginRegex ?? []).map((r) => new RegExp(`^(?:${r})$`, 'u'));
  const allows = (origin: string) => exact.has('*') || exact.has(origin) || patterns.some((re) => re.test(origin));
  const common = (origin: string): Record<string, string> => ({
    'access-control-allow-origin': origin,
    vary: 'origin',
    ...(spec.allowCredentials ? { 'access-control-allow-credentials': 'true' } : {}),
  });
  return {
    allows,
    responseHeaders: (origin) => ({ ...common(origin), ...(spec.exposeHeaders?.length ? { 'access-control-expose-headers': spec.exposeHeaders.join(',') } : {}) }),
    preflightHeaders: (origin) => ({
      ...common(origin),
      ...(spec.allowMethods?.length ? { 'access-control-allow-methods': spec.allowMethods.join(',') } : {}),
      ...(spec.allowHeaders?.length ? { 'access-control-allow-headers': spec.allowHeaders.join(',') } : {}),
      ...(spec.maxAge ? { 'access-control-max-age': String(Math.floor(durationMs(spec.maxAge) / 1000)) } : {}),
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
