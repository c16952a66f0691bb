import type { ServerResponse } from 'node:http';
import type { RequestContext } from '../../proxy/context.ts';
import type { Admitted, GraphQLEndpoint } from '../execute/endpoint.ts';
import type { OperationBudget } from '../limits/limits.ts';

/**
 * GraphQL over Server-Sent Events, distinct-connections mode (the graphql-sse protocol): a POST
 * (or GET) with `Accept: text/event-stream` runs one operation and streams its results as
 * `event: next` events, then `event: complete`. A subscription streams its upstream's events (the
 * remote executor); a query or mutation gives one `next` (when the client accepts no JSON; else
 * it gets JSON). Everything before the stream (reading the body, limits, validation) answers as
 * an ordinary GraphQL request would, with a 4xx and JSON (GraphQLEndpoint.serve).
 */

/** Comment lines sent while a stream is quiet, so that proxies and clients do not time it out. */
const KEEP_ALIVE_MS = 12_000;

/** True when the client asks for an event stream (graphql-sse sends `Accept: text/event-stream`). */
export function wantsEventStream(accept: string | undefined): boolean {
  return accept !== undefined && /(^|,)\s*text\/event-stream\s*(;|,|$)/i.test(accept);
}

/**
 * Streams an admitted operation (see GraphQLEndpoint.admit) as `next` events, then `complete`;
 * returns when it is done or the client left (`signal`).
 */
export async function streamEvents(endpoint: GraphQLEndpoint, admitted: Admitted, res: ServerResponse, ctx: RequestContext, budget: OperationBudget, signal: AbortSignal): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
  res.flushHeaders();
  const keepAlive = setInterval(() => res.write(':\n\n'), KEEP_ALIVE_MS);
  keepAlive.unref();
  try {
    for await (const result of endpoint.stream(admitted, ctx, signal, budget)) {
      if (signal.aborted) break;
      // A client that does not read holds the upstream too (no event is pulled until this one is written).
      if (!res.write(`event: next\ndata: ${JSON.stringify(result)}\n\n`)) await drained(res);
    }
    if (!signal.aborted) res.end('event: complete\ndata:\n\n');
  } finally {
    clearInterval(keepAlive);
  }
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
