import type { IncomingHttpHeaders } from 'node:http';
import { re2Problem, regexSubstitution, substitutionProblem } from '../routing/re2.ts';

/**
 * Gloo's RouteOptions `host_rewrite_type` oneof and `appendXForwardedHost` (Envoy's
 * host_rewrite_specifier and append_x_forwarded_host, issue 31 item 4): the Host sent upstream is a
 * literal (`hostRewrite`), the chosen host's address (`autoHostRewrite`), a request header's value
 * (`hostRewriteHeader`), or a regex substitution on the path (`hostRewritePathRegex`); with
 * `appendXForwardedHost`, a rewrite appends the original Host to `x-forwarded-host`.
 *
 * RouteOptions takes the fields (`HostRewriteFields` in config/schema/virtual-service.ts), route-table.ts
 * compiles them and forward.ts calls {@link upstreamAuthority} where it builds the upstream headers.
 */
/** The options a Host rewrite reads. */
export interface HostRewriteSpec {
  readonly hostRewrite?: string | undefined;
  readonly autoHostRewrite?: boolean | undefined;
  readonly hostRewriteHeader?: string | undefined;
  readonly hostRewritePathRegex?: { readonly pattern: { readonly regex: string; readonly googleRe2?: { readonly maxProgramSize?: number | undefined } | undefined }; readonly substitution: string } | undefined;
  readonly appendXForwardedHost?: boolean | undefined;
}

/**
 * Load-time problems (field name relative to the options object, message): Gloo's oneof, RE2
 * syntax, substitution groups. `warning`: accepted, not applied (hostRewrite with autoHostRewrite
 * was accepted before the oneof was checked, hostRewrite winning; it stays so, with a warning).
 */
export function hostRewriteProblems(spec: HostRewriteSpec): { field: string[]; message: string; warning?: true }[] {
  const out: { field: string[]; message: string; warning?: true }[] = [];
  const set = (['hostRewrite', 'autoHostRewrite', 'hostRewriteHeader', 'hostRewritePathRegex'] as const).filter((k) => spec[k] !== undefined && spec[k] !== false);
  if (set.length === 2 && set[0] === 'hostRewrite' && set[1] === 'autoHostRewrite') out.push({ field: ['autoHostRewrite'], message: 'autoHostRewrite is not applied: hostRewrite is set too and wins (Gloo\'s host_rewrite_type takes one of them)', warning: true });
  else if (set.length > 1) out.push({ field: [set[1]!], message: `set one of hostRewrite, autoHostRewrite, hostRewriteHeader, hostRewritePathRegex (Gloo's host_rewrite_type), not ${set.join(' and ')}` });
  const regex = spec.hostRewritePathRegex;
  if (regex) {
    const problem = re2Problem(regex.pattern.regex, { maxProgramSize: regex.pattern.googleRe2?.maxProgramSize });
    if (problem) out.push({ field: ['hostRewritePathRegex', 'pattern', 'regex'], message: problem });
    else {
      const substitution = substitutionProblem(regex.pattern.regex, regex.substitution);
      if (substitution) out.push({ field: ['hostRewritePathRegex', 'substitution'], message: substitution });
    }
  }
  return out;
}

/** A route's Host rewrite, compiled once: what {@link upstreamAuthority} runs per request. */
export interface CompiledHostRewrite {
  readonly literal?: string;
  readonly auto: boolean;
  readonly header?: string;
  readonly pathRegex?: { readonly pattern: ReturnType<typeof regexSubstitution>; readonly substitution: string };
  readonly appendXForwardedHost: boolean;
}

/** Compiles the options (already checked by {@link hostRewriteProblems}); undefined when the Host is never rewritten. */
export function compileHostRewrite(spec: HostRewriteSpec): CompiledHostRewrite | undefined {
  const regex = spec.hostRewritePathRegex;
  if (spec.hostRewrite === undefined && spec.autoHostRewrite !== true && spec.hostRewriteHeader === undefined && !regex) return undefined;
  return {
    ...(spec.hostRewrite !== undefined ? { literal: spec.hostRewrite } : {}),
    auto: spec.autoHostRewrite === true,
    ...(spec.hostRewriteHeader !== undefined ? { header: spec.hostRewriteHeader.toLowerCase() } : {}),
    ...(regex ? { pathRegex: { pattern: regexSubstitution(regex.pattern.regex, regex.substitution), substitution: regex.substitution } } : {}),
    appendXForwardedHost: spec.appendXForwardedHost === true,
  };
}

/**
 * A Host value taken from the request (a header, the path): the characters an HTTP/2 `:authority`
 * may hold (nghttp2's check, which Envoy's authorityIsValid uses), nothing else. A value outside
 * it (a path's `/`, spaces, controls) is not sent upstream: the original Host is kept.
 */
const VALID_AUTHORITY = /^[A-Za-z0-9\-._~!$&'()*+,;=:%@[\]]+$/;

/** Whether `value` may be sent as a Host (see {@link VALID_AUTHORITY}). */
export function isValidAuthority(value: string): boolean {
  return VALID_AUTHORITY.test(value);
}

/**
 * The Host sent upstream and, with `appendXForwardedHost`, the `x-forwarded-host` value (Envoy:
 * the original Host appended unless it is already the last value). `path` is the request path
 * without its query; `hostAddr` the chosen upstream host's address (for `autoHostRewrite`).
 */
export function upstreamAuthority(rewrite: CompiledHostRewrite | undefined, headers: IncomingHttpHeaders, path: string, hostAddr: string): { authority: string | undefined; forwardedHost?: string; invalid?: true } {
  const original = headers.host;
  if (!rewrite) return { authority: original };
  let authority: string | undefined;
  if (rewrite.literal !== undefined) authority = rewrite.literal;
  else if (rewrite.auto) authority = hostAddr;
  else if (rewrite.header !== undefined) {
    const value = headers[rewrite.header];
    const first = Array.isArray(value) ? value[0] : value;
    // Envoy: an absent or empty header leaves the Host intact; so does a value that is no host.
    if (first) {
      if (!isValidAuthority(first)) return { authority: original, invalid: true };
      authority = first;
    }
  } else if (rewrite.pathRegex) {
    const replaced = path.replace(rewrite.pathRegex.pattern as unknown as RegExp, rewrite.pathRegex.substitution);
    if (replaced !== '') {
      if (!isValidAuthority(replaced)) return { authority: original, invalid: true };
      authority = replaced;
    }
  }
  if (authority === undefined || authority === original) return { authority: original };
  if (!rewrite.appendXForwardedHost || original === undefined) return { authority };
  const existing = headers['x-forwarded-host'];
  const list = Array.isArray(existing) ? existing.join(',') : existing;
  const last = list?.split(',').pop()?.trim();
  return { authority, forwardedHost: !list ? original : last === original ? list : `${list},${original}` };
}
