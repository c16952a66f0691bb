import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { GraphQLError, type ExecutionArgs, type ExecutionResult, type FormattedExecutionResult, type GraphQLFormattedError } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import type { RequestContext } from '../../proxy/context.ts';
import type { Admitted, GraphQLEndpoint } from '../execute/endpoint.ts';
import type { RequestParams } from '../execute/http.ts';
import { LimitCodes, limitError, OperationBudget } from '../limits/limits.ts';

/**
 * graphql-ws (the `graphql-transport-ws` subprotocol) on a GraphQL route: the gateway has routed
 * and authorized the upgrade like any request; this takes the socket over. Every `subscribe`
 * message goes through the same checks as an HTTP request ({@link GraphQLEndpoint.admit}: the
 * safelist, every limit, validation) and runs as a stream ({@link GraphQLEndpoint.stream}):
 * subscriptions from the remote upstream, queries and mutations as one result. The protocol
 * itself (connection_init, ids, ping/pong, close codes) is graphql-ws's own server.
 *
 * Bounds: `limits.maxSubscriptionsPerConnection` operations at once (more are refused with an
 * `error` message, `GRAPHQL_LIMIT_SUBSCRIPTIONS`), `limits.maxMessageBytes` per client message
 * (larger: close 1009), `connection_init` within 10 s (close 4408), and a connection with no
 * operation and no message for `limits.subscriptionIdleTimeout` is closed (1001).
 */

/** How long a client may take to send `connection_init`. */
const CONNECTION_INIT_MS = 10_000;

/** What one running operation holds: its budget and the switch that stops its upstream stream. */
interface Running {
  readonly abort: AbortController;
  readonly budget: OperationBudget;
}

/** Per-socket state. */
interface Connection {
  readonly ctx: RequestContext;
  readonly running: Map<string, Running>;
  timer: NodeJS.Timeout | undefined;
}

/** What the gateway hands over with an upgrade: the request's context and the end-of-connection callback. */
const handedOver = new WeakMap<IncomingMessage, { ctx: RequestContext; done: () => void }>();

/** The graphql-ws server of one endpoint. */
export class SubscriptionServer {
  private readonly endpoint: GraphQLEndpoint;
  private readonly wss: WebSocketServer;
  private readonly connections = new Map<WebSocket, Connection>();

  constructor(endpoint: GraphQLEndpoint) {
    this.endpoint = endpoint;
    const limits = endpoint.apiLimits;
    this.wss = new WebSocketServer({ noServer: true, maxPayload: limits.maxMessageBytes, perMessageDeflate: false });
    this.wss.on('connection', (socket: WebSocket, req: IncomingMessage) => this.connected(socket, req));
    useServer<Record<string, unknown> | undefined, { connection?: Connection }>(
      {
        schema: endpoint.schema,
        connectionInitWaitTimeout: CONNECTION_INIT_MS,
        onSubscribe: (context, id, payload) => {
          const connection = this.connections.get(context.extra.socket);
          if (!connection) return [new GraphQLError('the connection is closing')];
          if (connection.running.size >= limits.maxSubscriptionsPerConnection) {
            endpoint.rejected();
            return [limitError(LimitCodes.SUBSCRIPTIONS, `this connection already runs ${connection.running.size} operations, the most this API allows (limits.maxSubscriptionsPerConnection)`)];
          }
          const budget = new OperationBudget(limits);
          const params: RequestParams = {
            query: payload.query,
            operationName: payload.operationName ?? undefined,
            variables: payload.variables ?? undefined,
            extensions: payload.extensions ?? undefined,
          };
          const admitted = endpoint.admit(params, 'POST', budget);
          if (!('operation' in admitted)) {
            budget.release();
            endpoint.rejected();
            const body = JSON.parse(admitted.body.toString()) as { errors: { message: string; extensions?: Record<string, unknown> }[] };
            return body.errors.map((e) => new GraphQLError(e.message, { extensions: e.extensions ?? {} }));
          }
          const running: Running = { abort: new AbortController(), budget };
          connection.running.set(id, running);
          this.touch(context.extra.socket, connection);
          const run: RunContext = { admitted, ctx: connection.ctx, running };
          return { schema: endpoint.schema, document: admitted.document, operationName: payload.operationName ?? null, variableValues: payload.variables ?? null, contextValue: run } satisfies ExecutionArgs;
        },
        // Results are already formatted (masked upstream JSON, serialized local results): sent as they are.
        onNext: (_context, _id, _payload, _args, result) => {
          const errors = result.errors?.map((e) => (typeof (e as Partial<GraphQLError>).toJSON === 'function' ? e.toJSON() : (e as unknown as GraphQLFormattedError)));
          return errors ? { ...result, errors } : (result as FormattedExecutionResult);
        },
        execute: (args) => this.run(args),
        subscribe: (args) => this.run(args),
        onComplete: (context, id) => this.finished(context.extra.socket, id),
        onError: (context, id) => this.finished(context.extra.socket, id),
      },
      this.wss,
    );
  }

  /**
   * Takes over an upgrade the gateway routed and authorized: `opened` runs when the WebSocket is
   * up (101), `done` once when the socket closes, whether or not the handshake succeeded (ws
   * answers a malformed one, e.g. without Sec-WebSocket-Key, with a 4xx itself).
   */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, ctx: RequestContext, opened: () => void, done: () => void): void {
    handedOver.set(req, { ctx, done });
    socket.once('close', () => {
      // The handshake failed: no connection took the request over.
      if (handedOver.delete(req)) done();
    });
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      opened();
      this.wss.emit('connection', ws, req);
    });
  }

  /** Closes every connection (the endpoint was replaced or the process stops) with 1001 and `reason`. */
  close(reason: string): void {
    for (const socket of this.connections.keys()) socket.close(1001, reason);
    this.wss.close();
  }

  private connected(socket: WebSocket, req: IncomingMessage): void {
    const handed = handedOver.get(req);
    if (!handed) {
      socket.terminate();
      return;
    }
    handedOver.delete(req);
    const connection: Connection = { ctx: handed.ctx, running: new Map(), timer: undefined };
    this.connections.set(socket, connection);
    socket.on('message', () => this.touch(socket, connection));
    socket.once('close', () => {
      clearTimeout(connection.timer);
      this.connections.delete(socket);
      for (const running of connection.running.values()) {
        running.abort.abort();
        running.budget.release();
      }
      connection.running.clear();
      handed.done();
    });
    this.touch(socket, connection);
  }

  /** Re-arms the idle timer: an idle connection (no operation, no message) is closed. */
  private touch(socket: WebSocket, connection: Connection): void {
    clearTimeout(connection.timer);
    const idleMs = this.endpoint.subscriptionIdleMs;
    connection.timer = setTimeout(() => {
      if (connection.running.size > 0) this.touch(socket, connection);
      else socket.close(1001, 'idle timeout');
    }, idleMs);
    connection.timer.unref();
  }

  private finished(socket: WebSocket, id: string): void {
    const connection = this.connections.get(socket);
    const running = connection?.running.get(id);
    if (!connection || !running) return;
    connection.running.delete(id);
    // Stops the upstream stream at once (an async generator's return() would wait for its next event).
    running.abort.abort();
    running.budget.release();
    this.touch(socket, connection);
  }

  private run(args: ExecutionArgs): AsyncGenerator<ExecutionResult> {
    const { admitted, ctx, running } = args.contextValue as RunContext;
    return this.endpoint.stream(admitted, ctx, running.abort.signal, running.budget);
  }
}

interface RunContext {
  readonly admitted: Admitted;
  readonly ctx: RequestContext;
  readonly running: Running;
}
