import * as k8s from '@kubernetes/client-node';
// The client library's dispatcher is an undici Agent: it needs undici's own fetch (as its watches use), not Node's bundled copy.
import { fetch } from 'undici';

/** An answer from the API server: status and body text. */
export interface KubeAnswer {
  readonly status: number;
  readonly text: string;
}

/**
 * One request to the API server with the kubeconfig's credentials and TLS (the same
 * authentication and dispatcher the client library's watches use). The generated API classes
 * cover this too, but hide 404s and 409s in exceptions and need per-call middleware for patch
 * content types; lists, status patches and the Lease want those answers as data.
 */
export async function kubeRequest(config: k8s.KubeConfig, method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown, contentType = 'application/json'): Promise<KubeAnswer> {
  const cluster = config.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const ctx = new k8s.RequestContext(`${cluster.server}${path}`, method as k8s.HttpMethod);
  await config.applySecurityAuthentication(ctx);
  const headers: Record<string, string> = { ...ctx.getHeaders(), accept: 'application/json', ...(body !== undefined ? { 'content-type': contentType } : {}) };
  const response = await fetch(ctx.getUrl(), {
    method,
    headers,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    // The kubeconfig's CA and client certificate.
    ...({ dispatcher: ctx.getDispatcher() } as object),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: response.status, text: await response.text() };
}
