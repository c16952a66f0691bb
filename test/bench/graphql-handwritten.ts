// The baseline of the REST-resolver row: a hand-written GraphQL server (graphql-js + undici)
// making the same REST calls as the Gatehouse GraphQLApi. Parsed and validated documents are
// cached by query text, as any tuned server does. Usage: node graphql-handwritten.ts REST_URL
import { buildSchema, execute, parse, validate, type DocumentNode } from 'graphql';
import { createServer } from 'node:http';
import { Pool } from 'undici';
import { USERS_SDL } from './graphql-schemas.ts';
const pool = new Pool(process.argv[2] ?? 'http://127.0.0.1:9101', { connections: 128 });
const getJson = async (path: string) => {
  const { statusCode, body } = await pool.request({ method: 'GET', path, headers: { accept: 'application/json' } });
  if (statusCode !== 200) {
    await body.dump();
    throw new Error(`upstream answered ${statusCode}`);
  }
  return body.json();
};
const schema = buildSchema(USERS_SDL);
const resolvers = {
  Query: { user: (_: unknown, { id }: { id: string }) => getJson(`/users/${encodeURIComponent(id)}`) },
  User: { company: (user: { companyId: string }) => getJson(`/companies/${encodeURIComponent(user.companyId)}`) },
};
for (const [type, fields] of Object.entries(resolvers)) {
  const object = schema.getType(type) as unknown as { getFields(): Record<string, { resolve?: unknown }> };
  for (const [name, resolve] of Object.entries(fields)) object.getFields()[name]!.resolve = resolve;
}
const documents = new Map<string, DocumentNode>();

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', async () => {
    const body = JSON.parse(Buffer.concat(chunks).toString());
    let document = documents.get(body.query);
    if (!document) {
      document = parse(body.query);
      const errors = validate(schema, document);
      if (errors.length) return void res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ errors }));
      documents.set(body.query, document);
    }
    const result = await execute({ schema, document, variableValues: body.variables, operationName: body.operationName });
    const text = JSON.stringify(result);
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) }).end(text);
  });
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ msg: 'listening', port: (server.address() as { port: number }).port })));
