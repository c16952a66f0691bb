import type { Diagnostic, PathSegment } from '../config/diagnostic.ts';
import { lookup } from '../config/store.ts';
import type { Logger } from '../log/logger.ts';
import { FilterStage, type FilterBuildContext, type FilterRequest, type FilterVerdict, type HttpFilter, type HttpFilterFactory, type LocalReply } from '../proxy/filters/http-filter.ts';
import { claimHeaderValue, claimValue } from './claims.ts';
import { JwtCodes } from './codes.ts';
import { field, fieldName } from './fields.ts';
import { compileProvider, providerProblems, type CompiledProvider, type UpstreamOrigin } from './provider.ts';
import { cachedPayload, JwtStatus, verifyToken, type JwtStatusText } from './verify.ts';

/** The `FilterRequest.metadata` key the verified claims go under, by provider name (Envoy's `envoy.filters.http.jwt_authn`). */
export const JWT_METADATA = 'jwt';
/** Claims by provider name, as the filter leaves them in `FilterRequest.metadata`. */
export type JwtMetadata = Record<string, Record<string, unknown>>;

/** Gloo's ValidationPolicy (with the deprecated `allowMissingOrFailedJwt` folded in). */
export type ValidationPolicy = 'REQUIRE_VALID' | 'ALLOW_MISSING' | 'ALLOW_MISSING_OR_FAILED';

/** Envoy's limit on the URI in `www-authenticate` (jwt_authn's MaximumUriLength). */
const MAX_REALM_PATH = 256;

/** A VhostExtension compiled once, shared by every route that inherits it. */
interface CompiledExtension {
  readonly providers: readonly CompiledProvider[];
  readonly policy: ValidationPolicy;
}

/** One JWT stage on one route: `jwtStaged.beforeExtAuth`, or `jwt` / `jwtStaged.afterExtAuth` / `jwtProvidersStaged`. */
export class JwtFilter implements HttpFilter {
  readonly name: string;
  readonly stage: number;
  private readonly providers: readonly CompiledProvider[];
  private readonly policy: ValidationPolicy;
  /** Headers `claimsToHeaders` owns (without `append`): cleared on every request, so a client cannot supply them. */
  private readonly ownedHeaders: readonly string[];

  constructor(extension: CompiledExtension, stage: number, name = 'jwt') {
    this.name = name;
    this.stage = stage;
    this.providers = extension.providers;
    this.policy = extension.policy;
    this.ownedHeaders = [...new Set(extension.providers.flatMap((p) => p.claimsToHeaders.filter((c) => !c.append).map((c) => c.header)))];
  }

  onRequest(request: FilterRequest): FilterVerdict | Promise<FilterVerdict> {
    // A token verified before (and still in time) is accepted synchronously: no promise per request.
    for (const provider of this.providers) {
      const found = findToken(provider, request);
      if (found === undefined) continue;
      const payload = cachedPayload(found.token, provider);
      if (payload === undefined) break;
      for (const name of this.ownedHeaders) delete request.ctx.headers[name];
      accept(request, provider, payload, found.header);
      return undefined;
    }
    return this.run(request).catch((): FilterVerdict => reply(request, JwtStatus.JwtVerificationFail));
  }

  private async run(request: FilterRequest): Promise<FilterVerdict> {
    for (const name of this.ownedHeaders) delete request.ctx.headers[name];
    let finalStatus: JwtStatusText = JwtStatus.JwtMissed;
    for (const provider of this.providers) {
      const found = findToken(provider, request);
      if (found === undefined) continue;
      const result = await verifyToken(found.token, provider);
      if (result.ok) {
        accept(request, provider, result.payload, found.header);
        return undefined;
      }
      // Envoy's requires_any: the last failure that is not "missing" (or a token for another issuer) decides.
      if (this.providers.length === 1 || (result.status !== JwtStatus.JwtMissed && result.status !== JwtStatus.JwtUnknownIssuer)) finalStatus = result.status;
    }
    if (this.policy === 'ALLOW_MISSING_OR_FAILED') return undefined;
    if (this.policy === 'ALLOW_MISSING' && finalStatus === JwtStatus.JwtMissed) return undefined;
    return reply(request, finalStatus);
  }
}

