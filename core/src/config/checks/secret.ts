import { createSecureContext } from 'node:tls';
import { ConfigCodes, type Diagnostic } from '../diagnostic.ts';
import type { Resource } from '../resource.ts';
import type { CheckContext } from '../store.ts';
import { upstreamTls } from '../../proxy/upstream-cluster.ts';

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

/** Gloo Upstream fields accepted but not enforced say so; a gRPC health check needs HTTP/2. */
export function checkUpstreamFields(resource: Resource<'Upstream'>, ctx: CheckContext): Diagnostic[] {
  const out: Diagnostic[] = [];
  const breakers = resource.spec.circuitBreakers;
  if (resource.spec.kube?.selector && Object.keys(resource.spec.kube.selector).length > 0) {
    out.push(ctx.at(['spec', 'kube', 'selector'], ConfigCodes.IGNORED, 'selector is not applied: the service is reached through cluster DNS, so every pod behind it gets traffic (Gloo picks the matching pods from the endpoints)', 'warning'));
  }
  resource.spec.healthChecks?.forEach((check, i) => {
    // gRPC runs over HTTP/2: Envoy refuses a gRPC health check on a cluster without it too.
    if (check.grpcHealthCheck && !resource.spec.useHttp2) out.push(ctx.at(['spec', 'healthChecks', i, 'grpcHealthCheck'], ConfigCodes.INVALID, 'a gRPC health check needs useHttp2: true (gRPC runs over HTTP/2)'));
  });
  for (const field of ['maxRequests', 'maxRetries'] as const) {
    if (breakers?.[field] !== undefined) out.push(ctx.at(['spec', 'circuitBreakers', field], ConfigCodes.IGNORED, `${field} is not enforced (HTTP/1.1 pools bound requests by maxConnections + maxPendingRequests; retries by the route's numRetries)`, 'warning'));
  }
  return out;
}
