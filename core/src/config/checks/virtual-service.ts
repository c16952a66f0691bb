import { ConfigCodes, type Diagnostic } from '../diagnostic.ts';
import type { Resource } from '../resource.ts';
import type { CheckContext } from '../check-context.ts';
import { re2Problem, substitutionProblem } from '../../regex/re2.ts';
import { cipherSuiteNames, isKnownCipher, isKnownCurve, PROTOCOL_ORDER, tlsVersionName } from '../../tls/policy.ts';
import { secureContextOf, tlsMaterial } from '../../tls/material.ts';
import { RETRY_ON_TOKENS, type RouteOptionsSpec, type RouteSpec, type VirtualHostOptionsSpec } from '../schema/virtual-service.ts';
import { checkDelegatingRoute, checkTableDelegation, delegationLimits, flattenRoutes, routeTablesOf, type DelegationProblem } from '../delegation.ts';
import { configLimits } from '../limits.ts';
import { parseHeaderValue } from '../../proxy/request/header-ops.ts';
import { PSEUDO_HEADERS } from '../../proxy/routing/route-matcher.ts';
import { hostRewriteProblems } from '../../proxy/request/host-rewrite.ts';

const HOST_LABELS = /^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$/i;

/** Checks a VirtualService needs beyond its schema: domain syntax and regexes that compile. */
export function checkVirtualService(resource: Resource<'VirtualService'>, ctx: CheckContext): Diagnostic[] {
  const out: Diagnostic[] = [];
  const vh = resource.spec.virtualHost;
  if (resource.spec.sslConfig) out.push(...checkSslConfig(resource, ctx));
  (vh.domains ?? []).forEach((domain, i) => {
    const path = ['spec', 'virtualHost', 'domains', i];
    const host = domain.replace(/:\d+$/, '');
    if (host !== domain) {
      out.push(ctx.at(path, ConfigCodes.BAD_DOMAIN, `domain "${domain}": the port is ignored; the Host header is matched without its port`, 'warning'));
    }
    // Envoy's forms: a name, "*", a suffix wildcard ("*.foo.com", "*-bar.foo.com") or a prefix wildcard ("foo.*").
    const suffix = host.startsWith('*') ? host.slice(1) : undefined;
    const prefix = !suffix && host.endsWith('*') && host !== '*' ? host.slice(0, -1) : undefined;
    const valid =
      host === '*' ||
      (suffix !== undefined && suffix !== '' && /^[a-z0-9_.-]+$/i.test(suffix) && !suffix.includes('*')) ||
      (prefix !== undefined && /^[a-z0-9_.-]+$/i.test(prefix)) ||
      HOST_LABELS.test(host);
    if (!valid) {
      out.push(ctx.at(path, ConfigCodes.BAD_DOMAIN, `domain "${domain}" is not a host name, "*", a suffix wildcard ("*.foo.com", "*-bar.foo.com") or a prefix wildcard ("foo.*")`));
    }
  });
  out.push(...checkVirtualHostOptionFields(vh.options, ['spec', 'virtualHost', 'options'], ctx));
  out.push(...checkRoutes(vh.routes, ['spec', 'virtualHost', 'routes'], ctx));
  out.push(...checkDelegation(resource, ctx));
  return out;
}

