import { atob, btoa, TextDecoder, TextEncoder } from './encoding.ts';
import { createRandom, type HostRandom } from './random.ts';

/**
 * Defines the host-free part of the sandbox's Web platform subset (SPEC 5.3) on the isolate's
 * global: `TextEncoder`, `TextDecoder`, `atob`, `btoa`, `performance.now()`, and (given the
 * host's random source) `crypto.getRandomValues` and `crypto.randomUUID`. Runs inside
 * the isolate before the plugin. `performance.now()` counts milliseconds since the isolate's
 * runtime started, at `Date.now()` resolution (coarse on purpose, as browsers coarsen it).
 */
export function installWebGlobals(hostRandom?: HostRandom): void {
  const define = (name: string, value: unknown) => Object.defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
  define('TextEncoder', TextEncoder);
  define('TextDecoder', TextDecoder);
  define('atob', atob);
  define('btoa', btoa);
  const now = Date.now;
  const origin = now();
  define('performance', Object.freeze({ now: () => now() - origin, timeOrigin: origin }));
  // crypto: the random parts only, for now (crypto.subtle is issue 10's next slice).
  if (hostRandom) define('crypto', Object.freeze(createRandom(hostRandom, atob)));
}
