import type { HostCrypto } from '../host-api.ts';

// PLACEHOLDER (being written): the host half of crypto.subtle.
/** The host's half of `crypto.subtle`: one synchronous dispatcher over node:crypto. */
export function createHostCrypto(): HostCrypto {
  return (op: string) => {
    throw new TypeError(`crypto operation ${op} is not supported`);
  };
}
