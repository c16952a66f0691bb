import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestContext } from '../../proxy/context.ts';
import type { GraphQLEndpoint } from '../endpoint.ts';
import { clientGone } from '../endpoint.ts';
import { readParams, RequestFailure, sendAnswer, sendErrors } from '../http.ts';
import { OperationBudget } from '../limits.ts';

/**
 * GraphQL over Server-Sent Events, distinct-connections mode (the graphql-sse protocol): a POST
 * (or GET) with `Accept: text/event-stream` runs one operation and streams its results as
 * `event: next` events, then `event: complete`. A subscription streams its upstream's events (the
 * remote executor); a query or mutation gives one `next`. Everything before the stream (reading
 * the body, limits, validation) answers as an ordinary GraphQL request would, with a 4xx and JSON.
 */

/** Comment lines sent while a stream is quiet, so that proxies and clients do not time it out. */
const KEEP_ALIVE_MS = 12_000;

/** True when the client asks for an event stream (graphql-sse sends `Accept: text/event-stream`). */
export function wantsEventStream(accept: string | undefined): boolean {
  return accept !== undefined && /(^|,)\s*text\/event-stream\s*(;|,|$)/i.test(accept);
}

/** Serves one request of GraphQL over SSE; never throws. */
export async function serveEventStream(endpoint: GraphQLEndpoint, req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
  const read = await readParams(req);
  if (read instanceof RequestFailure) return sendErrors(res, read.status, 'application/json', [{ message: read.message }], read.headers);
  if ('batch' in read) return sendErrors(res, 400, 'application/json', [{ message: 'a batch cannot be answered as an event stream; send one operation' }]);
  const budget = new OperationBudget(endpoint.apiLimits);
  try {
    const admitted = endpoint.admit(read, req.method, budget);
    if (!('operation' in admitted)) return sendAnswer(res, 'application/json', admitted);
    const signal = clientGone(res);
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
  } finally {
    budget.release();
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
