import { createSecureContext, type SecureVersion } from 'node:tls';
import { readManifestFile } from '../config/read-relative.ts';
import type { Resource } from '../config/resource.ts';
import { cipherSuiteNames, tlsVersionName } from './policy.ts';

/** TLS to an upstream's hosts: verified against `ca` (or the system's CAs), with an optional client certificate. */
export interface UpstreamTls {
  ca?: string;
  cert?: string;
  key?: string;
  /** Server name sent (SNI) and verified; default the host's addr. */
  servername?: string;
  /** `sslConfig.parameters`: OpenSSL cipher list, curves, protocol versions. */
  ciphers?: string;
  ecdhCurve?: string;
  minVersion?: SecureVersion;
  maxVersion?: SecureVersion;
}

/**
 * Whether and how an Upstream dials TLS (SPEC 3.2.1, Gloo): `sslConfig` or `useTls: true` or
 * port 443 (unless `useTls: false`). Its material comes from the Secret (`tls.crt`, `tls.key`,
 * `ca.crt`) or files (relative to the manifest). Throws a plain message naming what is missing.
 */
export function upstreamTls(upstream: Resource<'Upstream'>, secret: (ref: { name: string; namespace?: string }) => Resource<'Secret'> | undefined): UpstreamTls | undefined {
  const spec = upstream.spec;
  const ssl = spec.sslConfig;
  const on = spec.static?.useTls ?? (ssl !== undefined || (spec.static ? spec.static.hosts.every((h) => h.port === 443) : spec.kube!.servicePort === 443));
  if (!on) return undefined;
  const out: UpstreamTls = {};
  if (ssl?.sni) out.servername = ssl.sni;
  const parameters = ssl?.parameters;
  // Envoy (BoringSSL) writes equal-preference groups as `[A|B]`; OpenSSL takes the plain list.
  if (parameters?.cipherSuites?.length) out.ciphers = cipherSuiteNames(parameters.cipherSuites).join(':');
  if (parameters?.ecdhCurves?.length) out.ecdhCurve = parameters.ecdhCurves.join(':');
  const min = tlsVersionName(parameters?.minimumProtocolVersion);
  const max = tlsVersionName(parameters?.maximumProtocolVersion);
  if (min) out.minVersion = min;
  if (max) out.maxVersion = max;
  if (ssl?.secretRef) {
    const found = secret(ssl.secretRef);
    if (!found) throw new Error(`Secret ${ssl.secretRef.namespace ?? upstream.namespace}/${ssl.secretRef.name} is not served`);
    const data = found.spec.data;
    if (data['ca.crt']) out.ca = data['ca.crt'];
    if (data['tls.crt'] || data['tls.key']) {
      if (!data['tls.crt'] || !data['tls.key']) throw new Error(`Secret ${found.namespace}/${found.name} holds only one of tls.crt and tls.key`);
      out.cert = data['tls.crt'];
      out.key = data['tls.key'];
    }
  } else if (ssl?.sslFiles) {
    const read = (field: string, path: string) => readManifestFile(upstream.source.file, `sslFiles.${field}`, path);
    const files = ssl.sslFiles;
    if (files.rootCa) out.ca = read('rootCa', files.rootCa);
    if (files.tlsCert || files.tlsKey) {
      if (!files.tlsCert || !files.tlsKey) throw new Error('sslFiles needs both tlsCert and tlsKey for a client certificate');
      out.cert = read('tlsCert', files.tlsCert);
      out.key = read('tlsKey', files.tlsKey);
    }
  }
  // Loads (and pairs) the material now, so a bad one is a load-time error, not a failed request.
  createSecureContext({ ...(out.ca ? { ca: out.ca } : {}), ...(out.cert ? { cert: out.cert, key: out.key } : {}), ...tlsParameters(out) });
  return out;
}

/** The protocol and cipher settings of `sslConfig.parameters`, as Node TLS options. */
export function tlsParameters(tls: UpstreamTls): { ciphers?: string; ecdhCurve?: string; minVersion?: SecureVersion; maxVersion?: SecureVersion } {
  return { ...(tls.ciphers ? { ciphers: tls.ciphers } : {}), ...(tls.ecdhCurve ? { ecdhCurve: tls.ecdhCurve } : {}), ...(tls.minVersion ? { minVersion: tls.minVersion } : {}), ...(tls.maxVersion ? { maxVersion: tls.maxVersion } : {}) };
}
