/** Schemas shared by the GraphQL bench servers and rows. */

/** The remote-executor upstream's schema (graphql-upstream.ts). */
export const BOOKS_SDL = `
  type Query { books: [Book!]!  book(id: ID!): Book }
  type Book { id: ID!  title: String!  author: String! }
`;

/** The REST-resolved schema (graphql-handwritten.ts, and the Gatehouse GraphQLApi with @resolve added). */
export const USERS_SDL = `
  type Query { user(id: ID!): User }
  type User { id: ID!  name: String  company: Company }
  type Company { id: ID!  name: String }
`;

/** The books the remote upstream answers with. */
export const BOOKS = Array.from({ length: 10 }, (_, i) => ({ id: `b${i}`, title: `Book ${i}`, author: `Author ${i % 3}` }));
