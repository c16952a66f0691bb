import { boundDiagnostic, ConfigCodes, formatPath, type Diagnostic, type PathSegment } from './diagnostic.ts';
import { crossNamespaceMessage, secretReadableFrom, type CrossNamespaceSecrets } from './secret-grants.ts';
import type { ManifestDocument } from './manifest.ts';
import { describeResource, refKey, type AnyResource, type Resource } from './resource.ts';
import type { Kind } from './schema/kinds.ts';
import type { ResourceRef } from './schema/common.ts';
import type { CheckContext, ResourceChecks } from './check-context.ts';
import { validateDocument } from './validate.ts';
import type { ServiceEndpoints } from './source/kube.ts';
import { checkSecret, checkUpstreamFields, checkUpstreamTls } from './checks/secret.ts';
import { checkRouteOption, checkRouteTable, checkVirtualHostOption, checkVirtualService } from './checks/virtual-service.ts';
import { checkIgnoredFields } from './checks/ignored-fields.ts';
import { domainsOf, type RouteSpec, type VirtualServiceSpec } from './schema/virtual-service.ts';
import { oauth2SecretRefs } from './schema/oauth2.ts';

/** Status of one resource (SPEC 2.4). */
export interface ResourceStatus {
  readonly kind: Kind;
  readonly namespace: string;
  readonly name: string;
  readonly state: 'Accepted' | 'Rejected' | 'Warning';
  /** Why the newest version was rejected, or its warnings. */
  readonly reasons: readonly Diagnostic[];
  /** Which version serves traffic: the newest, the last accepted one, or none. */
  readonly serving: 'current' | 'last-accepted' | 'none';
  readonly servedVersion?: string;
  readonly file?: string;
  readonly line?: number;
}

/** An immutable view of the served configuration. Built once per load; the request path only reads it. */
export interface ConfigSnapshot {
  readonly generation: number;
  /** Served resources by key (`Kind/namespace/name`). */
  readonly resources: ReadonlyMap<string, AnyResource>;
  readonly statuses: readonly ResourceStatus[];
  /** Every diagnostic of this load, including file-level ones (parse errors). */
  readonly diagnostics: readonly Diagnostic[];
  /** Ready endpoints of Kubernetes Services by `namespace/name` (the kube source's EndpointSlices); absent: resolve through DNS. */
  readonly endpoints?: ReadonlyMap<string, ServiceEndpoints> | undefined;
  /** The listener this snapshot was scoped to (`namespace/name` of its Gateway; server/gateway-listeners.ts), for per-listener settings (tracing). */
  readonly listener?: string | undefined;
  /** Set on the copy one Gateway listener serves: its `httpGateway.options` (gzip, grpcWeb, buffer: proxy/filters/), and their JSON (what a recompile compares). */
  readonly listenerHttp?: { readonly httpOptions: Readonly<Record<string, unknown>> | undefined; readonly key: string } | undefined;
}

// `lookup`, `CheckContext` and `ResourceChecks` live in modules of their own, so the checks and
// the TLS code import them without importing the store (which imports the checks).
export { lookup } from './lookup.ts';
export type { CheckContext, ResourceChecks } from './check-context.ts';

/** Dependency order: a kind is checked after the kinds it references. */
const ORDER: readonly Kind[] = ['Secret', 'ConfigMap', 'Upstream', 'UpstreamGroup', 'AuthConfig', 'RateLimitConfig', 'GraphQLApi', 'VirtualHostOption', 'RouteOption', 'RouteTable', 'VirtualService', 'Gateway'];

interface Candidate {
  key: string;
  kind: Kind;
  namespace: string;
  name: string;
  fresh?: AnyResource;
  doc?: ManifestDocument;
  reasons: Diagnostic[];
}

/**
 * Turns successive loads of documents into snapshots. Remembers the last accepted
 * version of every resource so that a rejected update keeps the old one serving.
 */
export class ConfigStore {
  private generation = 0;
  private lastAccepted = new Map<string, AnyResource>();
  private servedOrder: string[] = [];
  private checks: ResourceChecks;

