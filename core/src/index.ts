/**
 * `@gatehouse/core`'s entry point: the gateway version and the plugin host (what the SDK's test
 * kit runs sandboxed plugins in). Everything else is reached by path:
 * `@gatehouse/core/<folder>/<file>.ts` (the package's `./*` export).
 */
export { GATEWAY_VERSION } from './version.ts';
export * from './extauth/plugins/index.ts';
