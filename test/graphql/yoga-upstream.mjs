/**
 * A real graphql-yoga server (from npm) as the remote executor's upstream, run as its own process:
 * queries, a mutation, a slow field, subscriptions (graphql-ws over WebSocket and graphql-sse
 * are both answered by yoga itself through its SSE and the `ws` server below) and @defer/@stream.
 * Every answer carries set-cookie, cache-control and custom headers. Prints `{"port":N}` once
 * listening on 127.0.0.1 (port 0), then one JSON line per POST it receives (`{"body":...}`).
 *
 * Plain JavaScript on purpose: graphql-yoga's types pull the DOM lib into the type check.
 */
import { createServer } from 'node:http';
import { useDeferStream } from '@graphql-yoga/plugin-defer-stream';
import { createSchema, createYoga } from 'graphql-yoga';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer } from 'ws';

const typeDefs = /* GraphQL */ `
  type Query { hello(name: String!): String slow: String items: [String] ping: String boom: String }
  type Mutation { bump(by: Int!): Int }
  type Subscription { countdown(from: Int!): Int headerSeen: String }
`;

let counter = 0;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const yoga = createYoga({
  graphqlEndpoint: '/graphql',
  logging: false,
  maskedErrors: false,
  schema: createSchema({
    typeDefs,
    resolvers: {
      Query: {
        hello: (_, { name }) => `hello ${name}`,
        slow: () => sleep(3_000).then(() => 'late'),
        ping: () => sleep(200).then(() => 'pong'),
        boom: () => sleep(50).then(() => {
          throw new Error('connect to db at 10.1.2.3 as admin failed');
        }),
        items: async function* () {
          for (const item of ['a', 'b', 'c']) {
            await sleep(20);
            yield item;
          }
        },
      },
      Mutation: { bump: (_, { by }) => (counter += by) },
      Subscription: {
        countdown: {
          subscribe: async function* (_, { from }) {
            for (let i = from; i >= 0; i--) {
              await sleep(10);
              yield { countdown: i };
            }
          },
        },
        headerSeen: {
          subscribe: async function* (_, __, context) {
            // Over SSE: the fetch Request's headers; over graphql-ws: the upgrade request's.
            const fromHeaders = context.request?.headers?.get?.('x-user') ?? context.req?.headers?.['x-user'] ?? null;
            yield { headerSeen: fromHeaders };
          },
        },
      },
    },
  }),
  plugins: [
    useDeferStream(),
    {
      onResponse({ response }) {
        response.headers.append('set-cookie', 'session=abc; HttpOnly');
        response.headers.set('cache-control', 'private, max-age=5');
        response.headers.set('x-custom', 'passed');
        response.headers.set('x-internal', 'not-for-clients');
      },
    },
  ],
});

const server = createServer((req, res) => {
  if (req.method === 'POST') {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => process.stdout.write(`${JSON.stringify({ body: Buffer.concat(chunks).toString(), headers: req.headers })}\n`));
  }
  void yoga(req, res);
});

// graphql-ws over WebSocket on the same path (yoga's documented setup).
const wss = new WebSocketServer({ server, path: '/graphql' });
useServer(
  {
    execute: (args) => args.rootValue.execute(args),
    subscribe: (args) => args.rootValue.subscribe(args),
    onSubscribe: async (ctx, _id, params) => {
      const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({ ...ctx, req: ctx.extra.request, socket: ctx.extra.socket, params });
      const args = { schema, operationName: params.operationName, document: parse(params.query), variableValues: params.variables, contextValue: await contextFactory(), rootValue: { execute, subscribe } };
      const errors = validate(args.schema, args.document);
      if (errors.length) return errors;
      return args;
    },
  },
  wss,
);

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
