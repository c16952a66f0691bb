import { readFileSync } from 'node:fs';

/**
 * The gateway version: the root package.json version (SPEC 1). Plugin builds and
 * plugin image tags must equal it exactly.
 */
export const GATEWAY_VERSION: string = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
