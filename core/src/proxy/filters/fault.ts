import { durationMs } from '../../config/schema/common.ts';
import type { FaultsSpec } from '../../config/schema/virtual-service.ts';
import { GONE } from './chain.ts';
import { FilterStage, type FilterRequest, type FilterVerdict, type HttpFilter, type HttpFilterFactory, type LocalReply } from './http-filter.ts';

/**
 * Gloo's fault injection (`faults` on a route: `faultinjection.options.gloo.solo.io`, Envoy's
 * fault filter): a `delay` of `fixedDelay` for `percentage` of requests, then an `abort` with
 * `httpStatus` for `percentage` of them, before anything else runs (Gloo's FaultStage). A
 * client that leaves during a delay ends it at once (its timer is cleared).
 */
export const faultFilter: HttpFilterFactory = {
  name: 'fault',
  check(options, at, path) {
    const faults = options.faults as FaultsSpec | undefined;
    if (faults?.delay && faults.delay.fixedDelay === undefined) return [at([...path, 'faults', 'delay', 'fixedDelay'], 'GH_CONFIG_SCHEMA', 'a delay needs fixedDelay')];
    return [];
  },
  create({ routeOptions }) {
    const faults = routeOptions?.faults as FaultsSpec | undefined;
    if (!faults || (!faults.abort && !faults.delay)) return undefined;
    return faultOf(faults);
  },
};

/** `random()` below `percentage` (0–100): 100 always, 0 never. */
function chosen(percentage: number | undefined, random: () => number): boolean {
  const p = percentage ?? 0;
  return p >= 100 || (p > 0 && random() * 100 < p);
}

/** The fault filter for one route's `faults` (`random` for tests). */
export function faultOf(faults: FaultsSpec, random: () => number = Math.random): HttpFilter {
  const abort: LocalReply | undefined = faults.abort ? { status: faults.abort.httpStatus ?? 503, code: 'GH_FAULT_ABORT', body: 'fault filter abort' } : undefined;
  const delayMs = faults.delay?.fixedDelay !== undefined ? durationMs(faults.delay.fixedDelay) : 0;
  const aborted = (): FilterVerdict => (abort && chosen(faults.abort!.percentage, random) ? abort : undefined);
  return {
    name: 'fault',
    stage: FilterStage.fault,
    onRequest(request) {
      if (delayMs > 0 && chosen(faults.delay!.percentage, random)) return delay(request, delayMs).then((gone) => (gone ? GONE : aborted()));
      return aborted();
    },
  };
}

/** Waits `ms`; resolves true early when the client leaves (the timer is cleared). */
function delay(request: FilterRequest, ms: number): Promise<boolean> {
  const signal = request.signal;
  if (signal.aborted) return Promise.resolve(true);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(false);
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
