import { describe, expect, it } from 'vitest';
import { callTraceOf, createCallTracking, withTraceHeaders } from './call-trace.ts';

// The attribution rule of docs/tracing.md ("Plugin fetch") as a state machine; the end-to-end
// behaviour in a real isolate is core/src/extauth/plugins/call-trace.test.ts.

const TP = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('createCallTracking', () => {
  it('tags nothing before a traced call; the synchronous part is exact whatever else is in flight', () => {
    const t = createCallTracking();
    t.begin(undefined);
    expect(t.traced).toBe(false);
    expect(t.capture()).toBeUndefined();
    t.afterSync(undefined);
    const a = callTraceOf({ traceparent: TP })!;
    t.begin(a);
    expect(t.traced).toBe(true);
    // Two calls in flight: the synchronous part is still a's.
    expect(t.capture()).toBe(a);
    t.afterSync(a);
    // After it, with the first call still in flight: ambiguous.
    expect(t.capture()).toBeUndefined();
  });

  it('a continuation is its call only while that call runs alone', () => {
    const t = createCallTracking();
    const a = callTraceOf({ traceparent: TP, tracestate: 'k=v' })!;
    t.begin(a);
    t.afterSync(a);
    expect(t.capture()).toBe(a);
    const b = callTraceOf({ traceparent: TP })!;
    t.begin(b);
    t.afterSync(b);
    t.enter(a);
    expect(t.capture()).toBeUndefined();
    t.end(b);
    t.enter(a);
    expect(t.capture()).toBe(a);
    // Tagged with a call that answered: nothing, even alone.
    t.end(a);
    const c = callTraceOf({ traceparent: TP })!;
    t.begin(c);
    t.afterSync(c);
    t.enter(a);
    expect(t.capture()).toBeUndefined();
  });

  it('reads only a well-formed Trace', () => {
    expect(callTraceOf(undefined)).toBeUndefined();
    expect(callTraceOf({ traceparent: 7 })).toBeUndefined();
    expect(callTraceOf({ traceparent: 'x'.repeat(513) })).toBeUndefined();
    expect(callTraceOf({ traceparent: TP, tracestate: 5 })).toMatchObject({ traceparent: TP, tracestate: undefined, live: true });
  });
});

describe('withTraceHeaders', () => {
  const trace = callTraceOf({ traceparent: TP, tracestate: 'k=v' })!;
  it("adds traceparent and tracestate, keeps a plugin's own (any case), and leaves a fetch at the header limit alone", () => {
    expect(withTraceHeaders({ headers: [['x', '1']] }, trace).headers).toEqual([['x', '1'], ['traceparent', TP], ['tracestate', 'k=v']]);
    const own = { headers: [['TraceParent', 'mine']] };
    expect(withTraceHeaders(own, trace)).toBe(own);
    expect(withTraceHeaders({ headers: [['TraceState', 'mine=1']] }, trace).headers).toEqual([['TraceState', 'mine=1'], ['traceparent', TP]]);
    const full = { headers: Array.from({ length: 255 }, (_, i) => [`h${i}`, 'v']) };
    expect(withTraceHeaders(full, trace)).toBe(full);
    const odd = { headers: 'not a list' };
    expect(withTraceHeaders(odd, trace)).toBe(odd);
  });
});
