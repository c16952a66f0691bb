import { createSecureContext, type SecureContext, type SecureContextOptions } from 'node:tls';
import { readManifestFile } from '../config/read-relative.ts';
import type { Resource } from '../config/resource.ts';
import { cipherSuiteNames, INTERMEDIATE_CURVES, INTERMEDIATE_TLS12_CIPHERS, TLS13_CIPHERS, tlsVersionName } from './policy.ts';

/** The PEM material of an `sslConfig`, or why it cannot be had. */
export interface TlsMaterial {
  cert: string;
  key: string;
  ca?: string;
}

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

/** Node's options for `material` and the config's parameters (versions, suites, curves; Mozilla intermediate where unset). */
export function secureContextOptions(vs: Resource<'VirtualService'>, material: TlsMaterial): SecureContextOptions {
  const parameters = vs.spec.sslConfig!.parameters;
  const min = tlsVersionName(parameters?.minimumProtocolVersion);
  const max = tlsVersionName(parameters?.maximumProtocolVersion);
  const suites = parameters?.cipherSuites?.length ? cipherSuiteNames(parameters.cipherSuites) : INTERMEDIATE_TLS12_CIPHERS;
  const curves = parameters?.ecdhCurves?.length ? parameters.ecdhCurves : INTERMEDIATE_CURVES;
  return {
    cert: material.cert,
    key: material.key,
    ...(material.ca ? { ca: material.ca } : {}),
    minVersion: min ?? 'TLSv1.2',
    ...(max ? { maxVersion: max } : {}),
    ciphers: [...TLS13_CIPHERS, ...suites].join(':'),
    ecdhCurve: curves.join(':'),
  };
}

