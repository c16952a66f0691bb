import { createSecureContext, type SecureContext, type SecureContextOptions, type SecureVersion } from 'node:tls';
import { readManifestFile } from '../config/read-relative.ts';
import type { Resource } from '../config/resource.ts';
import { lookup, type ConfigSnapshot } from '../config/store.ts';

/** A VirtualService's `sslConfig`, as compiled for the HTTPS listener. */
export interface TlsHost {
  readonly context: SecureContext;
  /** What `context` was built from: a client that sends no SNI gets it through the server's default context. */
  readonly options: SecureContextOptions;
  /** Clients must present a certificate signed by the config's root CA. */
  readonly requireClientCert: boolean;
  /** `namespace/name` of the VirtualService, for logs. */
  readonly virtualService: string;
  /**
   * Lowest protocol version accepted (`parameters.minimumProtocolVersion`). Checked after the
   * handshake: OpenSSL negotiates the version before the SNI callback switches certificates.
   */
  readonly minVersion: number;
}

/** Protocol versions in order, as `TLSSocket.getProtocol()` names them. */
export const PROTOCOL_ORDER: Readonly<Record<string, number>> = { TLSv1: 10, 'TLSv1.1': 11, 'TLSv1.2': 12, 'TLSv1.3': 13 };

/** The PEM material of an `sslConfig`, or why it cannot be had. */
export interface TlsMaterial {
  cert: string;
  key: string;
  ca?: string;
}

const VERSIONS: Record<string, SecureVersion | undefined> = { TLSv1_0: 'TLSv1', TLSv1_1: 'TLSv1.1', TLSv1_2: 'TLSv1.2', TLSv1_3: 'TLSv1.3', TLS_AUTO: undefined };

/**
 * Reads the certificate, key and root CA of `vs.spec.sslConfig`: a `kubernetes.io/tls` Secret
 * (`tls.crt`, `tls.key`, `ca.crt`) or files (relative paths from the manifest's directory).
 * Throws with a message naming what is missing.
 */
export function tlsMaterial(vs: Resource<'VirtualService'>, secret: (ref: { name: string; namespace?: string }) => Resource<'Secret'> | undefined): TlsMaterial {
  const ssl = vs.spec.sslConfig!;
  if (ssl.secretRef) {
    const found = secret(ssl.secretRef);
    if (!found) throw new Error(`Secret ${ssl.secretRef.namespace ?? vs.namespace}/${ssl.secretRef.name} is not served`);
    const data = found.spec.data;
    const missing = ['tls.crt', 'tls.key'].filter((k) => !Object.hasOwn(data, k));
    if (missing.length > 0) throw new Error(`Secret ${found.namespace}/${found.name} has no ${missing.join(' or ')} (a kubernetes.io/tls Secret holds both)`);
    return { cert: data['tls.crt']!, key: data['tls.key']!, ...(data['ca.crt'] ? { ca: data['ca.crt'] } : {}) };
  }
  const files = ssl.sslFiles!;
  const read = (field: string, path: string) => readManifestFile(vs.source.file, `sslFiles.${field}`, path);
  return { cert: read('tlsCert', files.tlsCert), key: read('tlsKey', files.tlsKey), ...(files.rootCa ? { ca: read('rootCa', files.rootCa) } : {}) };
}

/** A SecureContext for `material` and the config's protocol bounds; throws Node's reason (a key that does not match, a bad PEM). */
export function secureContextOf(vs: Resource<'VirtualService'>, material: TlsMaterial): SecureContext {
  return createSecureContext(secureContextOptions(vs, material));
}

/** Node's options for `material` and the config's protocol bounds. */
export function secureContextOptions(vs: Resource<'VirtualService'>, material: TlsMaterial): SecureContextOptions {
  const parameters = vs.spec.sslConfig!.parameters;
  const min = parameters?.minimumProtocolVersion ? VERSIONS[parameters.minimumProtocolVersion] : undefined;
  const max = parameters?.maximumProtocolVersion ? VERSIONS[parameters.maximumProtocolVersion] : undefined;
  return { cert: material.cert, key: material.key, ...(material.ca ? { ca: material.ca } : {}), minVersion: min ?? 'TLSv1.2', ...(max ? { maxVersion: max } : {}) };
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
  private exact = new Map<string, TlsHost>();
  private wildcard = new Map<string, TlsHost>();
  private fallback: TlsHost | undefined;
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
    const previousFallback = this.fallback;
    const exact = new Map<string, TlsHost>();
    const wildcard = new Map<string, TlsHost>();
    const built = new Map<string, SecureContext>();
    let fallback: TlsHost | undefined;
    let size = 0;
    const lastGood = new Map<string, TlsHost>();
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
        const min = vs.spec.sslConfig!.parameters?.minimumProtocolVersion;
        host = { context, options, requireClientCert: material.ca !== undefined && vs.spec.sslConfig!.oneWayTls !== true, virtualService: name, minVersion: PROTOCOL_ORDER[(min && VERSIONS[min]) || 'TLSv1.2']! };
      } catch (error) {
        // Load-time checks reject such a VirtualService, but a Secret or file it uses can change
        // under it: the certificate it served last keeps serving, and the problem is logged.
        this.onError(name, (error as Error).message);
        const previous = this.lastGood.get(vs.key);
        if (!previous) continue;
        host = previous;
      }
      lastGood.set(vs.key, host);
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
    this.exact = exact;
    this.wildcard = wildcard;
    this.fallback = fallback;
    this.built = built;
    this.lastGood = lastGood;
    this.size = size;
    if (fallback?.context !== previousFallback?.context) for (const listener of this.fallbackListeners) listener(fallback);
  }

  private readonly fallbackListeners = new Set<(host: TlsHost | undefined) => void>();

  /**
   * Calls `listener` now and whenever the default certificate changes: the listener makes it the
   * server's own context, which is what a client that sends no SNI gets (Node's SNICallback only
   * runs for clients that send a name).
   */
  onFallback(listener: (host: TlsHost | undefined) => void): void {
    this.fallbackListeners.add(listener);
    listener(this.fallback);
  }

  /** The host serving SNI name `servername` (undefined: no SNI sent). */
  hostFor(servername: string | undefined): TlsHost | undefined {
    if (servername) {
      const name = servername.toLowerCase();
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

  /** `tls.Server`'s SNICallback. */
  readonly sniCallback = (servername: string, callback: (error: Error | null, context?: SecureContext) => void): void => {
    const host = this.hostFor(servername);
    if (host) callback(null, host.context);
    else callback(new Error(`no certificate for "${servername}"`));
  };
}
