/**
 * `@gatehouse/plugin-sdk`: what a plugin imports. Only the contract (types and response
 * helpers, no dependencies), so a bundled plugin carries nothing else. The test kit is
 * `@gatehouse/plugin-sdk/testkit/index.ts`, the compiler `@gatehouse/plugin-sdk/build/index.ts`.
 */
export * from './contract/index.ts';
