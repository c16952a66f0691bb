import { describe, expect, it } from 'vitest';
import type { RequestContext } from '../../proxy/context.ts';
import { traceHeaders } from './trace.ts';

const ctxWith = (headers: Record<string, string> = {}): RequestContext => ({ requestId: 'req-1', start: 0, virtualHost: 'vs', route: 'r', headers, logger: undefined as never, upstream: undefined, responseHeaders: undefined }) as RequestContext;
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

describe('traceHeaders', () => {
  it('starts a new trace per request without a traceparent: valid, distinct, non-zero ids, across random pool refills', () => {
    const traces = new Set<string>();
    const spans = new Set<string>();
    // 3,000 requests draw 72 KB of ids: the 4 KB pool is refilled many times.
    for (let i = 0; i < 3_000; i++) {
      const { traceparent, 'x-request-id': id } = traceHeaders(ctxWith());
      const match = TRACEPARENT.exec(traceparent);
      expect(match, traceparent).not.toBeNull();
      expect(match![1]).not.toBe('0'.repeat(32));
      expect(match![2]).not.toBe('0'.repeat(16));
      expect(match![3]).toBe('00');
      expect(id).toBe('req-1');
      traces.add(match![1]!);
      spans.add(match![2]!);
    }
    expect(traces.size).toBe(3_000);
    expect(spans.size).toBe(3_000);
  });

  it("keeps a valid incoming trace id and flags with a new parent id; one set per request", () => {
    const ctx = ctxWith({ traceparent: '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01' });
    const first = traceHeaders(ctx);
    const match = TRACEPARENT.exec(first.traceparent)!;
    expect(match[1]).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(match[2]).not.toBe('00f067aa0ba902b7');
    expect(match[3]).toBe('01');
    expect(traceHeaders(ctx)).toBe(first);
  });

  it('replaces an all-zero or malformed incoming traceparent with a new trace', () => {
    for (const bad of ['00-00000000000000000000000000000000-00f067aa0ba902b7-01', '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01', 'garbage']) {
      const match = TRACEPARENT.exec(traceHeaders(ctxWith({ traceparent: bad })).traceparent)!;
      expect(match[1]).not.toBe('4bf92f3577b34da6a3ce929d0e0e4736');
      expect(match[1]).not.toBe('0'.repeat(32));
      expect(match[3]).toBe('00');
    }
  });
});
