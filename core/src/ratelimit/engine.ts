import { createHash } from 'node:crypto';
import { Counter } from 'prom-client';
import { registry } from '../admin/metrics.ts';
import type { Logger } from '../log/logger.ts';
import { GatehouseError } from '../errors.ts';
import type { CounterBackend, CounterIncrement } from './backend.ts';
import { RateLimitCodes } from './codes.ts';
import { CONFIG_KEY, SET_DESCRIPTOR_VALUE, UNIT_SECONDS, unitOf, type DomainTable, type Limit, type RateLimitTables, type RateLimitUnit, type SetRule } from './compile.ts';

/** One entry of a request descriptor (Envoy's `RateLimitDescriptor.Entry`). */
export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

/** A request descriptor: ordered entries and Envoy's optional per-descriptor limit override. */
export interface RequestDescriptor {
  readonly entries: readonly DescriptorEntry[];
  readonly limit?: { readonly requestsPerUnit: number; readonly unit: RateLimitUnit | number | string } | undefined;
}

/** Envoy's `RateLimitResponse.Code` names. */
export type RateLimitCode = 'OK' | 'OVER_LIMIT';

/** Envoy's `RateLimitResponse.DescriptorStatus`, one per request descriptor, in order. */
export interface DescriptorStatus {
  readonly code: RateLimitCode;
  /** The limit that applied (absent: no rule matched, or a lower-weight rule was skipped). */
  readonly currentLimit?: { readonly name: string; readonly requestsPerUnit: number; readonly unit: RateLimitUnit } | undefined;
  readonly limitRemaining: number;
  /** Until the current window ends (with a limit only). */
  readonly durationUntilResetMs?: number | undefined;
}

/** The answer to one ShouldRateLimit. */
export interface RateLimitDecision {
  readonly overallCode: RateLimitCode;
  readonly statuses: readonly DescriptorStatus[];
  /**
   * What Envoy sets with `enable_x_ratelimit_headers: DRAFT_VERSION_03` (`x-ratelimit-limit`,
   * `-remaining`, `-reset`), plus `x-envoy-ratelimited: true` and `retry-after` when over the
   * limit: the headers the gateway side adds to its response. Empty when no limit applied.
   */
  readonly headers: Readonly<Record<string, string>>;
  /** Set when the counters could not be reached: the decision then follows `failOpen`. */
  readonly error?: { readonly code: string; readonly message: string } | undefined;
}

/** Decisions counted since the last scrape, by domain and result (a plain number per request; see {@link counted}). */
const unscraped = new Map<string, { readonly labels: { domain: string; result: string }; n: number }>();

/** Decisions by domain (served domains only: clients choose the domain) and result. */
const decisions = new Counter({
  name: 'gatehouse_ratelimit_decisions_total',
  help: 'Rate-limit decisions by domain and result (ok, over_limit, failed_open, failed_closed).',
  labelNames: ['domain', 'result'],
  registers: [registry],
  collect() {
    flushDecisions(this);
  },
});

function flushDecisions(counter: Counter<'domain' | 'result'>): void {
  for (const entry of unscraped.values()) {
    if (entry.n === 0) continue;
    counter.inc(entry.labels, entry.n);
    entry.n = 0;
  }
}

/**
 * Counts one decision. prom-client hashes the label set on every `inc`; the decision path adds
 * to a number instead, and the scrape hands the sums over.
 */
function counted(domain: string, result: string): { n: number } {
  const key = `${domain}\n${result}`;
  let entry = unscraped.get(key);
  if (!entry) {
    // Domains are the served ones (or 'other'): the map stays as small as the configuration.
    if (unscraped.size >= 4096) {
      flushDecisions(decisions);
      unscraped.clear();
    }
    unscraped.set(key, (entry = { labels: { domain, result }, n: 0 }));
  }
  return entry;
}

/** A decision whose `headers` are built when first read: the gateway's filter reads them only over the limit. */
function withLazyHeaders(overallCode: RateLimitCode, statuses: readonly DescriptorStatus[]): RateLimitDecision {
  let headers: Record<string, string> | undefined;
  return {
    overallCode,
    statuses,
    get headers() {
      headers ??= limitHeaders(statuses, overallCode);
      return headers;
    },
  };
}

