import { atob, btoa, TextDecoder, TextEncoder } from './encoding.ts';

/**
 * Defines the host-free part of the sandbox's Web platform subset (SPEC 5.3) on the isolate's
 * global: `TextEncoder`, `TextDecoder`, `atob`, `btoa` and `performance.now()`. Runs inside
 * the isolate before the plugin. `performance.now()` counts milliseconds since the isolate's
 * runtime started, at `Date.now()` resolution (coarse on purpose, as browsers coarsen it).
 */
export function installWebGlobals(): void {
  const define = (name: string, value: unknown) => Object.defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false });
  define('TextEncoder', TextEncoder);
  define('TextDecoder', TextDecoder);
  define('atob', atob);
  define('btoa', btoa);
  const now = Date.now;
  const origin = now();
  define('performance', Object.freeze({ now: () => now() - origin, timeOrigin: origin }));
}