  constructor(options: { checks?: ResourceChecks; apiGroupDomain: string; crossNamespaceSecrets?: CrossNamespaceSecrets | undefined }) {
    this.checks = options.checks ?? {};
    this.apiGroupDomain = options.apiGroupDomain;
    this.crossNamespaceSecrets = options.crossNamespaceSecrets ?? 'granted';
  }

  /** Adds kind checks (for kinds whose checking code is loaded on demand). */
  addChecks(checks: ResourceChecks): void {
    this.checks = { ...this.checks, ...checks };
  }

  private readonly apiGroupDomain: string;
  /** `--cross-namespace-secrets` (config/secret-grants.ts). */
  private readonly crossNamespaceSecrets: CrossNamespaceSecrets;
  /** Schema verdicts by document (results are frozen, documents immutable once read). */
  private readonly validated = new WeakMap<ManifestDocument, ReturnType<typeof validateDocument>>();

  /**
   * Builds the next snapshot from every document now in the source.
   * `failedFiles` are files that could not be read or parsed: resources last seen in
   * them keep serving, as if their documents were still there and rejected.
   */
  load(documents: readonly ManifestDocument[], fileDiagnostics: readonly Diagnostic[] = []): ConfigSnapshot {
    const candidates = new Map<string, Candidate>();
    const orphanDiagnostics: Diagnostic[] = [...fileDiagnostics];

    for (const doc of documents) {
      // Sources hand on unchanged documents as the same objects: each is validated once.
      let result = this.validated.get(doc);
      if (!result) this.validated.set(doc, (result = validateDocument(doc, this.apiGroupDomain, this.crossNamespaceSecrets)));
      if (!result.key) {
        orphanDiagnostics.push(...result.diagnostics);
        continue;
      }
      const [kind, namespace, name] = result.key.split('/') as [Kind, string, string];
      const existing = candidates.get(result.key);
      if (existing) {
        const first = existing.doc!;
        orphanDiagnostics.push({
          code: ConfigCodes.DUPLICATE,
          severity: 'error',
          file: doc.file,
          line: doc.line,
          resource: describeResource({ kind, namespace, name }),
          message: `duplicate resource: already defined at ${first.file}:${first.line}; this definition is ignored`,
        });
        continue;
      }
      candidates.set(result.key, { key: result.key, kind, namespace, name, fresh: result.resource, doc, reasons: [...result.diagnostics] });
    }

    // A file that failed to parse hides its resources; keep serving what it held.
    const failedFiles = new Set(fileDiagnostics.map((d) => d.file).filter((f): f is string => !!f));
    for (const [key, old] of this.lastAccepted) {
      if (candidates.has(key) || !failedFiles.has(old.source.file)) continue;
      const reason = fileDiagnostics.find((d) => d.file === old.source.file)!;
      candidates.set(key, { key, kind: old.kind, namespace: old.namespace, name: old.name, reasons: [{ ...reason, resource: describeResource(old) }] });
    }

    const served = new Map<string, AnyResource>();
    const statuses: ResourceStatus[] = [];
    const rank = new Map(this.servedOrder.map((key, i) => [key, i]));
    const present = new Set(candidates.keys());
    const routeTables = new Map<string, AnyResource>();
    for (const c of candidates.values()) {
      const table = c.kind === 'RouteTable' ? (c.fresh ?? this.lastAccepted.get(c.key)) : undefined;
      if (table) routeTables.set(c.key, table);
    }
    for (const kind of ORDER) {
      // Previously served resources first, so a newcomer cannot take over what they hold (e.g. a domain).
      // A stitched GraphQLApi after the APIs it stitches, so its references find them served.
      const late = (c: Candidate) => (c.fresh?.kind === 'GraphQLApi' && c.fresh.spec.stitchedSchema ? 1 : 0);
      const ofKind = [...candidates.values()]
        .filter((c) => c.kind === kind)
        .sort((a, b) => late(a) - late(b) || (rank.get(a.key) ?? Infinity) - (rank.get(b.key) ?? Infinity));
      const claims = new Map<string, string>();
      for (const candidate of ofKind) {
        statuses.push(this.decide(candidate, served, claims, present, routeTables));
      }
    }

    // Remember what serves now; a resource still present but rejected keeps its old good
    // version for later loads; a resource gone from the source is forgotten.
    const nextAccepted = new Map<string, AnyResource>();
    for (const key of candidates.keys()) {
      const keep = served.get(key) ?? this.lastAccepted.get(key);
      if (keep) nextAccepted.set(key, keep);
    }
    this.lastAccepted = nextAccepted;
    this.servedOrder = [...served.keys()].sort((a, b) => (rank.get(a) ?? Infinity) - (rank.get(b) ?? Infinity));
    this.generation++;
    // Messages may quote fields of any size: bounded once here for status, logs and admin:/config.
    const bounded = statuses.map((s) => (s.reasons.every((d) => boundDiagnostic(d) === d) ? s : { ...s, reasons: s.reasons.map(boundDiagnostic) }));
    const diagnostics = [...orphanDiagnostics.map(boundDiagnostic), ...bounded.flatMap((s) => s.reasons)];
    return { generation: this.generation, resources: served, statuses: bounded, diagnostics };
  }