/** Bounds on one request (hostile or buggy clients): beyond them the request is refused. */
export const REQUEST_LIMITS = { descriptors: 64, entries: 32, keyBytes: 1024, valueBytes: 4096 } as const;

/** Options of {@link RateLimitEngine}. */
export interface RateLimitEngineOptions {
  backend: CounterBackend;
  /** When the counters fail or time out: allow (true, the default, as Envoy's `failure_mode_deny: false` and Gloo's `denyOnFail: false`) or deny. */
  failOpen?: boolean;
  /** Longest wait for the counters, inside the caller's own deadline (default 500 ms). */
  timeoutMs?: number;
  /** Prefix of every counter key (default `gatehouse:rl:`), so one Redis can hold other data. */
  keyPrefix?: string;
  logger?: Logger;
  /** The clock (tests). */
  now?: () => number;
}

interface Match {
  readonly descriptor: number;
  readonly limit: Limit;
  readonly counterKey: string;
}

/**
 * The rate-limit decision engine: Envoy's `ShouldRateLimit(domain, descriptors, hitsAddend)`
 * against the compiled tables, with fixed-window counters as Envoy's reference service keeps
 * them. A window of `unit` starts at a multiple of its length since the Unix epoch (a MINUTE
 * window is one wall-clock minute), so every process sharing a backend agrees on it without
 * talking; a counter lives as long as its window. As in the reference service, a request over
 * the limit still counts (a client that keeps hammering stays limited until the window ends),
 * and `hitsAddend` 0 counts as 1.
 */
export class RateLimitEngine {
  /** Where the counters live; replaceable (new Redis credentials) without losing the tables. */
  backend: CounterBackend;
  readonly failOpen: boolean;
  #tables: RateLimitTables = new Map();
  readonly #timeoutMs: number;
  readonly #prefix: string;
  readonly #logger: Logger | undefined;
  readonly #now: () => number;
  #lastFailureLog = 0;