/** The provider's token in the request: from its headers (prefix stripped) in order, then its query parameters. */
function findToken(provider: CompiledProvider, request: FilterRequest): { token: string; header: string | undefined } | undefined {
  const headers = request.ctx.headers;
  for (const source of provider.headers) {
    const raw = headers[source.name];
    const value = Array.isArray(raw) ? raw[0] : raw;
    if (value === undefined || value.length < source.prefix.length) continue;
    if (source.prefix !== '' && value.slice(0, source.prefix.length).toLowerCase() !== source.prefix.toLowerCase()) continue;
    return { token: value.slice(source.prefix.length).trim(), header: source.name };
  }
  if (provider.queryParams.length === 0) return undefined;
  const url = request.req.url ?? '/';
  const q = url.indexOf('?');
  if (q === -1) return undefined;
  const query = new URLSearchParams(url.slice(q + 1));
  for (const name of provider.queryParams) {
    const value = query.get(name);
    if (value !== null) return { token: value, header: undefined };
  }
  return undefined;
}

/** A verified token: claims into metadata (by provider), the token header removed unless kept, claims to headers. */
function accept(request: FilterRequest, provider: CompiledProvider, payload: Record<string, unknown>, fromHeader: string | undefined): void {
  const headers = request.ctx.headers;
  const all = (request.metadata.get(JWT_METADATA) as JwtMetadata | undefined) ?? {};
  all[provider.name] = payload;
  request.metadata.set(JWT_METADATA, all);
  if (!provider.keepToken && fromHeader !== undefined) delete headers[fromHeader];
  let wrote = false;
  for (const c of provider.claimsToHeaders) {
    const value = claimHeaderValue(claimValue(payload, c.claim, '.'));
    if (value === undefined) continue;
    const existing = headers[c.header];
    headers[c.header] = c.append && existing !== undefined ? `${Array.isArray(existing) ? existing.join(',') : existing},${value}` : value;
    wrote = true;
  }
  // Gloo sets clear_route_cache with claimsToHeaders: routes may match on the claim headers (claim-based routing).
  if (wrote) request.clearRouteCache();
}