  private decide(candidate: Candidate, served: Map<string, AnyResource>, claims: Map<string, string>, present: ReadonlySet<string>, routeTables: ReadonlyMap<string, AnyResource>): ResourceStatus {
    const base = { kind: candidate.kind, namespace: candidate.namespace, name: candidate.name, file: candidate.doc?.file, line: candidate.doc?.line };
    const reasons = [...candidate.reasons];
    if (candidate.fresh) {
      const found = this.check(candidate.fresh, served, claims, present, candidate.doc, routeTables);
      reasons.push(...found);
      if (!found.some((d) => d.severity === 'error')) {
        served.set(candidate.key, candidate.fresh);
        const state = found.length > 0 ? 'Warning' : 'Accepted';
        return { ...base, state, reasons, serving: 'current', servedVersion: candidate.fresh.version };
      }
    }
    const previous = this.lastAccepted.get(candidate.key);
    if (previous) {
      const stillValid = !this.check(previous, served, claims, present, undefined, routeTables).some((d) => d.severity === 'error');
      if (stillValid) {
        served.set(candidate.key, previous);
        return { ...base, state: 'Rejected', reasons, serving: 'last-accepted', servedVersion: previous.version };
      }
    }
    return { ...base, state: 'Rejected', reasons, serving: 'none' };
  }