/** Field checks shared by virtual hosts and routes; each pushes its diagnostics to `out`. */
function fieldChecks(out: Diagnostic[], ctx: CheckContext) {
  // RE2, as Envoy: lookaround and backreferences refused here, naming the field; matching is linear-time.
  const regex = (value: string | undefined, path: (string | number)[], maxProgramSize?: number) => {
    if (value === undefined) return;
    const problem = re2Problem(value, { maxProgramSize });
    if (problem) out.push(ctx.at(path, ConfigCodes.BAD_REGEX, problem));
  };
  const retryOn = (retries: { retryOn?: string | undefined; retriableStatusCodes?: readonly number[] | undefined } | undefined, path: (string | number)[]) => {
    if (!retries?.retryOn) return;
    const tokens = retries.retryOn.split(',').map((t) => t.trim()).filter(Boolean);
    for (const token of tokens) {
      if (!RETRY_ON_TOKENS.has(token)) out.push(ctx.at([...path, 'retryOn'], ConfigCodes.INVALID, `retryOn token "${token}" is not supported; use ${[...RETRY_ON_TOKENS].join(', ')}`));
    }
    if (tokens.includes('retriable-status-codes') && !retries.retriableStatusCodes?.length) {
      out.push(ctx.at([...path, 'retriableStatusCodes'], ConfigCodes.INVALID, 'retryOn has retriable-status-codes but no retriableStatusCodes are listed'));
    }
  };
  const headerValues = (manipulation: { requestHeadersToAdd?: readonly { header?: { value: string } | undefined }[] | undefined; responseHeadersToAdd?: readonly { header?: { value: string } | undefined }[] | undefined } | undefined, at: (string | number)[]) => {
    for (const list of ['requestHeadersToAdd', 'responseHeadersToAdd'] as const) {
      manipulation?.[list]?.forEach((h, j) => {
        if (!h.header) return;
        try {
          parseHeaderValue(h.header.value);
        } catch (error) {
          out.push(ctx.at([...at, 'headerManipulation', list, j, 'header', 'value'], ConfigCodes.INVALID, (error as Error).message));
        }
      });
    }
  };
  return { regex, retryOn, headerValues };
}

/** The checks every route needs, in a VirtualService or a RouteTable (`base` is the path of its routes list). */
export function checkRoutes(routes: readonly RouteSpec[], base: (string | number)[], ctx: CheckContext): Diagnostic[] {
  const out: Diagnostic[] = [];
  const { regex, headerValues } = fieldChecks(out, ctx);
  routes.forEach((route, r) => {
    const at = [...base, r];
    for (const d of checkDelegatingRoute(route)) out.push(ctx.at([...at, ...d.path], ConfigCodes.DELEGATION, d.message));
    out.push(...checkRouteOptionFields(route.options, [...at, 'options'], ctx));
    route.routeAction?.multi?.destinations.forEach((d, j) => headerValues(d.options?.headerManipulation, [...at, 'routeAction', 'multi', 'destinations', j, 'options']));
    route.matchers?.forEach((m, i) => {
      regex(m.regex, [...at, 'matchers', i, 'regex']);
      m.headers?.forEach((h, j) => {
        if (h.regex) regex(h.value ?? '', [...at, 'matchers', i, 'headers', j, 'value']);
        // A pseudo-header Envoy's router does not have would never match: refused rather than a route that silently never serves.
        const name = h.name.toLowerCase();
        if (name.startsWith(':') && !Object.hasOwn(PSEUDO_HEADERS, name)) {
          out.push(ctx.at([...at, 'matchers', i, 'headers', j, 'name'], ConfigCodes.INVALID, `"${h.name}" is not a request pseudo-header a route can match; use one of ${Object.keys(PSEUDO_HEADERS).join(', ')}, or a header name without ":"`));
        }
      });
      m.queryParameters?.forEach((q, j) => {
        if (q.regex) regex(q.value ?? '', [...at, 'matchers', i, 'queryParameters', j, 'value']);
      });
    });
  });
  return out;
}

/** Checks of a route's options (`at`: the options object's path), inline or in a RouteOption. */
function checkRouteOptionFields(options: RouteOptionsSpec | undefined, at: (string | number)[], ctx: CheckContext): Diagnostic[] {
  const out: Diagnostic[] = [];
  if (!options) return out;
  const { regex, retryOn, headerValues } = fieldChecks(out, ctx);
  retryOn(options.retries, [...at, 'retries']);
  headerValues(options.headerManipulation, at);
  const rewrite = options.regexRewrite;
  regex(rewrite?.pattern.regex, [...at, 'regexRewrite', 'pattern', 'regex'], rewrite?.pattern.googleRe2?.maxProgramSize);
  const substitution = rewrite && !re2Problem(rewrite.pattern.regex) ? substitutionProblem(rewrite.pattern.regex, rewrite.substitution) : undefined;
  if (substitution) out.push(ctx.at([...at, 'regexRewrite', 'substitution'], ConfigCodes.BAD_REGEX, substitution));
  if (options.regexRewrite && options.prefixRewrite !== undefined) {
    out.push(ctx.at([...at, 'regexRewrite'], ConfigCodes.INVALID, 'set regexRewrite or prefixRewrite, not both (Envoy)'));
  }
  // Gloo's host_rewrite_type oneof, and hostRewritePathRegex's RE2 (program size bounded as every regex).
  for (const problem of hostRewriteProblems(options)) {
    if (problem.warning) out.push(ctx.at([...at, ...problem.field], ConfigCodes.IGNORED, problem.message, 'warning'));
    else out.push(ctx.at([...at, ...problem.field], problem.field[0] === 'hostRewritePathRegex' ? ConfigCodes.BAD_REGEX : ConfigCodes.INVALID, problem.message));
  }
  options.cors?.allowOriginRegex?.forEach((x, i) => regex(x, [...at, 'cors', 'allowOriginRegex', i]));
  if (options.extauth?.disable === false) {
    out.push(ctx.at([...at, 'extauth', 'disable'], ConfigCodes.INVALID, '"disable: false" has no effect; remove it to inherit the virtual host\'s auth', 'warning'));
  }
  return out;
}

