import { negotiate } from './http.ts';

/**
 * An auth denial on a GraphQL route as a GraphQL response (issue 25 finding 5): a client that
 * accepts `application/graphql-response+json` gets `{errors: [{message, extensions: {code}}]}` in
 * that media type, with the denial's status and other headers kept. Loads no GraphQL engine
 * (the proxy imports it for every denial).
 */
export function graphqlDenial<D extends { readonly status: number; readonly headers: readonly { readonly key: string; readonly value: string }[]; readonly body: string }>(
  accept: string | undefined,
  denial: D,
): D {
  if (negotiate(accept) !== 'application/graphql-response+json') return denial;
  const unauthenticated = denial.status === 401;
  const message = denial.body.trim().slice(0, 1024) || (unauthenticated ? 'unauthenticated' : 'forbidden');
  const body = JSON.stringify({ errors: [{ message, extensions: { code: unauthenticated ? 'UNAUTHENTICATED' : 'FORBIDDEN', http: { status: denial.status } } }] });
  const headers = denial.headers.filter((h) => h.key.toLowerCase() !== 'content-type');
  headers.push({ key: 'content-type', value: 'application/graphql-response+json; charset=utf-8' } as D['headers'][number]);
  return { ...denial, headers, body };
}