  private check(resource: AnyResource, served: ReadonlyMap<string, AnyResource>, claims: Map<string, string>, present: ReadonlySet<string>, doc: ManifestDocument | undefined, routeTables: ReadonlyMap<string, AnyResource>): Diagnostic[] {
    const label = describeResource(resource);
    const ctx: CheckContext = {
      resources: served,
      routeTables,
      at: (path, code, message, severity = 'error') => ({
        code,
        severity,
        message,
        resource: label,
        file: resource.source.file,
        line: doc ? doc.lineOf(path) : resource.source.line,
        ...(path.length ? { path: formatPath(path) } : {}),
      }),
    };
    const out: Diagnostic[] = [];
    for (const ref of referencesOf(resource)) {
      const key = refKey(ref.kind, ref.ref, resource.namespace);
      // A Secret of another namespace: refused unless it grants this one (docs/tenancy.md). The
      // message does not say whether it exists: a tenant learns nothing of another namespace.
      if (ref.kind === 'Secret' && (ref.ref.namespace ?? resource.namespace) !== resource.namespace) {
        const secret = served.get(key) as Resource<'Secret'> | undefined;
        if (!secret || !secretReadableFrom({ namespace: secret.namespace, referableFrom: secret.spec.referableFrom }, resource.namespace)) {
          out.push(ctx.at(ref.path, ConfigCodes.CROSS_NAMESPACE_REF, crossNamespaceMessage({ namespace: ref.ref.namespace!, name: ref.ref.name }, resource.namespace)));
          continue;
        }
      }
      const target = served.get(key);
      if (target && (target.kind === 'VirtualHostOption' || target.kind === 'RouteOption') && target.namespace !== resource.namespace) {
        // Options of another namespace bring their Secrets (header values) here: the tenancy rule for Secrets holds through them.
        const refused = referencesOf(target).find((r) => {
          if (r.kind !== 'Secret') return false;
          const secret = served.get(refKey('Secret', r.ref, target.namespace)) as Resource<'Secret'> | undefined;
          return !secret || !secretReadableFrom({ namespace: secret.namespace, referableFrom: secret.spec.referableFrom }, resource.namespace);
        });
        if (refused) {
          out.push(ctx.at(ref.path, ConfigCodes.CROSS_NAMESPACE_REF, `${describeResource(target)}: ${crossNamespaceMessage({ namespace: refused.ref.namespace ?? target.namespace, name: refused.ref.name }, resource.namespace)}`));
          continue;
        }
      }
      if (target) continue;
      const name = `${ref.kind} ${ref.ref.namespace ?? resource.namespace}/${ref.ref.name}`;
      if (ref.kind === 'AuthConfig' && present.has(key)) {
        // Fail closed, not open and not 404 (SPEC 5): the routes stay, and the auth server
        // denies their requests until the AuthConfig is accepted.
        out.push(ctx.at(ref.path, ConfigCodes.REJECTED_REF, `references ${name}, which is rejected: requests that need it are denied (403) until it is accepted`, 'warning'));
        continue;
      }
      // Gloo: a missing options resource is a warning, so options can be applied after what uses them.
      const optional = ref.kind === 'VirtualHostOption' || ref.kind === 'RouteOption';
      out.push(ctx.at(ref.path, ConfigCodes.MISSING_REF, `references ${name}, which does not exist or is not accepted${optional ? ': its options are not applied' : ''}`, optional ? 'warning' : 'error'));
    }
    out.push(...checkIgnoredFields(resource, ctx));
    if (resource.kind === 'Secret') out.push(...checkSecret(resource, ctx));
    if (resource.kind === 'Upstream') out.push(...checkUpstreamTls(resource, ctx), ...checkUpstreamFields(resource, ctx));
    if (resource.kind === 'RouteTable') out.push(...checkRouteTable(resource, ctx));
    if (resource.kind === 'VirtualHostOption') out.push(...checkVirtualHostOption(resource, ctx));
    if (resource.kind === 'RouteOption') out.push(...checkRouteOption(resource, ctx));
    if (resource.kind === 'VirtualService') {
      const found = checkVirtualService(resource, ctx);
      out.push(...found);
      if (!found.some((d) => d.severity === 'error')) {
        // Domains are claimed only by a virtual service that is otherwise valid.
        // The HTTP and HTTPS listeners serve different VirtualServices (SPEC 3.2.1): a domain may have one on each.
        const listener = resource.spec.sslConfig ? 'https:' : 'http:';
        const taken = domainsOf(resource.spec.virtualHost)
          .map((domain, i) => ({ domain: normalizeDomain(domain), i }))
          .filter(({ domain }) => claims.has(listener + domain) && claims.get(listener + domain) !== resource.key);
        for (const { domain, i } of taken) {
          out.push(ctx.at(['spec', 'virtualHost', 'domains', i], ConfigCodes.DOMAIN_CONFLICT, `domain "${domain}" is already served by ${claims.get(listener + domain)!.replace(/^VirtualService\//, 'VirtualService ')}${listener === 'https:' ? ' on HTTPS' : ''}`));
        }
        if (taken.length === 0 && out.every((d) => d.severity !== 'error')) {
          for (const domain of domainsOf(resource.spec.virtualHost)) claims.set(listener + normalizeDomain(domain), resource.key);
        }
      }
    }
    if (out.some((d) => d.severity === 'error')) return out;
    const extra = this.checks[resource.kind] as ((r: AnyResource, c: CheckContext) => Diagnostic[]) | undefined;
    if (extra) out.push(...extra(resource, ctx));
    return out;
  }
}

