import { createSecureContext, type SecureContext, type SecureContextOptions, type TLSSocket } from 'node:tls';
import type { Resource } from '../config/resource.ts';
import { lookup } from '../config/lookup.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import { cipherSuiteNames, PROTOCOL_ORDER, tlsVersionName } from '../tls/policy.ts';
import { secureContextOptions, tlsMaterial } from '../tls/material.ts';

// The TLS policy and material code moved to ../tls/ (shared with upstreams); re-exported for the listener's importers.
export { cipherSuiteNames, DEFAULT_TLS_POLICY, INTERMEDIATE_CURVES, INTERMEDIATE_TLS12_CIPHERS, isKnownCipher, isKnownCurve, PROTOCOL_ORDER, TLS13_CIPHERS, tlsVersionName } from '../tls/policy.ts';
export { secureContextOf, secureContextOptions, tlsMaterial, type TlsMaterial } from '../tls/material.ts';

/** A VirtualService's `sslConfig`, as compiled for the HTTPS listener. */
export interface TlsHost {
  /** The whole TLS policy: the listener runs the handshakes of this host's names under it (./listen.ts). */
  readonly context: SecureContext;
  /** What `context` was built from. */
  readonly options: SecureContextOptions;
  /** Clients must present a certificate signed by the config's root CA. */
  readonly requireClientCert: boolean;
  /** `namespace/name` of the VirtualService, for logs. */
  readonly virtualService: string;
  /** Lowest protocol version accepted (`parameters.minimumProtocolVersion`); negotiated in `context`, checked again after the handshake. */
  readonly minVersion: number;
  /** Highest protocol version accepted (`parameters.maximumProtocolVersion`), the same way. */
  readonly maxVersion: number;
  /** TLS 1.2 suites accepted (`parameters.cipherSuites`, OpenSSL names) when the VirtualService lists its own; the same way. */
  readonly ciphers: ReadonlySet<string> | undefined;
  /**
   * Everything the TLS policy is made of (certificate, key, CA, client-certificate, versions,
   * suites, curves): two VirtualServices with one policy may share a connection (coalescing),
   * as Gloo merges identical sslConfigs into one filter chain; any other pair may not (421).
   */
  readonly policy: string;
  /**
   * {@link policy} without the certificate and key: what the handshake demanded of the client.
   * A connection made for a VirtualService keeps serving it after only its certificate rotated.
   */
  readonly access: string;
}

const BINDING = Symbol('gatehouse.tlsBinding');

/** The TLS host a connection's SNI chose at its handshake, the table it was chosen from, and the live contexts to look others up in. */
export interface TlsBinding {
  readonly host: TlsHost | undefined;
  /** The certificates as they were when the connection's ClientHello was read (its handshake ran under them). */
  readonly table: TlsTable;
  readonly contexts: TlsContexts;
}

/**
 * Binds a TLS connection to the host its SNI chose in `table` (no SNI: the default host): the
 * table its handshake ran under, not the current one, so a snapshot applied during the
 * handshake does not change what the connection is bound to. Returns that host.
 */
export function bindTlsConnection(socket: TLSSocket, contexts: TlsContexts, table: TlsTable = contexts.current): TlsHost | undefined {
  const host = table.hostFor((socket as TLSSocket & { servername?: string | false }).servername || undefined);
  (socket as TLSSocket & { [BINDING]?: TlsBinding })[BINDING] = { host, table, contexts };
  return host;
}

/** The binding of a request's connection (HTTP/2 streams read it through their session's socket); undefined off TLS. */
export function tlsBindingOf(socket: unknown): TlsBinding | undefined {
  return (socket as { [BINDING]?: TlsBinding } | null)?.[BINDING];
}

