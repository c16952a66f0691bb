import { createSecureContext } from 'node:tls';
import { ConfigCodes, type Diagnostic } from '../diagnostic.ts';
import type { Resource } from '../resource.ts';
import type { CheckContext } from '../check-context.ts';
import { upstreamTls } from '../../tls/upstream-tls.ts';

/**
 * A `kubernetes.io/tls` Secret must hold a certificate and a key that load together (Kubernetes
 * checks the keys exist; a pair that does not match is caught here). A broken one is rejected
 * on its own, so the last good version keeps serving every VirtualService that uses it.
 */
export function checkSecret(resource: Resource<'Secret'>, ctx: CheckContext): Diagnostic[] {
  if (resource.spec.type !== 'kubernetes.io/tls') return [];
  const data = resource.spec.data;
  const missing = ['tls.crt', 'tls.key'].filter((key) => !Object.hasOwn(data, key));
  if (missing.length > 0) return [ctx.at(['data'], ConfigCodes.BAD_TLS, `a kubernetes.io/tls Secret needs ${missing.join(' and ')}`)];
  try {
    createSecureContext({ cert: data['tls.crt'], key: data['tls.key'], ...(data['ca.crt'] ? { ca: data['ca.crt'] } : {}) });
  } catch (error) {
    return [ctx.at(['data', 'tls.key'], ConfigCodes.BAD_TLS, `the certificate and key cannot be used together: ${(error as Error).message}`)];
  }
  return [];
}

/** An Upstream's TLS material loads (a bad CA or client key pair is a rejected Upstream, not failing requests later). */
export function checkUpstreamTls(resource: Resource<'Upstream'>, ctx: CheckContext): Diagnostic[] {
  const ssl = resource.spec.sslConfig;
  if (!ssl) return [];
  const secret = (ref: { name: string; namespace?: string }) => ctx.resources.get(`Secret/${ref.namespace ?? resource.namespace}/${ref.name}`) as Resource<'Secret'> | undefined;
  // A missing Secret is reported by the reference check.
  if (ssl.secretRef && !secret(ssl.secretRef)) return [];
  try {
    upstreamTls(resource, secret);
  } catch (error) {
    return [ctx.at(['spec', 'sslConfig', ssl.secretRef ? 'secretRef' : 'sslFiles'], ConfigCodes.BAD_TLS, `the TLS material cannot be used: ${(error as Error).message}`)];
  }
  return [];
}

// Upstream field checks live beside the Upstream's other rules; re-exported for the store.
export { checkUpstreamFields } from './upstream.ts';