/** Lower-cased, without a port: how domains are compared (SPEC 3.2). */
export function normalizeDomain(domain: string): string {
  return domain.toLowerCase().replace(/:\d+$/, '');
}

interface Reference {
  kind: Kind;
  ref: ResourceRef;
  path: PathSegment[];
}

/** Every reference a resource makes to another Gatehouse resource, with its field path. */
export function referencesOf(resource: AnyResource): Reference[] {
  const out: Reference[] = [];
  if (resource.kind === 'Upstream' && resource.spec.sslConfig?.secretRef) out.push({ kind: 'Secret', ref: resource.spec.sslConfig.secretRef, path: ['spec', 'sslConfig', 'secretRef'] });
  if (resource.kind === 'VirtualService') {
    const vh = resource.spec.virtualHost;
    if (resource.spec.sslConfig?.secretRef) out.push({ kind: 'Secret', ref: resource.spec.sslConfig.secretRef, path: ['spec', 'sslConfig', 'secretRef'] });
    if (vh.options?.extauth?.configRef) out.push({ kind: 'AuthConfig', ref: vh.options.extauth.configRef, path: ['spec', 'virtualHost', 'options', 'extauth', 'configRef'] });
    headerSecretRefs(vh.options?.headerManipulation, ['spec', 'virtualHost', 'options'], out);
    rateLimitConfigRefs(vh.options, ['spec', 'virtualHost', 'options'], out);

    vh.optionsConfigRefs?.delegateOptions?.forEach((ref, j) => out.push({ kind: 'VirtualHostOption', ref, path: ['spec', 'virtualHost', 'optionsConfigRefs', 'delegateOptions', j] }));
    routeReferences(vh.routes, ['spec', 'virtualHost', 'routes'], out);
  } else if (resource.kind === 'VirtualHostOption' || resource.kind === 'RouteOption') {
    // The options' own references, in the options resource's namespace (config/options-refs.ts qualifies them so when merged).
    const options = resource.spec.options;
    if (options?.extauth?.configRef) out.push({ kind: 'AuthConfig', ref: options.extauth.configRef, path: ['spec', 'options', 'extauth', 'configRef'] });
    headerSecretRefs(options?.headerManipulation, ['spec', 'options'], out);
    const shadow = resource.kind === 'RouteOption' ? resource.spec.options?.shadowing?.upstream : undefined;
    if (shadow) out.push({ kind: 'Upstream', ref: shadow, path: ['spec', 'options', 'shadowing', 'upstream'] });
  } else if (resource.kind === 'RouteTable') {
    // Tables it delegates to are not references here: they are resolved by the delegation walk (a missing one is a warning, as in Gloo).
    routeReferences(resource.spec.routes, ['spec', 'routes'], out);
  } else if (resource.kind === 'Gateway') {
    // A TCP proxy's hosts (server/tcp-routes.ts): their certificates and upstreams.
    resource.spec.tcpGateway?.tcpHosts?.forEach((host, i) => {
      const at = ['spec', 'tcpGateway', 'tcpHosts', i];
      if (host.sslConfig?.secretRef) out.push({ kind: 'Secret', ref: host.sslConfig.secretRef, path: [...at, 'sslConfig', 'secretRef'] });
      const d = host.destination;
      if (d.single?.upstream) out.push({ kind: 'Upstream', ref: d.single.upstream, path: [...at, 'destination', 'single', 'upstream'] });
      d.multi?.destinations.forEach((w, j) => w.destination.upstream && out.push({ kind: 'Upstream', ref: w.destination.upstream, path: [...at, 'destination', 'multi', 'destinations', j, 'destination', 'upstream'] }));
      if (d.upstreamGroup) out.push({ kind: 'UpstreamGroup', ref: d.upstreamGroup, path: [...at, 'destination', 'upstreamGroup'] });
    });
  } else if (resource.kind === 'UpstreamGroup') {
    resource.spec.destinations.forEach((d, j) => out.push({ kind: 'Upstream', ref: d.destination.upstream, path: ['spec', 'destinations', j, 'destination', 'upstream'] }));
  } else if (resource.kind === 'AuthConfig') {
    resource.spec.configs.forEach((step, i) => {
      step.pluginAuth?.egress?.forEach((entry, j) => {
        if (entry.upstreamRef) out.push({ kind: 'Upstream', ref: entry.upstreamRef, path: ['spec', 'configs', i, 'pluginAuth', 'egress', j, 'upstreamRef'] });
      });
      const apiKey = step.apiKeyAuth;
      for (const [refs, path] of [
        [apiKey?.apiKeySecretRefs, ['apiKeySecretRefs']],
        [apiKey?.k8sSecretApikeyStorage?.apiKeySecretRefs, ['k8sSecretApikeyStorage', 'apiKeySecretRefs']],
      ] as const) {
        refs?.forEach((ref, j) => out.push({ kind: 'Secret', ref, path: ['spec', 'configs', i, 'apiKeyAuth', ...path, j] }));
      }
      const lookup = step.ldap?.groupLookupSettings;
      const credentials = lookup?.credentialsSecretRef;
      if (credentials) out.push({ kind: 'Secret', ref: credentials, path: ['spec', 'configs', i, 'ldap', 'groupLookupSettings', 'credentialsSecretRef'] });
      const hmacList = step.hmacAuth?.secretRefs;
      hmacList?.secretRefs.forEach((ref, j) => {
        out.push({ kind: 'Secret', ref, path: ['spec', 'configs', i, 'hmacAuth', 'secretRefs', 'secretRefs', j] });
      });
      step.opaAuth?.modules?.forEach((ref, j) => out.push({ kind: 'ConfigMap', ref, path: ['spec', 'configs', i, 'opaAuth', 'modules', j] }));
      if (step.oauth2) for (const { ref, path } of oauth2SecretRefs(step.oauth2 as Record<string, unknown>)) out.push({ kind: 'Secret', ref, path: ['spec', 'configs', i, 'oauth2', ...path] });
      for (const [name, ref] of Object.entries(step.pluginAuth?.secretRefs ?? {})) {
        out.push({ kind: 'Secret', ref: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) }, path: ['spec', 'configs', i, 'pluginAuth', 'secretRefs', name] });
      }
      // The plugin store's Redis credentials and CA (SPEC 5.3 "Per-step store").
      const redis = step.pluginAuth?.store?.redis;
      if (redis?.secretRef) out.push({ kind: 'Secret', ref: redis.secretRef, path: ['spec', 'configs', i, 'pluginAuth', 'store', 'redis', 'secretRef'] });
      const ca = redis?.tls?.caSecretRef;
      if (ca) out.push({ kind: 'Secret', ref: { name: ca.name, ...(ca.namespace ? { namespace: ca.namespace } : {}) }, path: ['spec', 'configs', i, 'pluginAuth', 'store', 'redis', 'tls', 'caSecretRef'] });
    });
  } else if (resource.kind === 'GraphQLApi' && resource.spec.stitchedSchema) {
    resource.spec.stitchedSchema.subschemas.forEach((sub, i) => {
      out.push({ kind: 'GraphQLApi', ref: { name: sub.name, ...(sub.namespace ? { namespace: sub.namespace } : {}) }, path: ['spec', 'stitchedSchema', 'subschemas', i] });
    });
  } else if (resource.kind === 'GraphQLApi' && resource.spec.executableSchema) {
    const schema = resource.spec.executableSchema;
    schema.grpcDescriptorRegistry?.protoRefsList?.protoRefs.forEach((ref, i) => {
      out.push({ kind: 'ConfigMap', ref, path: ['spec', 'executableSchema', 'grpcDescriptorRegistry', 'protoRefsList', 'protoRefs', i] });
    });
    if (schema.executor.remote) out.push({ kind: 'Upstream', ref: schema.executor.remote.upstreamRef, path: ['spec', 'executableSchema', 'executor', 'remote', 'upstreamRef'] });
    for (const [key, resolution] of Object.entries(schema.executor.local?.resolutions ?? {})) {
      const at = ['spec', 'executableSchema', 'executor', 'local', 'resolutions', key];
      if (resolution.restResolver) out.push({ kind: 'Upstream', ref: resolution.restResolver.upstreamRef, path: [...at, 'restResolver', 'upstreamRef'] });
      if (resolution.grpcResolver) out.push({ kind: 'Upstream', ref: resolution.grpcResolver.upstreamRef, path: [...at, 'grpcResolver', 'upstreamRef'] });
    }
  }
  return out;
}

