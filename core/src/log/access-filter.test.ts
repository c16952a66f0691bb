import type { IncomingMessage } from 'node:http';
import { describe, expect, test } from 'vitest';
import { compileAccessLogFilter, type FilterNotes } from './access-filter.ts';
import type { AccessEntry } from './access-log.ts';

const req = (url: string, headers: Record<string, string> = {}) => ({ method: 'GET', url, headers, socket: {} }) as unknown as IncomingMessage;
const entry = (extra: Partial<AccessEntry> = {}): AccessEntry => ({ reqId: 'r1', method: 'GET', path: '/p', status: 200, durationMs: 12, virtualHost: 'default/vs', route: 'main', upstream: 'http://10.0.0.7:8080', req: req('/p'), ...extra });

function compile(filter: unknown): { pass: (e: AccessEntry) => boolean; notes: FilterNotes } {
  const notes: FilterNotes = { errors: [], warnings: [] };
  return { pass: compileAccessLogFilter(filter, ['filter'], notes), notes };
}

describe('access log filters', () => {
  test("statusCodeFilter and durationFilter compare with EQ, GE, LE; runtimeKey warns and defaultValue applies (Gloo's guide)", () => {
    const { pass, notes } = compile({ statusCodeFilter: { comparison: { op: 'GE', value: { defaultValue: 400, runtimeKey: '400' } } } });
    expect([pass(entry({ status: 200 })), pass(entry({ status: 400 })), pass(entry({ status: 503 }))]).toEqual([false, true, true]);
    expect(notes.errors).toEqual([]);
    expect(notes.warnings).toEqual([{ path: ['filter', 'statusCodeFilter', 'comparison', 'value', 'runtimeKey'], message: expect.stringMatching(/^runtimeKey is not applied: .*defaultValue \(400\)/) }]);
    // Only a runtimeKey: defaultValue 0, so GE passes everything (Envoy without the key in its runtime).
    expect(compile({ statusCodeFilter: { comparison: { op: 'GE', value: { runtimeKey: 'access_log_status_filter' } } } }).pass(entry({ status: 200 }))).toBe(true);
    expect(compile({ statusCodeFilter: { comparison: { op: 0, value: { defaultValue: 404 } } } }).pass(entry({ status: 404 }))).toBe(true);
    const slow = compile({ durationFilter: { comparison: { op: 'LE', value: { defaultValue: 10 } } } }).pass;
    expect([slow(entry({ durationMs: 9.5 })), slow(entry({ durationMs: 12 }))]).toEqual([true, false]);
  });

  test('andFilter and orFilter combine; notHealthCheckFilter passes every request', () => {
    const errors = { statusCodeFilter: { comparison: { op: 'GE', value: { defaultValue: 500 } } } };
    const slow = { durationFilter: { comparison: { op: 'GE', value: { defaultValue: 1000 } } } };
    const or = compile({ orFilter: { filters: [errors, slow] } }).pass;
    const and = compile({ andFilter: { filters: [errors, { notHealthCheckFilter: {} }] } }).pass;
    expect([or(entry()), or(entry({ status: 502 })), or(entry({ durationMs: 2000 }))]).toEqual([false, true, true]);
    expect([and(entry()), and(entry({ status: 502 }))]).toEqual([false, true]);
  });

  test(':path is the path sent upstream; x-envoy-original-path is the client path when a rewrite changed it', () => {
    const rewritten = entry({ req: req('/httpbin/get'), upstreamPath: '/get' });
    const plain = entry({ req: req('/other'), upstreamPath: '/other' });
    const path = compile({ headerFilter: { header: { name: ':path', exactMatch: '/get' } } }).pass;
    expect([path(rewritten), path(plain)]).toEqual([true, false]);
    const original = compile({ headerFilter: { header: { invertMatch: true, name: 'X-ENVOY-ORIGINAL-PATH', prefixMatch: '/httpbin/get' } } }).pass;
    // Inverted, but an absent header does not match (Envoy): neither is logged.
    expect([original(rewritten), original(plain)]).toEqual([false, false]);
    expect(original(entry({ req: req('/v1/x'), upstreamPath: '/x' }))).toBe(true);
  });

  test('header matchers: exact, suffix, contains, regex, range, present, stringMatch', () => {
    const e = entry({ req: req('/p', { 'x-team': 'payments-eu', 'x-n': '42' }) });
    const matches = (header: object) => compile({ headerFilter: { header } }).pass(e);
    expect(matches({ name: 'x-team', exactMatch: 'payments-eu' })).toBe(true);
    expect(matches({ name: 'x-team', suffixMatch: '-eu' })).toBe(true);
    expect(matches({ name: 'x-team', containsMatch: 'ments' })).toBe(true);
    expect(matches({ name: 'x-team', safeRegexMatch: { regex: 'pay.*' } })).toBe(true);
    expect(matches({ name: 'x-team', safeRegexMatch: { regex: 'pay' } })).toBe(false);
    expect(matches({ name: 'x-n', rangeMatch: { start: 40, end: 43 } })).toBe(true);
    expect(matches({ name: 'x-n', rangeMatch: { start: 40, end: 42 } })).toBe(false);
    expect(matches({ name: 'x-none', presentMatch: false })).toBe(true);
    expect(matches({ name: 'x-none', presentMatch: true, invertMatch: true })).toBe(true);
    expect(matches({ name: 'x-team' })).toBe(true);
    expect(matches({ name: 'x-team', stringMatch: { prefix: 'PAY', ignoreCase: true } })).toBe(true);
  });

  test('filters Gatehouse cannot evaluate warn by name; responseFlagFilter passes nothing', () => {
    const flags = compile({ responseFlagFilter: { flags: ['UH'] } });
    expect(flags.pass(entry())).toBe(false);
    expect(flags.notes.warnings[0]!.path).toEqual(['filter', 'responseFlagFilter']);
    for (const kind of ['traceableFilter', 'grpcStatusFilter']) {
      const c = compile({ [kind]: {} });
      expect(c.pass(entry())).toBe(true);
      expect(c.notes.warnings[0]!.message).toMatch(new RegExp(`^${kind} is not applied`));
    }
    const sampled = compile({ runtimeFilter: { runtimeKey: 'k', percentSampled: { numerator: 0 } } });
    expect(sampled.pass(entry())).toBe(false);
    expect(compile({ runtimeFilter: { runtimeKey: 'k', percentSampled: { numerator: 100, denominator: 'HUNDRED' } } }).pass(entry())).toBe(true);
  });

  test('a malformed filter is an error at its path', () => {
    const errorsOf = (f: unknown) => compile(f).notes.errors.map((e) => e.path.join('.'));
    expect(errorsOf({ bogusFilter: {} })).toEqual(['filter.bogusFilter']);
    expect(errorsOf({ statusCodeFilter: {}, durationFilter: {} })).toEqual(['filter']);
    expect(errorsOf({ statusCodeFilter: { comparison: { op: 'GT', value: { defaultValue: 1 } } } })).toEqual(['filter.statusCodeFilter.comparison.op']);
    expect(errorsOf({ statusCodeFilter: { comparison: { op: 'GE', value: { defaultValue: -1 } } } })).toEqual(['filter.statusCodeFilter.comparison.value.defaultValue']);
    expect(errorsOf({ andFilter: { filters: [{ notHealthCheckFilter: {} }] } })).toEqual(['filter.andFilter.filters']);
    expect(errorsOf({ orFilter: { filters: [{ notHealthCheckFilter: {} }, { headerFilter: { header: { name: 'x', safeRegexMatch: { regex: '(' } } } }] } })).toEqual(['filter.orFilter.filters.1.headerFilter.header.safeRegexMatch.regex']);
    expect(errorsOf({ headerFilter: { header: { name: 'x', exactMatch: 'a', prefixMatch: 'b' } } })).toEqual(['filter.headerFilter.header']);
    // Nesting is bounded.
    let deep: object = { notHealthCheckFilter: {} };
    for (let i = 0; i < 20; i++) deep = { andFilter: { filters: [deep, { notHealthCheckFilter: {} }] } };
    expect(compile(deep).notes.errors.length).toBe(1);
  });
});