/**
 * Whether a request for VirtualService `virtualService` may be served on a connection bound by
 * `binding` (SPEC 3.2.1): only when that VirtualService's TLS policy is the one the connection
 * was made under, so a client-certificate or version policy cannot be skipped by choosing
 * another SNI (or by reusing a connection made for another name: answered 421). A connection
 * made under the VirtualService's policy before its certificate rotated keeps serving it while
 * the rest of the policy is unchanged: a rotation does not turn open connections away.
 */
export function servesOnConnection(binding: TlsBinding, virtualService: string): boolean {
  const { host } = binding;
  const own = binding.contexts.forVirtualService(virtualService);
  if (own === undefined || host === undefined) return false;
  if (own.policy === host.policy) return true;
  return own.access === host.access && binding.table.forVirtualService(virtualService)?.policy === host.policy;
}

/**
 * One snapshot's certificates, by SNI name and by VirtualService; never changed once built, so
 * a connection's handshake is judged against the table that was current at its ClientHello.
 */
export class TlsTable {
  private readonly exact: ReadonlyMap<string, TlsHost>;
  private readonly wildcard: ReadonlyMap<string, TlsHost>;
  private readonly fallback: TlsHost | undefined;
  private readonly byVirtualService: ReadonlyMap<string, TlsHost>;

  constructor(exact: ReadonlyMap<string, TlsHost>, wildcard: ReadonlyMap<string, TlsHost>, fallback: TlsHost | undefined, byVirtualService: ReadonlyMap<string, TlsHost>) {
    this.exact = exact;
    this.wildcard = wildcard;
    this.fallback = fallback;
    this.byVirtualService = byVirtualService;
  }

  /** The TLS host of VirtualService `namespace/name`, if it has TLS and its certificate loads. */
  forVirtualService(virtualService: string): TlsHost | undefined {
    return this.byVirtualService.get(virtualService);
  }

  /** The host serving SNI name `servername` (undefined: no SNI sent); case and one trailing dot do not matter. */
  hostFor(servername: string | undefined): TlsHost | undefined {
    if (servername) {
      const lower = servername.toLowerCase();
      const name = lower.endsWith('.') ? lower.slice(0, -1) : lower;
      const hit = this.exact.get(name);
      if (hit) return hit;
      const dot = name.indexOf('.');
      if (dot > 0) {
        const wild = this.wildcard.get(name.slice(dot));
        if (wild) return wild;
      }
    }
    return this.fallback;
  }

  /**
   * `tls.Server`'s SNICallback: the context of the name. The listener has already started the
   * handshake under that name's context (and client-certificate setting), chosen from the
   * ClientHello in this same table, and checks that this reading agrees (./listen.ts); this
   * keeps the certificate answer the same and fails names nobody serves.
   */
  sniCallback(servername: string, callback: (error: Error | null, context?: SecureContext) => void): void {
    const host = this.hostFor(servername);
    if (!host) return callback(new Error(`no certificate for "${servername}"`));
    callback(null, host.context);
  }
}

/**
 * The HTTPS listener's certificates, by SNI name, rebuilt from each config snapshot (so a
 * changed Secret or VirtualService takes effect on the next handshake, without a restart and
 * without touching open connections). A VirtualService's names are its `sniDomains`; one
 * without `sniDomains` is the default for names no other claims (and for clients that send no
 * SNI), as a Gloo filter chain without server names is. Wildcards (`*.example.com`) match one
 * label. A name nobody serves, with no default, fails the handshake.
 */
export class TlsContexts {
  /** The certificates of the last snapshot; replaced whole by each update. */
  private table = new TlsTable(new Map(), new Map(), undefined, new Map());
  /** Contexts by material, reused across snapshots: building one parses the key (~1 ms). */
  private built = new Map<string, SecureContext>();
  /** The host each VirtualService served last: a certificate that stops loading keeps the previous one serving. */
  private lastGood = new Map<string, TlsHost>();

  /** Number of VirtualServices with TLS in the last snapshot. */
  size = 0;

  private readonly onError: (vs: string, message: string) => void;