type HeaderManipulation = NonNullable<NonNullable<VirtualServiceSpec['virtualHost']['options']>['headerManipulation']>;

function headerSecretRefs(manipulation: HeaderManipulation | undefined, at: PathSegment[], out: Reference[]): void {
  for (const list of ['requestHeadersToAdd', 'responseHeadersToAdd'] as const) {
    manipulation?.[list]?.forEach((h, j) => {
      if (h.headerSecretRef) out.push({ kind: 'Secret', ref: h.headerSecretRef, path: [...at, 'headerManipulation', list, j, 'headerSecretRef'] });
    });
  }
}

/** The RateLimitConfigs rate-limit options name (docs/rate-limiting.md). */
function rateLimitConfigRefs(options: { rateLimitConfigs?: { refs: ResourceRef[] } | undefined; rateLimitEarlyConfigs?: { refs: ResourceRef[] } | undefined; rateLimitRegularConfigs?: { refs: ResourceRef[] } | undefined } | undefined, at: PathSegment[], out: Reference[]): void {
  for (const name of ['rateLimitConfigs', 'rateLimitEarlyConfigs', 'rateLimitRegularConfigs'] as const) {
    options?.[name]?.refs.forEach((ref, j) => out.push({ kind: 'RateLimitConfig', ref, path: [...at, name, 'refs', j] }));
  }
}