  constructor(options: RateLimitEngineOptions) {
    this.backend = options.backend;
    this.failOpen = options.failOpen ?? true;
    this.#timeoutMs = options.timeoutMs ?? 500;
    if (!(this.#timeoutMs > 0)) throw new RangeError(`timeoutMs must be positive, not ${options.timeoutMs}`);
    this.#prefix = options.keyPrefix ?? 'gatehouse:rl:';
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
  }

  /** Serves new tables (a config load); counters are kept: a changed limit applies to the current window. */
  update(tables: RateLimitTables): void {
    this.#tables = tables;
  }

  /** Domains served now. */
  get domains(): string[] {
    return [...this.#tables.keys()];
  }

  /**
   * Decides one request. Throws a GH_RATELIMIT_BAD_REQUEST GatehouseError for a malformed
   * request; never throws for a backend failure (that is the `error` of the decision).
   * `deadline` (epoch ms) is the caller's own, e.g. the gRPC call's.
   */
  async shouldRateLimit(domain: string, descriptors: readonly RequestDescriptor[], hitsAddend = 1, deadline?: number): Promise<RateLimitDecision> {
    return this.decide(domain, descriptors, hitsAddend, deadline);
  }

  /**
   * {@link shouldRateLimit}, answered synchronously when the counters can answer at once (memory,
   * or no rule applies): the gateway's filter then decides without a promise. Throws a
   * GH_RATELIMIT_BAD_REQUEST GatehouseError for a malformed request.
   */
  decide(domain: string, descriptors: readonly RequestDescriptor[], hitsAddend = 1, deadline?: number): RateLimitDecision | Promise<RateLimitDecision> {
    checkRequest(domain, descriptors, hitsAddend);
    const addend = hitsAddend === 0 ? 1 : hitsAddend;
    const table = this.#tables.get(domain);
    const label = table ? domain : 'other';
    const matches: Match[] = [];
    for (let index = 0; index < descriptors.length; index++) {
      for (const found of matchDescriptor(domain, table, descriptors[index]!, index)) matches.push(found);
    }
    // Gloo's rule priority: only the highest weight among the matched rules counts, plus alwaysApply rules.
    let top = 0;
    for (const m of matches) if (m.limit.weight > top) top = m.limit.weight;
    const applied = matches.filter((m) => m.limit.weight === top || m.limit.alwaysApply);
    if (applied.length === 0) {
      counted(label, 'ok').n++;
      return { overallCode: 'OK', statuses: descriptors.map(() => ({ code: 'OK', limitRemaining: 0 })), headers: {} };
    }

    const now = this.#now();
    const counters: CounterIncrement[] = applied.map((m) => {
      const windowStart = Math.floor(now / 1000 / m.limit.unitSeconds) * m.limit.unitSeconds;
      return { key: `${this.#prefix}${m.counterKey}:${m.limit.unitSeconds}:${windowStart}`, ttlSeconds: m.limit.unitSeconds };
    });
    const backend = this.backend;
    // Memory counters answer at once: no promise, no turn of the microtask queue.
    if (backend.incrementNow) return this.#decided(domain, label, descriptors, applied, backend.incrementNow(counters, addend), now);
    const own = now + this.#timeoutMs;
    let pending: Promise<number[]>;
    try {
      pending = backend.increment(counters, addend, deadline === undefined ? own : Math.min(own, deadline));
    } catch (error) {
      pending = Promise.reject(error);
    }
    return pending.then(
      (values) => this.#decided(domain, label, descriptors, applied, values, now),
      (error: unknown) => {
        counted(label, this.failOpen ? 'failed_open' : 'failed_closed').n++;
        return this.#failed(descriptors, applied, error as Error);
      },
    );
  }

  /** The decision from the counters' values after the addition (one per applied rule, in order). */
  #decided(domain: string, label: string, descriptors: readonly RequestDescriptor[], applied: readonly Match[], values: readonly number[], now: number): RateLimitDecision {
    const perDescriptor: (DescriptorStatus | undefined)[] = descriptors.map(() => undefined);
    applied.forEach((m, i) => {
      const after = values[i]!;
      const { limit } = m;
      const over = after > limit.requestsPerUnit;
      const windowEndMs = (Math.floor(now / 1000 / limit.unitSeconds) + 1) * limit.unitSeconds * 1000;
      const status: DescriptorStatus = {
        code: over && !limit.shadowMode ? 'OVER_LIMIT' : 'OK',
        currentLimit: { name: limit.name, requestsPerUnit: limit.requestsPerUnit, unit: limit.unit },
        limitRemaining: Math.max(limit.requestsPerUnit - after, 0),
        durationUntilResetMs: windowEndMs - now,
      };
      if (over && limit.shadowMode) this.#logger?.info({ domain, limit: limit.name }, 'rate limit exceeded in shadow mode');
      // Several set-style rules may apply to one descriptor: report the tightest.
      const previous = perDescriptor[m.descriptor];
      if (!previous || rank(status) < rank(previous)) perDescriptor[m.descriptor] = status;
    });
    const statuses = perDescriptor.map((s) => s ?? { code: 'OK' as const, limitRemaining: 0 });
    const overallCode = statuses.some((s) => s.code === 'OVER_LIMIT') ? 'OVER_LIMIT' : 'OK';
    counted(label, overallCode === 'OK' ? 'ok' : 'over_limit').n++;
    return withLazyHeaders(overallCode, statuses);
  }

  #failed(descriptors: readonly RequestDescriptor[], applied: readonly Match[], error: Error): RateLimitDecision {
    const cause = error instanceof GatehouseError ? error.code : undefined;
    const code = RateLimitCodes.BACKEND_UNAVAILABLE;
    const now = this.#now();
    // One line per 10 s: a dead Redis under load must not flood the log.
    if (now - this.#lastFailureLog > 10_000) {
      this.#lastFailureLog = now;
      this.#logger?.warn({ code, cause, err: error.message, backend: this.backend.kind, failOpen: this.failOpen }, 'rate-limit counters unavailable');
    }
    const limited = new Set(applied.map((m) => m.descriptor));
    const deny = !this.failOpen;
    const statuses: DescriptorStatus[] = descriptors.map((_, i) => ({ code: deny && limited.has(i) ? 'OVER_LIMIT' : 'OK', limitRemaining: 0 }));
    return {
      overallCode: deny ? 'OVER_LIMIT' : 'OK',
      statuses,
      headers: deny ? { 'x-envoy-ratelimited': 'true' } : {},
      error: { code, message: cause ? `${cause}: ${error.message}` : error.message },
    };
  }
}

/** Orders statuses: over the limit first, then the fewest remaining. */
function rank(status: DescriptorStatus): number {
  return status.code === 'OVER_LIMIT' ? -1 : status.limitRemaining;
}

function checkRequest(domain: string, descriptors: readonly RequestDescriptor[], hitsAddend: number): void {
  const bad = (message: string) => new GatehouseError(RateLimitCodes.BAD_REQUEST, message);
  if (typeof domain !== 'string' || domain.length === 0) throw bad('domain is required');
  if (domain.length > REQUEST_LIMITS.keyBytes) throw bad(`domain is longer than ${REQUEST_LIMITS.keyBytes} bytes`);
  if (!Number.isInteger(hitsAddend) || hitsAddend < 0 || hitsAddend > 4_294_967_295) throw bad('hits_addend must be a uint32');
  if (descriptors.length === 0) throw bad('at least one descriptor is required');
  if (descriptors.length > REQUEST_LIMITS.descriptors) throw bad(`at most ${REQUEST_LIMITS.descriptors} descriptors per request`);
  descriptors.forEach((d, i) => {
    if (d.entries.length === 0) throw bad(`descriptors[${i}] has no entries`);
    if (d.entries.length > REQUEST_LIMITS.entries) throw bad(`descriptors[${i}] has more than ${REQUEST_LIMITS.entries} entries`);
    d.entries.forEach((e, j) => {
      if (typeof e.key !== 'string' || e.key.length === 0) throw bad(`descriptors[${i}].entries[${j}].key is empty`);
      if (typeof e.value !== 'string') throw bad(`descriptors[${i}].entries[${j}].value is not a string`);
      if (e.key.length > REQUEST_LIMITS.keyBytes) throw bad(`descriptors[${i}].entries[${j}].key is longer than ${REQUEST_LIMITS.keyBytes}`);
      if (e.value.length > REQUEST_LIMITS.valueBytes) throw bad(`descriptors[${i}].entries[${j}].value is longer than ${REQUEST_LIMITS.valueBytes}`);
    });
  });
}

/** A counter's identity, bounded in size whatever the descriptor (header values can be long). */
function counterKey(parts: unknown): string {
  const text = JSON.stringify(parts);
  let key = counterKeys.get(text);
  if (key === undefined) {
    // Bounded whatever the clients send: a full cache starts again (hashing is the fallback, not a leak).
    if (counterKeys.size >= COUNTER_KEY_CACHE) counterKeys.clear();
    counterKeys.set(text, (key = createHash('sha256').update(text).digest('base64url').slice(0, 27)));
  }
  return key;
}

/** Hashed counter keys by their descriptor's JSON text: a request's descriptors repeat (one per client, per route). */
const counterKeys = new Map<string, string>();
const COUNTER_KEY_CACHE = 10_000;

/** The rules one request descriptor matches (raw: at most one; set-style: the first plus alwaysApply ones). */
function matchDescriptor(domain: string, table: DomainTable | undefined, descriptor: RequestDescriptor, index: number): Match[] {
  const { entries } = descriptor;
  // Envoy's limit override replaces whatever the tables say (the reference service's rule).
  const override = descriptor.limit ? overrideLimit(descriptor) : undefined;
  if (override) return [{ descriptor: index, limit: override, counterKey: counterKey([domain, entries.map((e) => [e.key, e.value])]) }];
  if (!table) return [];

  if (entries.some((e) => e.key === CONFIG_KEY && e.value === SET_DESCRIPTOR_VALUE)) {
    const out: Match[] = [];
    // The config is named by one of the other generic_key entries.
    for (const entry of entries) {
      if (entry.key !== CONFIG_KEY) continue;
      const rules = table.setRules.get(entry.value);
      if (rules) out.push(...matchSet(domain, rules, entries, index));
    }
    return out;
  }

  let level = table.tree;
  let limit: Limit | undefined;
  for (let i = 0; i < entries.length; i++) {
    const { key, value } = entries[i]!;
    const slot = level.byKey.get(key);
    const node = slot?.exact.get(value) ?? slot?.any;
    if (!node) break;
    if (i === entries.length - 1) limit = node.limit;
    if (!node.children) break;
    level = node.children;
  }
  if (!limit) return [];
  return [{ descriptor: index, limit, counterKey: counterKey([domain, entries.map((e) => [e.key, e.value])]) }];
}

function matchSet(domain: string, rules: readonly SetRule[], entries: readonly DescriptorEntry[], index: number): Match[] {
  const out: Match[] = [];
  // The request's values by key, built once: each rule entry is then one lookup (rules x entries stays linear).
  const byKey = new Map<string, string[]>();
  for (const e of entries) {
    const list = byKey.get(e.key);
    if (list) list.push(e.value);
    else byKey.set(e.key, [e.value]);
  }
  let first = true;
  for (const rule of rules) {
    if (!first && !rule.limit.alwaysApply) continue;
    const values: string[] = [];
    let ok = true;
    for (const wanted of rule.entries) {
      const present = byKey.get(wanted.key);
      const found = wanted.value === undefined ? present?.[0] : present?.includes(wanted.value) ? wanted.value : undefined;
      if (found === undefined) {
        ok = false;
        break;
      }
      values.push(found);
    }
    if (!ok) continue;
    // Counted per rule and per value of the keys it names (a key without value counts each value apart).
    out.push({ descriptor: index, limit: rule.limit, counterKey: counterKey([domain, rule.limit.id, values]) });
    first = false;
  }
  return out;
}

function overrideLimit(descriptor: RequestDescriptor): Limit | undefined {
  const { requestsPerUnit, unit } = descriptor.limit!;
  const name = unitOf(unit);
  if (!name || !Number.isInteger(requestsPerUnit) || requestsPerUnit < 0) return undefined;
  return { id: 'override', name: descriptor.entries.map((e) => `${e.key}^${e.value}`).join('|'), requestsPerUnit, unit: name, unitSeconds: UNIT_SECONDS[name], weight: 0, alwaysApply: true, shadowMode: false };
}

/**
 * `x-ratelimit-*` as Envoy derives them from the statuses (RateLimit header draft 03): the
 * tightest limit's numbers, and every applied limit's quota policy in `x-ratelimit-limit`.
 */
export function limitHeaders(statuses: readonly DescriptorStatus[], overallCode: RateLimitCode): Record<string, string> {
  const limited = statuses.filter((s) => s.currentLimit);
  if (limited.length === 0) return overallCode === 'OVER_LIMIT' ? { 'x-envoy-ratelimited': 'true' } : {};
  const tightest = limited.reduce((a, b) => (b.limitRemaining < a.limitRemaining ? b : a));
  // As a real Envoy writes it: each limit's name as a quoted parameter (quotes, backslashes and line breaks dropped so the header stays well-formed).
  const policies = limited.map((s) => `${s.currentLimit!.requestsPerUnit};w=${UNIT_SECONDS[s.currentLimit!.unit]}${s.currentLimit!.name ? `;name="${s.currentLimit!.name.replace(/["\\\r\n]/g, '')}"` : ''}`);
  const resetSeconds = Math.ceil((tightest.durationUntilResetMs ?? 0) / 1000);
  const headers: Record<string, string> = {
    'x-ratelimit-limit': [String(tightest.currentLimit!.requestsPerUnit), ...policies].join(', '),
    'x-ratelimit-remaining': String(tightest.limitRemaining),
    'x-ratelimit-reset': String(resetSeconds),
  };
  if (overallCode === 'OVER_LIMIT') {
    headers['x-envoy-ratelimited'] = 'true';
    const over = statuses.filter((s) => s.code === 'OVER_LIMIT');
    // Retry when every exceeded window has ended.
    headers['retry-after'] = String(Math.max(...over.map((s) => Math.ceil((s.durationUntilResetMs ?? 0) / 1000)), 1));
  }
  return headers;
}
