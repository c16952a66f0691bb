import { afterEach, describe, expect, test, vi } from 'vitest';
import { GONE, isPending } from './chain.ts';
import { faultOf } from './fault.ts';
import type { FilterRequest } from './http-filter.ts';

function request(signal: AbortSignal = new AbortController().signal): FilterRequest {
  return { signal } as FilterRequest;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('fault filter (Gloo faults)', () => {
  test('abort at 100% always answers with httpStatus, synchronously; at 0% never', () => {
    const always = faultOf({ abort: { percentage: 100, httpStatus: 418 } }, () => 0.999999);
    for (let i = 0; i < 50; i++) expect(always.onRequest!(request())).toEqual({ status: 418, code: 'GH_FAULT_ABORT', body: 'fault filter abort' });
    const never = faultOf({ abort: { percentage: 0, httpStatus: 418 } }, () => 0);
    for (let i = 0; i < 50; i++) expect(never.onRequest!(request())).toBeUndefined();
  });

  test('a percentage picks that share of requests', () => {
    let n = 0;
    const rolls = [0.1, 0.3, 0.5, 0.7, 0.9];
    const half = faultOf({ abort: { percentage: 50, httpStatus: 503 } }, () => rolls[n++ % rolls.length]!);
    const answered = rolls.map(() => half.onRequest!(request())).filter((v) => v !== undefined);
    // Rolls of 10 and 30 are under 50; 50, 70 and 90 are not.
    expect(answered).toHaveLength(2);
  });

  test('a delay at 100% waits fixedDelay, then the abort applies; 0% does not wait', async () => {
    vi.useFakeTimers();
    const filter = faultOf({ delay: { percentage: 100, fixedDelay: '2s' }, abort: { percentage: 100, httpStatus: 503 } });
    const verdict = filter.onRequest!(request());
    expect(isPending(verdict)).toBe(true);
    let settled = false;
    void (verdict as Promise<unknown>).then(() => (settled = true));
    await vi.advanceTimersByTimeAsync(1999);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await expect(verdict).resolves.toMatchObject({ status: 503 });
    const none = faultOf({ delay: { percentage: 0, fixedDelay: '2s' } });
    expect(none.onRequest!(request())).toBeUndefined();
    expect(vi.getTimerCount()).toBe(0);
  });

  test('a client that leaves during the delay ends it at once, and no timer is left behind', async () => {
    vi.useFakeTimers();
    const controller = new AbortController();
    const filter = faultOf({ delay: { percentage: 100, fixedDelay: '1h' } });
    const verdict = filter.onRequest!(request(controller.signal));
    expect(vi.getTimerCount()).toBe(1);
    controller.abort();
    await expect(verdict).resolves.toBe(GONE);
    expect(vi.getTimerCount()).toBe(0);
    // Already gone when the request arrives: no timer at all.
    await expect(filter.onRequest!(request(controller.signal))).resolves.toBe(GONE);
    expect(vi.getTimerCount()).toBe(0);
  });
});