/** Checks of a virtual host's options (`at`: the options object's path), inline or in a VirtualHostOption. */
function checkVirtualHostOptionFields(options: VirtualHostOptionsSpec | undefined, at: (string | number)[], ctx: CheckContext): Diagnostic[] {
  const out: Diagnostic[] = [];
  const { regex, retryOn, headerValues } = fieldChecks(out, ctx);
  options?.cors?.allowOriginRegex?.forEach((r, i) => regex(r, [...at, 'cors', 'allowOriginRegex', i]));
  retryOn(options?.retries, [...at, 'retries']);
  headerValues(options?.headerManipulation, at);
  return out;
}

/** A VirtualHostOption's options, checked as a virtual host's. */
export function checkVirtualHostOption(resource: Resource<'VirtualHostOption'>, ctx: CheckContext): Diagnostic[] {
  return checkVirtualHostOptionFields(resource.spec.options, ['spec', 'options'], ctx);
}

/** A RouteOption's options, checked as a route's. */
export function checkRouteOption(resource: Resource<'RouteOption'>, ctx: CheckContext): Diagnostic[] {
  return checkRouteOptionFields(resource.spec.options, ['spec', 'options'], ctx);
}

/**
 * The delegation under a VirtualService (every chain walked, as it will be served, over the
 * accepted RouteTables) or under a RouteTable (its own delegations, over the RouteTables this
 * load may serve: ./delegation.ts checkTableDelegation).
 */
export function checkDelegation(resource: Resource<'VirtualService'> | Resource<'RouteTable'>, ctx: CheckContext): Diagnostic[] {
  const routes = resource.kind === 'VirtualService' ? resource.spec.virtualHost.routes : resource.spec.routes;
  const limits = delegationLimits();
  const path = resource.kind === 'VirtualService' ? ['spec', 'virtualHost', 'routes'] : ['spec', 'routes'];
  if (resource.kind === 'VirtualService') {
    // One budget for every virtual host of the load: walks stop there, so a load's work and the
    // route table's size are bounded however many virtual hosts share a large tree.
    let left = totalLeft.get(ctx.resources);
    if (left === undefined) left = configLimits().maxRoutesTotal;
    const total = left < limits.maxRoutes;
    const walkLimits = total ? { ...limits, maxRoutes: left, routesSetting: `GATEHOUSE_MAX_ROUTES_TOTAL, ${configLimits().maxRoutesTotal} for all virtual hosts together` } : limits;
    let problems: DelegationProblem[];
    let expanded: number;
    if (routes.some((r) => r.delegateAction)) {
      ({ problems, expanded } = flattenRoutes(resource, routeTablesOf(ctx.resources), walkLimits));
    } else {
      // Without delegation the walk only counts routes: done here without it.
      expanded = 0;
      for (const r of routes) expanded += Math.max(1, r.matchers?.length ?? 0);
      problems = expanded <= walkLimits.maxRoutes ? [] : [{ path, code: ConfigCodes.DELEGATION_LIMIT, severity: 'error', message: `${expanded} routes (each matcher counts) are more than ${walkLimits.maxRoutes} (limit ${walkLimits.routesSetting ?? 'GATEHOUSE_MAX_ROUTES_PER_VIRTUAL_HOST'})` }];
    }
    totalLeft.set(ctx.resources, Math.max(0, left - expanded));
    return problems.map((p) => ctx.at(p.path, p.code, p.message, p.severity));
  }
  if (!routes.some((r) => r.delegateAction)) {
    let count = 0;
    for (const r of routes) count += Math.max(1, r.matchers?.length ?? 0);
    if (count <= limits.maxRoutes) return [];
    return [ctx.at(path, ConfigCodes.DELEGATION_LIMIT, `${count} routes (each matcher counts) are more than ${limits.maxRoutes} (limit GATEHOUSE_MAX_ROUTES_PER_VIRTUAL_HOST)`)];
  }
  let view = ctx.routeTables ?? new Map([[resource.key, resource]]);
  if (view.get(resource.key) !== resource) {
    // The last accepted version, checked again after its new version was rejected: the view with it in its place.
    view = new Map(view).set(resource.key, resource);
  }
  const problems = checkTableDelegation(resource, routeTablesOf(view));
  return problems.map((p) => ctx.at(p.path, p.code, p.message, p.severity));
}

