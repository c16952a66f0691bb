import { createSecureContext, type SecureVersion } from 'node:tls';

/**
 * Mozilla's "intermediate" server profile (v5.7): TLS 1.2 and 1.3, forward-secret AEAD suites
 * only, curves X25519, P-256, P-384. Its DHE suites are left out: they need Diffie-Hellman
 * parameters, which the gateway does not generate. The listener's default and each
 * VirtualService's unless `sslConfig.parameters` says otherwise.
 */
export const INTERMEDIATE_TLS12_CIPHERS: readonly string[] = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
];
/** TLS 1.3's suites (all AEAD and forward-secret; Envoy does not make them configurable either). */
export const TLS13_CIPHERS: readonly string[] = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'];
export const INTERMEDIATE_CURVES: readonly string[] = ['X25519', 'prime256v1', 'secp384r1'];

/** The HTTPS listener's own TLS options (Mozilla intermediate). */
export const DEFAULT_TLS_POLICY = Object.freeze({
  minVersion: 'TLSv1.2' as SecureVersion,
  ciphers: [...TLS13_CIPHERS, ...INTERMEDIATE_TLS12_CIPHERS].join(':'),
  ecdhCurve: INTERMEDIATE_CURVES.join(':'),
});

/** Gloo's cipher list entries as OpenSSL names: Envoy's equal-preference groups `[A|B]` flattened. */
export function cipherSuiteNames(entries: readonly string[]): string[] {
  return entries.flatMap((c) => c.replace(/^\[|\]$/g, '').split('|')).filter((c) => c !== '');
}

/** Whether OpenSSL knows cipher suite `name` (one name, not a cipher-string expression). */
export function isKnownCipher(name: string): boolean {
  if (!/^[A-Za-z0-9_-]+$/.test(name)) return false;
  try {
    createSecureContext({ ciphers: name });
    return true;
  } catch {
    return false;
  }
}

/** Whether OpenSSL knows curve (group) `name`: `X25519`, `P-256`, `prime256v1`… */
export function isKnownCurve(name: string): boolean {
  if (!/^[A-Za-z0-9_-]+$/.test(name)) return false;
  try {
    createSecureContext({ ecdhCurve: name });
    return true;
  } catch {
    return false;
  }
}

/** Gloo's protocol versions (`sslConfig.parameters`) by Node's names: the one table for listeners and upstreams. */
const VERSIONS: Record<string, SecureVersion | undefined> = { TLSv1_0: 'TLSv1', TLSv1_1: 'TLSv1.1', TLSv1_2: 'TLSv1.2', TLSv1_3: 'TLSv1.3', TLS_AUTO: undefined };

/** Node's name of a Gloo protocol version (`TLSv1_2` → `TLSv1.2`; `TLS_AUTO` and none → undefined). */
export function tlsVersionName(version: string | undefined): SecureVersion | undefined {
  return version ? VERSIONS[version] : undefined;
}

/** Protocol versions in order, as `TLSSocket.getProtocol()` names them. */
export const PROTOCOL_ORDER: Readonly<Record<string, number>> = { TLSv1: 10, 'TLSv1.1': 11, 'TLSv1.2': 12, 'TLSv1.3': 13 };