  /** `onError`: a VirtualService whose certificate no longer loads (a file changed since it was accepted). */
  constructor(onError: (vs: string, message: string) => void = () => {}) {
    this.onError = onError;
  }

  update(snapshot: ConfigSnapshot): void {
    const exact = new Map<string, TlsHost>();
    const wildcard = new Map<string, TlsHost>();
    const built = new Map<string, SecureContext>();
    let fallback: TlsHost | undefined;
    let size = 0;
    const lastGood = new Map<string, TlsHost>();
    const byVirtualService = new Map<string, TlsHost>();
    const vss = [...snapshot.resources.values()].filter((r): r is Resource<'VirtualService'> => r.kind === 'VirtualService' && r.spec.sslConfig !== undefined).sort((a, b) => a.key.localeCompare(b.key));
    for (const vs of vss) {
      const name = `${vs.namespace}/${vs.name}`;
      let host: TlsHost;
      try {
        const material = tlsMaterial(vs, (ref) => lookup(snapshot, 'Secret', ref, vs.namespace));
        const id = `${vs.version}|${material.cert}|${material.key}|${material.ca ?? ''}`;
        const options = secureContextOptions(vs, material);
        const context = this.built.get(id) ?? createSecureContext(options);
        built.set(id, context);
        const parameters = vs.spec.sslConfig!.parameters;
        const requireClientCert = material.ca !== undefined && vs.spec.sslConfig!.oneWayTls !== true;
        const minVersion = PROTOCOL_ORDER[tlsVersionName(parameters?.minimumProtocolVersion) ?? 'TLSv1.2']!;
        const maxVersion = PROTOCOL_ORDER[tlsVersionName(parameters?.maximumProtocolVersion) ?? 'TLSv1.3']!;
        const ciphers = parameters?.cipherSuites?.length ? new Set(cipherSuiteNames(parameters.cipherSuites)) : undefined;
        const access = JSON.stringify([material.ca ?? '', requireClientCert, minVersion, maxVersion, options.ciphers, options.ecdhCurve]);
        const policy = JSON.stringify([material.cert, material.key, access]);
        host = { context, options, requireClientCert, virtualService: name, minVersion, maxVersion, ciphers, policy, access };
      } catch (error) {
        // Load-time checks reject such a VirtualService, but a Secret or file it uses can change
        // under it: the certificate it served last keeps serving, and the problem is logged.
        this.onError(name, (error as Error).message);
        const previous = this.lastGood.get(vs.key);
        if (!previous) continue;
        host = previous;
      }
      lastGood.set(vs.key, host);
      byVirtualService.set(name, host);
      size++;
      const sni = vs.spec.sslConfig!.sniDomains;
      if (!sni || sni.length === 0) {
        fallback ??= host;
        continue;
      }
      for (const raw of sni) {
        const domain = raw.toLowerCase();
        if (domain === '*') fallback ??= host;
        else if (domain.startsWith('*.')) wildcard.has(domain.slice(1)) || wildcard.set(domain.slice(1), host);
        else exact.has(domain) || exact.set(domain, host);
      }
    }
    this.table = new TlsTable(exact, wildcard, fallback, byVirtualService);
    this.built = built;
    this.lastGood = lastGood;
    this.size = size;
  }

  /** The certificates of the last snapshot, as one immutable table (what a new connection's handshake runs under). */
  get current(): TlsTable {
    return this.table;
  }

  /** The TLS host of VirtualService `namespace/name` in the last snapshot, if it has TLS and its certificate loads. */
  forVirtualService(virtualService: string): TlsHost | undefined {
    return this.table.forVirtualService(virtualService);
  }

  /** The host serving SNI name `servername` in the last snapshot (undefined: no SNI sent); case and one trailing dot do not matter. */
  hostFor(servername: string | undefined): TlsHost | undefined {
    return this.table.hostFor(servername);
  }
}