/** Routes the virtual hosts of a load (by its served map) may still expand to. */
const totalLeft = new WeakMap<ReadonlyMap<string, unknown>, number>();

/** Checks a RouteTable on its own: its routes as a VirtualService's, and the tables it delegates to. */
export function checkRouteTable(resource: Resource<'RouteTable'>, ctx: CheckContext): Diagnostic[] {
  return [...checkRoutes(resource.spec.routes, ['spec', 'routes'], ctx), ...checkDelegation(resource, ctx)];
}

/** `sslConfig.parameters`: each cipher suite and curve known to OpenSSL, the version range not empty. */
function checkSslParameters(resource: Resource<'VirtualService'>, ctx: CheckContext): Diagnostic[] {
  const parameters = resource.spec.sslConfig!.parameters;
  if (!parameters) return [];
  const at = ['spec', 'sslConfig', 'parameters'];
  const out: Diagnostic[] = [];
  cipherSuiteNames(parameters.cipherSuites ?? []).forEach((name) => {
    if (!isKnownCipher(name)) out.push(ctx.at([...at, 'cipherSuites'], ConfigCodes.BAD_TLS, `unknown cipher suite "${name}" (OpenSSL names, e.g. ECDHE-RSA-AES128-GCM-SHA256)`));
  });
  (parameters.ecdhCurves ?? []).forEach((name, i) => {
    if (!isKnownCurve(name)) out.push(ctx.at([...at, 'ecdhCurves', i], ConfigCodes.BAD_TLS, `unknown curve "${name}" (e.g. X25519, P-256, P-384)`));
  });
  const min = PROTOCOL_ORDER[tlsVersionName(parameters.minimumProtocolVersion) ?? 'TLSv1.2']!;
  const max = PROTOCOL_ORDER[tlsVersionName(parameters.maximumProtocolVersion) ?? 'TLSv1.3']!;
  if (min > max) out.push(ctx.at(at, ConfigCodes.BAD_TLS, `minimumProtocolVersion ${parameters.minimumProtocolVersion} is above maximumProtocolVersion ${parameters.maximumProtocolVersion}`));
  return out;
}

/** The certificate and key load and match (a bad pair is a rejected resource, never a failed handshake later). */
function checkSslConfig(resource: Resource<'VirtualService'>, ctx: CheckContext): Diagnostic[] {
  const ssl = resource.spec.sslConfig!;
  const secret = (ref: { name: string; namespace?: string }) => ctx.resources.get(`Secret/${ref.namespace ?? resource.namespace}/${ref.name}`) as Resource<'Secret'> | undefined;
  // A missing Secret is reported by the reference check.
  if (ssl.secretRef && !secret(ssl.secretRef)) return [];
  const parameters = checkSslParameters(resource, ctx);
  if (parameters.length > 0) return parameters;
  const at = ['spec', 'sslConfig', ssl.secretRef ? 'secretRef' : 'sslFiles'];
  try {
    secureContextOf(resource, tlsMaterial(resource, secret));
  } catch (error) {
    return [ctx.at(at, ConfigCodes.BAD_TLS, `the certificate cannot be used: ${(error as Error).message}`)];
  }
  return [];
}
