import type { HostUrl } from '../host-api.ts';

// PLACEHOLDER (being written): URL and URLSearchParams for the sandbox.
/** Builds the sandbox's `URL` and `URLSearchParams` classes over the host's parser. Runs inside the isolate. */
export function createUrlClasses(hostUrl: HostUrl): { URL: unknown; URLSearchParams: unknown } {
  void hostUrl;
  return { URL: undefined, URLSearchParams: undefined };
}
