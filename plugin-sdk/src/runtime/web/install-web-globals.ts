import type { HostApi } from '../host-api.ts';
import { atob, btoa, TextDecoder, TextEncoder } from './encoding.ts';
import { Headers, Request, Response, useUrlClass } from './fetch-types.ts';
import { createRandom } from './random.ts';
import { structuredClone } from './structured-clone.ts';
import { createSubtle } from './subtle.ts';
import { createUrlClasses } from './url.ts';
import { AbortController, AbortSignal, DOMException } from './abort.ts';

/**
 * Defines the sandbox's Web platform subset (SPEC 5.3) on the isolate's global, from plain
 * JavaScript and the host's capabilities: `TextEncoder`, `TextDecoder`, `atob`, `btoa`,
 * `structuredClone`, `Headers`, `Request`, `Response`, `DOMException`, `AbortController`,
 * `AbortSignal`, `performance.now()`, and (given the
 * host's parts) `URL`/`URLSearchParams` and `crypto` (`getRandomValues`, `randomUUID`, `subtle`).
 * Runs inside the isolate before the plugin. `performance.now()` counts milliseconds since the
 * isolate's runtime started, at `Date.now()` resolution (coarse on purpose, as browsers coarsen it).
 */
export function installWebGlobals(host: Omit<HostApi, 'log'>): { resolveJobs: (results: readonly number[]) => void } {
  const define = (name: string, value: unknown) => {
    if (value !== undefined) Object.defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
  };
  define('TextEncoder', TextEncoder);
  define('TextDecoder', TextDecoder);
  define('atob', atob);
  define('btoa', btoa);
  define('structuredClone', structuredClone);
  define('Headers', Headers);
  define('Request', Request);
  define('Response', Response);
  define('DOMException', DOMException);
  define('AbortController', AbortController);
  define('AbortSignal', AbortSignal);
  const now = Date.now;
  const origin = now();
  define('performance', Object.freeze({ now: () => now() - origin, timeOrigin: origin }));
  if (host.url) {
    const { URL, URLSearchParams } = createUrlClasses(host.url);
    define('URL', URL);
    define('URLSearchParams', URLSearchParams);
    useUrlClass(URL as Parameters<typeof useUrlClass>[0]);
  }
  if (host.random) {
    const random = createRandom(host.random, atob);
    const subtle = host.crypto ? createSubtle(host.crypto, host.call) : undefined;
    define('crypto', Object.freeze({ ...random, ...(subtle ? { subtle: subtle.subtle } : {}) }));
    define('CryptoKey', subtle?.CryptoKey);
    if (subtle) return { resolveJobs: subtle.resolveJobs };
  }
  return { resolveJobs: () => {} };
}
