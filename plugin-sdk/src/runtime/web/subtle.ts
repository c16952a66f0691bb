import type { HostCrypto } from '../host-api.ts';

// PLACEHOLDER (being written): crypto.subtle over the host's node:crypto.
/** Builds the sandbox's `crypto.subtle` over the host's crypto callback. Runs inside the isolate. */
export function createSubtle(hostCrypto: HostCrypto): object {
  void hostCrypto;
  return Object.freeze({});
}