/** Envoy's local reply: 401 (403 for a disallowed audience), the status text as body, `www-authenticate: Bearer realm="<uri>"[, error="invalid_token"]`. */
function reply(request: FilterRequest, status: JwtStatusText): LocalReply {
  const url = request.req.url ?? '/';
  const scheme = (request.req.socket as { encrypted?: boolean } | undefined)?.encrypted ? 'https' : 'http';
  const host = String(request.ctx.headers.host ?? request.req.headers.host ?? '');
  // The realm is a quoted-string: no quotes or backslashes from the client's Host or path.
  const uri = `${scheme}://${host}${url.slice(0, MAX_REALM_PATH)}`.replace(/["\\\r\n]/g, '');
  const challenge = status === JwtStatus.JwtMissed ? `Bearer realm="${uri}"` : `Bearer realm="${uri}", error="invalid_token"`;
  const code = status === JwtStatus.JwtMissed ? JwtCodes.MISSING : status === JwtStatus.JwtAudienceNotAllowed ? JwtCodes.AUDIENCE : status === JwtStatus.JwksFetchFail ? JwtCodes.JWKS_UNAVAILABLE : JwtCodes.INVALID;
  return { status: status === JwtStatus.JwtAudienceNotAllowed ? 403 : 401, code, body: status, headers: ['www-authenticate', challenge] };
}

type Ext = Record<string, unknown>;

/** The VhostExtension each stage uses on a route: the route's `jwtProvidersStaged` replaces the host's at its stage; `disable` turns a stage off. */
export function effectiveJwt(routeOptions: Readonly<Ext> | undefined, hostOptions: Readonly<Ext> | undefined): { before: Ext | undefined; after: Ext | undefined } {
  const hostStaged = field<Ext>(hostOptions, 'jwtStaged');
  let before = field<Ext>(hostStaged, 'beforeExtAuth');
  let after = (hostOptions?.jwt as Ext | undefined) ?? field<Ext>(hostStaged, 'afterExtAuth');
  const providersStaged = field<Ext>(routeOptions, 'jwtProvidersStaged');
  if (field(providersStaged, 'beforeExtAuth')) before = field<Ext>(providersStaged, 'beforeExtAuth');
  if (field(providersStaged, 'afterExtAuth')) after = field<Ext>(providersStaged, 'afterExtAuth');
  const routeStaged = field<Ext>(routeOptions, 'jwtStaged');
  if (field<Ext>(routeStaged, 'beforeExtAuth')?.disable === true) before = undefined;
  if (field<Ext>(routeStaged, 'afterExtAuth')?.disable === true) after = undefined;
  // The deprecated route `jwt` is the afterExtAuth stage (Gloo: "the same configuration ... through staged jwt using AfterExtAuth").
  if ((routeOptions?.jwt as Ext | undefined)?.disable === true) after = undefined;
  return { before, after };
}

function policyOf(extension: Ext): ValidationPolicy {
  if (field<boolean>(extension, 'allowMissingOrFailedJwt') === true) return 'ALLOW_MISSING_OR_FAILED';
  return (field<ValidationPolicy>(extension, 'validationPolicy') ?? 'REQUIRE_VALID') as ValidationPolicy;
}

/** Compiled extensions by the options object they came from: a host's providers compile once for all its routes. */
const compiled = new WeakMap<object, CompiledExtension | undefined>();

function compileExtension(extension: Ext, upstreamOrigin: UpstreamOrigin, logger: Logger): CompiledExtension | undefined {
  if (compiled.has(extension)) return compiled.get(extension);
  const specs = Object.entries((extension.providers as Record<string, Ext> | undefined) ?? {});
  let out: CompiledExtension | undefined;
  // No providers: nothing can verify, so the stage has nothing to require (Gloo adds no requirement).
  if (specs.length > 0) out = { providers: specs.map(([name, spec]) => compileProvider(name, spec, { upstreamOrigin, logger })), policy: policyOf(extension) };
  compiled.set(extension, out);
  return out;
}

/** Where an `upstreamRef` dials: the Upstream's first static host. */
function upstreamOriginOf(context: FilterBuildContext): UpstreamOrigin {
  return (ref) => {
    const upstream = lookup(context.snapshot, 'Upstream', ref, context.namespace);
    const host = upstream?.spec.static?.hosts[0];
    if (!upstream || !host) {
      context.logger.warn({ code: JwtCodes.CONFIG, upstream: `${ref.namespace ?? context.namespace}/${ref.name}` }, 'jwks.remote.upstreamRef names no static Upstream; the url\'s own host is dialled');
      return undefined;
    }
    const tls = upstream.spec.static?.useTls ?? (upstream.spec.sslConfig !== undefined || host.port === 443);
    const address = host.addr.includes(':') ? `[${host.addr}]` : host.addr;
    return `${tls ? 'https' : 'http'}://${address}:${host.port}`;
  };
}

/** Load-time checks of the JWT options on a route or virtual host options object. */
function checkJwtOptions(options: Readonly<Ext>, at: (path: PathSegment[], code: string, message: string, severity?: 'error' | 'warning') => Diagnostic, path: PathSegment[]): Diagnostic[] {
  const out: Diagnostic[] = [];
  const set = ['jwt', 'jwtStaged', 'jwtProvidersStaged'].filter((name) => field(options, name) !== undefined);
  if (set.length > 1) out.push(at([...path, fieldName(options, set[1]!)], JwtCodes.CONFIG, `Gloo's jwt_config is a oneof: set only one of ${set.join(', ')}`));
  const extensions: [PathSegment[], unknown][] = [];
  const jwt = options.jwt as Ext | undefined;
  if (jwt && jwt.providers !== undefined) extensions.push([['jwt'], jwt]);
  for (const outer of ['jwtStaged', 'jwtProvidersStaged']) {
    const staged = field<Ext>(options, outer);
    for (const inner of ['beforeExtAuth', 'afterExtAuth']) {
      const ext = field<Ext>(staged, inner);
      if (ext && ext.disable === undefined) extensions.push([[fieldName(options, outer), fieldName(staged, inner)], ext]);
    }
  }
  for (const [where, ext] of extensions) {
    for (const [name, spec] of Object.entries(((ext as Ext).providers as Record<string, Ext> | undefined) ?? {})) {
      for (const p of providerProblems(spec)) out.push(at([...path, ...where, 'providers', name, ...p.path], JwtCodes.CONFIG, p.message, p.severity));
    }
  }
  return out;
}

/** The JWT filter factory: up to two filters per route (before and after external auth). */
export const jwtFilterFactory: HttpFilterFactory = {
  name: 'jwt',
  check: checkJwtOptions,
  create(context) {
    const { before, after } = effectiveJwt(context.routeOptions, context.virtualHostOptions);
    const origin = upstreamOriginOf(context);
    const filters: HttpFilter[] = [];
    const b = before ? compileExtension(before, origin, context.logger) : undefined;
    if (b) filters.push(new JwtFilter(b, FilterStage.jwtBeforeExtAuth, 'jwt-before-ext-auth'));
    const a = after ? compileExtension(after, origin, context.logger) : undefined;
    if (a) filters.push(new JwtFilter(a, FilterStage.jwtAfterExtAuth, 'jwt'));
    return filters.length > 0 ? filters : undefined;
  },
};
