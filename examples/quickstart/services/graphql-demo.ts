import { buildSchema, graphql } from 'graphql';
import { createServer } from 'node:http';

/** A GraphQL server (graphql-js over node:http) on 127.0.0.1:9104: the quickstart's remote executor upstream. */
export const BOOKS_SDL = /* GraphQL */ `
  type Query {
    books: [Book!]!
    book(id: ID!): Book
  }
  type Mutation {
    addBook(title: String!, author: String!): Book!
  }
  type Book {
    id: ID!
    title: String!
    author: String!
  }
`;

export default async function start() {
  const schema = buildSchema(BOOKS_SDL);
  const books = [
    { id: 'b1', title: 'Sketch of the Analytical Engine', author: 'Ada Lovelace' },
    { id: 'b2', title: 'On Computable Numbers', author: 'Alan Turing' },
  ];
  const rootValue = {
    books: () => books,
    book: ({ id }: { id: string }) => books.find((b) => b.id === id) ?? null,
    addBook: ({ title, author }: { title: string; author: string }) => {
      const book = { id: `b${books.length + 1}`, title, author };
      books.push(book);
      return book;
    },
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      let body: { query?: string; variables?: Record<string, unknown>; operationName?: string };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString() || '{}');
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' }).end('{"errors":[{"message":"bad JSON"}]}');
        return;
      }
      const result = await graphql({ schema, source: body.query ?? '', variableValues: body.variables ?? null, operationName: body.operationName ?? null, rootValue });
      const text = JSON.stringify(result);
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) }).end(text);
    });
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(9104, '127.0.0.1', resolve));
  return { name: 'graphql-demo', url: 'http://127.0.0.1:9104/graphql', close: () => new Promise<void>((r) => server.close(() => r())) };
}
