import type { ExecutionResult } from 'graphql';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import type { RequestContext } from '../../proxy/context.ts';
import type { UpstreamCluster } from '../../proxy/upstream/upstream-cluster.ts';
import { FieldErrorCodes } from '../compile/errors.ts';
import type { RequestParams } from '../execute/http.ts';
import { LimitCodes } from '../limits/limits.ts';
import { maskResult } from '../limits/mask-errors.ts';

/**
 * The remote executor's subscriptions over graphql-ws (`executor.remote.subscriptionProtocol:
 * graphql-ws`), for upstreams that serve subscriptions only on a WebSocket (Apollo Server): one
 * WebSocket per subscription to the upstream's path (`ws://`, or `wss://` for a TLS Upstream,
 * verified against the system CAs with the Upstream's server name), with the executor's headers
 * on the handshake. Same contract as the SSE transport: results masked, an upstream message over
 * `maxEventBytes` closes it (1009) and ends the stream with an error, no message for `idleMs`
 * ends it with UPSTREAM_TIMEOUT, `signal` (the client left) closes it at once.
 */
export async function* streamOverWebSocket(
  remote: { upstreamCall(ctx: RequestContext): { cluster: UpstreamCluster; headers: Readonly<Record<string, string>>; path: string; timeoutMs: number } },
  params: RequestParams,
  ctx: RequestContext,
  signal: AbortSignal,
  maxEventBytes: number,
  idleMs: number,
  includeUpstreamErrors: boolean,
): AsyncGenerator<ExecutionResult> {
  const { cluster, headers, path, timeoutMs } = remote.upstreamCall(ctx);
  const host = cluster.pick();
  ctx.upstream = cluster.name;
  const { 'content-type': _type, accept: _accept, ...handshakeHeaders } = headers;
  const failed = (code: string, message: string): ExecutionResult => ({ errors: [{ message, extensions: { code } } as never] });
  const mask = (result: ExecutionResult): ExecutionResult => {
    if (!includeUpstreamErrors) maskResult(result as Record<string, unknown>, (errors) => ctx.logger.warn({ reqId: ctx.requestId, upstream: cluster.name, errors: JSON.stringify(errors).slice(0, 4096) }, 'GraphQL remote executor: upstream errors (masked for the client)'));
    return result;
  };
  let closeCode: number | undefined;
  class UpstreamSocket extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, { headers: handshakeHeaders, maxPayload: maxEventBytes, handshakeTimeout: timeoutMs, ...(host.servername ? { servername: host.servername } : {}) });
      this.once('close', (code: number) => (closeCode = code));
    }
  }
  const client = createClient({ url: `${host.origin.replace(/^http/, 'ws')}${path}`, webSocketImpl: UpstreamSocket, lazy: true, retryAttempts: 0, connectionAckWaitTimeout: timeoutMs });
  const iterator = client.iterate({ query: params.query, operationName: params.operationName ?? null, variables: params.variables ?? null, extensions: params.extensions ?? {} })[Symbol.asyncIterator]();
  // Wakes the loop when the client leaves or the upstream is idle too long.
  let wake: ((reason: 'aborted' | 'idle') => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  const onAbort = () => wake?.('aborted');
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    while (!signal.aborted) {
      const stop = new Promise<'aborted' | 'idle'>((resolve) => {
        wake = resolve;
        timer = setTimeout(() => resolve('idle'), idleMs);
      });
      let next: IteratorResult<ExecutionResult> | 'aborted' | 'idle';
      try {
        next = await Promise.race([iterator.next() as Promise<IteratorResult<ExecutionResult>>, stop]);
      } catch (error) {
        if (signal.aborted) return;
        // An `error` message: the upstream refused the operation (its GraphQL errors, masked).
        if (Array.isArray(error)) {
          yield mask({ errors: error });
          return;
        }
        if (closeCode === 1009) {
          yield failed(LimitCodes.RESPONSE_BYTES, `an event is larger than the ${maxEventBytes} bytes this API allows (limits.maxResponseBytes)`);
          return;
        }
        ctx.logger.warn({ reqId: ctx.requestId, err: error instanceof Error ? error : { code: (error as { code?: number }).code, reason: (error as { reason?: string }).reason }, upstream: cluster.name }, 'GraphQL remote executor: upstream WebSocket failed');
        yield failed(FieldErrorCodes.UPSTREAM_ERROR, 'the upstream GraphQL server closed the subscription');
        return;
      } finally {
        clearTimeout(timer);
      }
      if (next === 'aborted') return;
      if (next === 'idle') {
        yield failed(FieldErrorCodes.UPSTREAM_TIMEOUT, `the upstream GraphQL server sent nothing for ${idleMs}ms`);
        return;
      }
      if (next.done) return;
      yield mask(next.value);
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    void iterator.return?.();
    void client.dispose();
  }
}