/** What the routes of a VirtualService or RouteTable reference (`base`: the path of the routes list). */
function routeReferences(routes: readonly RouteSpec[], base: PathSegment[], out: Reference[]): void {
  routes.forEach((route, i) => {
    const at = [...base, i];
    headerSecretRefs(route.options?.headerManipulation, [...at, 'options'], out);
    if (route.routeAction?.single?.upstream) out.push({ kind: 'Upstream', ref: route.routeAction.single.upstream, path: [...at, 'routeAction', 'single', 'upstream'] });
    if (route.routeAction?.upstreamGroup) out.push({ kind: 'UpstreamGroup', ref: route.routeAction.upstreamGroup, path: [...at, 'routeAction', 'upstreamGroup'] });
    route.routeAction?.multi?.destinations.forEach((d, j) => {
      if (d.destination.upstream) out.push({ kind: 'Upstream', ref: d.destination.upstream, path: [...at, 'routeAction', 'multi', 'destinations', j, 'destination', 'upstream'] });
      headerSecretRefs(d.options?.headerManipulation, [...at, 'routeAction', 'multi', 'destinations', j, 'options'], out);
    });
    if (route.graphqlApiRef) out.push({ kind: 'GraphQLApi', ref: route.graphqlApiRef, path: [...at, 'graphqlApiRef'] });
    if (route.options?.shadowing) out.push({ kind: 'Upstream', ref: route.options.shadowing.upstream, path: [...at, 'options', 'shadowing', 'upstream'] });
    if (route.options?.extauth?.configRef) out.push({ kind: 'AuthConfig', ref: route.options.extauth.configRef, path: [...at, 'options', 'extauth', 'configRef'] });
    rateLimitConfigRefs(route.options, [...at, 'options'], out);

    route.optionsConfigRefs?.delegateOptions?.forEach((ref, j) => out.push({ kind: 'RouteOption', ref, path: [...at, 'optionsConfigRefs', 'delegateOptions', j] }));
  });
}
