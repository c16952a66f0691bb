import { metrics } from '../admin/metrics.ts';
import type { CounterChild } from '../admin/request-metrics.ts';
import type { Logger } from '../log/logger.ts';
import { ExtAuthCodes } from './codes.ts';
import { evaluateBoolExpr, type BoolExpr } from './boolean-expr.ts';
import { allow, applyAllowed, forbidden, withHeaders, type Allowed } from './decision.ts';
import { sanitizeDecision, type SanitizeReport } from './sanitize-decision.ts';
import type { AuthDecision, AuthStep, CheckRequest, HeaderToSet } from './step.ts';
import { remoteChildSpan } from '../tracing/tracing.ts';

/**
 * The built steps of one AuthConfig version (SPEC 5): run in order, the first denial is
 * the answer, and headers from allowing steps are merged into the request the next step
 * sees and, at the end, into the OK response.
 */
export class AuthChain {
  /** `namespace.name`, the `config_id` context extension. */
  readonly configId: string;
  /** Content hash of the AuthConfig spec this chain was built from. */
  readonly version: string;
  readonly steps: readonly AuthStep[];
  private readonly logger: Logger;
  /** Each step's decision counters, found once instead of per request. */
  private readonly counters: ReadonlyMap<AuthStep, Record<'allow' | 'deny' | 'error', CounterChild>>;
  private inflight = 0;
  private drained: (() => void) | undefined;

  /** `booleanExpr` (Gloo): which named steps must allow; without one, every step must. */
  private readonly expr: BoolExpr | undefined;
  private readonly byName: ReadonlyMap<string, AuthStep>;
  /** Headers some step owns (lowercase): never taken from the client. */
  private readonly owned: ReadonlySet<string>;

  constructor(configId: string, version: string, steps: readonly AuthStep[], logger: Logger, expr?: BoolExpr) {
    this.configId = configId;
    this.version = version;
    this.steps = steps;
    this.logger = logger;
    this.expr = expr;
    this.byName = new Map(steps.map((step) => [step.name, step]));
    this.owned = new Set(steps.flatMap((step) => step.ownedHeaders ?? []).map((name) => name.toLowerCase()));
    const counter = (step: AuthStep, result: string) => metrics.authDecisions.labels(configId, step.name, result);
    this.counters = new Map(steps.map((step) => [step, { allow: counter(step, 'allow'), deny: counter(step, 'deny'), error: counter(step, 'error') }]));
  }

  /** Runs the chain. Never throws: a step that throws denies with 403 and is logged. */
  run(request: CheckRequest): Promise<AuthDecision> {
    if (this.owned.size === 0) return this.runAny(request);
    // Owned headers: dropped from what the steps see, and removed upstream unless a step set them
    // (whichever steps ran: with booleanExpr the owning step may not have).
    const headers = request.attributes.request.http.headers;
    const present = Object.keys(headers).some((name) => this.owned.has(name));
    const seen = present ? withHeaders(request, Object.fromEntries(Object.entries(headers).filter(([name]) => !this.owned.has(name)))) : request;
    return this.runAny(seen).then((decision) => {
      if (!decision.allowed) return decision;
      const set = new Set(decision.headersToSet.map((h) => h.key.toLowerCase()));
      const remove = [...this.owned].filter((name) => !set.has(name) && !decision.headersToRemove.includes(name));
      return remove.length === 0 ? decision : { ...decision, headersToRemove: [...decision.headersToRemove, ...remove] };
    });
  }

  private runAny(request: CheckRequest): Promise<AuthDecision> {
    return this.expr === undefined && this.steps.length === 1 ? this.runOne(this.steps[0]!, request) : this.runAll(request);
  }

  /**
   * The common AuthConfig, one step and no `booleanExpr`: the step's own decision, in one
   * promise hop instead of three async frames (measured on the plugin bench route: the
   * gateway's side of a check is most of what a fast plugin costs).
   */
  private runOne(step: AuthStep, request: CheckRequest): Promise<AuthDecision> {
    this.inflight++;
    let answer: Promise<AuthDecision>;
    try {
      answer = traced(step, request, this.configId, { state: {} });
    } catch (error) {
      answer = Promise.reject(error);
    }
    return answer.then(
      (decision) => {
        const decided = this.decided(step, decision);
        this.settled();
        // As runSteps: one step's answer passes through unless it sets and removes one header.
        if (!decided.allowed || !setsAndRemoves(decided)) return decided;
        const touched = new Set(decided.headersToSet.map((h) => h.key.toLowerCase()));
        const removed = new Set(decided.headersToRemove.map((name) => name.toLowerCase()));
        return netEffect(applyAllowed(request.attributes.request.http.headers, decided), touched, removed, decided.responseHeaders);
      },
      (error: unknown) => {
        this.settled();
        return this.failed(step, error);
      },
    );
  }

  private settled(): void {
    if (--this.inflight === 0) this.drained?.();
  }

  private async runAll(request: CheckRequest): Promise<AuthDecision> {
    this.inflight++;
    try {
      return await (this.expr ? this.runExpr(this.expr, request) : this.runSteps(request));
    } finally {
      if (--this.inflight === 0) this.drained?.();
    }
  }

  private async runSteps(request: CheckRequest): Promise<AuthDecision> {
    let current = request;
    let headers = request.attributes.request.http.headers;
    const touched = new Set<string>();
    const removed = new Set<string>();
    let changing: Allowed | undefined;
    let changes = 0;
    let last: Allowed | undefined;
    let state: Record<string, unknown> = {};
    /** Client response headers of every allowing step, in order (a later step's value wins). */
    let response: HeaderToSet[] | undefined;
    const lastStep = this.steps[this.steps.length - 1];
    for (const step of this.steps) {
      const decision = await this.runStep(step, current, state);
      if (!decision.allowed) return decision;
      last = decision;
      // Gloo: an allowing step's State is what the next step receives.
      if (decision.state) state = decision.state;
      if (decision.responseHeaders) response = mergeResponseHeaders(response, decision.responseHeaders);
      if (decision.headersToSet.length === 0 && decision.headersToRemove.length === 0) continue;
      changing = decision;
      changes++;
      for (const h of decision.headersToSet) touched.add(h.key.toLowerCase());
      for (const name of decision.headersToRemove) removed.add(name.toLowerCase());
      // The merged headers are needed by a next step, or for a net result of several changes;
      // not for the common single change by the last step (no copy of every header per check).
      if (step !== lastStep || changes > 1 || setsAndRemoves(decision)) headers = applyAllowed(headers, decision);
      if (step !== lastStep) current = withHeaders(current, headers);
    }
    // One step's own answer passes through unchanged, unless it sets and removes the same
    // header (whose outcome would depend on the order the gateway applies them).
    if (changes === 0) return withResponseHeaders(last ?? allow(), response);
    if (changes === 1 && !setsAndRemoves(changing!)) return withResponseHeaders(changing!, response);
    return netEffect(headers, touched, removed, response);
  }

  /**
   * `booleanExpr`: steps run as the expression asks for them, left to right with
   * short-circuiting. An allowing step's headers and State reach the steps after it and the
   * upstream, whatever the expression's outcome needed it for; a denying step's do not. When
   * the expression is false, the client gets the denial of the last step that denied (a Basic
   * Auth 401 with its challenge, say), or a plain 403 when none did (`!step` of an allowing step).
   */
  private async runExpr(expr: BoolExpr, request: CheckRequest): Promise<AuthDecision> {
    let current = request;
    let headers = request.attributes.request.http.headers;
    const touched = new Set<string>();
    const removed = new Set<string>();
    let state: Record<string, unknown> = {};
    let denial: Exclude<AuthDecision, Allowed> | undefined;
    let changed = false;
    let response: HeaderToSet[] | undefined;
    const allowed = await evaluateBoolExpr(expr, async (name) => {
      const decision = await this.runStep(this.byName.get(name)!, current, state);
      if (!decision.allowed) {
        denial = decision;
        return false;
      }
      if (decision.state) state = decision.state;
      if (decision.responseHeaders) response = mergeResponseHeaders(response, decision.responseHeaders);
      if (decision.headersToSet.length > 0 || decision.headersToRemove.length > 0) {
        changed = true;
        for (const h of decision.headersToSet) touched.add(h.key.toLowerCase());
        for (const name of decision.headersToRemove) removed.add(name.toLowerCase());
        headers = applyAllowed(headers, decision);
        current = withHeaders(current, headers);
      }
      return true;
    });
    if (!allowed) return denial ?? forbidden();
    if (!changed) return withResponseHeaders(allow(), response);
    return netEffect(headers, touched, removed, response);
  }

  private async runStep(step: AuthStep, request: CheckRequest, state: Record<string, unknown>): Promise<AuthDecision> {
    let decision: AuthDecision;
    try {
      decision = await traced(step, request, this.configId, { state });
    } catch (error) {
      return this.failed(step, error);
    }
    return this.decided(step, decision);
  }

  /** A step's decision made safe to apply (a warning when it had to change), and counted. */
  private decided(step: AuthStep, raw: AuthDecision): AuthDecision {
    let decision: AuthDecision;
    const report: SanitizeReport = { dropped: [] };
    try {
      decision = sanitizeDecision(raw, report);
    } catch (error) {
      // A decision of the wrong shape (a user's step): as if the step had thrown.
      return this.failed(step, error);
    }
    if (report.reason || report.dropped.length > 0) {
      this.logger.warn({ code: ExtAuthCodes.BAD_DECISION, config_id: this.configId, step: step.name, dropped: report.dropped, reason: report.reason }, `auth step ${step.name} of ${this.configId} answered with headers or a status that cannot be sent; sanitised`);
    }
    this.counters.get(step)![decision.allowed ? 'allow' : 'deny'].inc();
    return decision;
  }

  /** A step that threw: denied (403), counted and logged. */
  private failed(step: AuthStep, error: unknown): AuthDecision {
    this.counters.get(step)!.error.inc();
    this.logger.error({ err: error, code: ExtAuthCodes.STEP_FAILED, config_id: this.configId, step: step.name }, `auth step ${step.name} of ${this.configId} failed; request denied`);
    return forbidden();
  }

  /** Closes every step once the checks in flight on this chain have finished. */
  async close(): Promise<void> {
    if (this.inflight > 0) await new Promise<void>((resolve) => (this.drained = resolve));
    await closeSteps(this.steps, this.logger);
  }
}

/** Closes steps, logging (not throwing) failures: a step that cannot close must not block a reload. */
export async function closeSteps(steps: readonly AuthStep[], logger: Logger): Promise<void> {
  await Promise.all(
    steps.map(async (step) => {
      try {
        await step.close?.();
      } catch (error) {
        logger.warn({ err: error, step: step.name }, 'closing auth step failed');
      }
    }),
  );
}

/**
 * The net effect of the allowing steps on the original request, as one OK response: overwrite
 * what some step set or appended, remove what some step removed (`headers`: the request's
 * headers after every step).
 */
function netEffect(headers: Record<string, string>, touched: ReadonlySet<string>, removed: ReadonlySet<string>, response?: HeaderToSet[]): AuthDecision {
  return withResponseHeaders(
    allow(
      [...touched].filter((name) => headers[name] !== undefined).map((name) => ({ key: name, value: headers[name]!, append: false })),
      [...removed].filter((name) => headers[name] === undefined),
    ),
    response,
  );
}

/** `decision` carrying the chain's client response headers (none: unchanged). */
function withResponseHeaders(decision: Allowed, response: HeaderToSet[] | undefined): Allowed {
  if (!response || response.length === 0 || decision.responseHeaders === response) return decision;
  return { ...decision, responseHeaders: response };
}

/** Response headers of several steps: a later step's header replaces an earlier one of the same name, unless it appends. */
function mergeResponseHeaders(before: HeaderToSet[] | undefined, next: HeaderToSet[]): HeaderToSet[] {
  if (!before) return next;
  const replaced = new Set(next.filter((h) => !h.append).map((h) => h.key.toLowerCase()));
  return [...before.filter((h) => !replaced.has(h.key.toLowerCase())), ...next];
}

function setsAndRemoves(decision: Allowed): boolean {
  if (decision.headersToRemove.length === 0) return false;
  const removed = new Set(decision.headersToRemove.map((name) => name.toLowerCase()));
  return decision.headersToSet.some((h) => removed.has(h.key.toLowerCase()));
}

/**
 * `step.authorize`, as a span when the check carries a sampled trace context and the process has
 * a collector (core/src/tracing); otherwise the call itself.
 */
function traced(step: AuthStep, request: CheckRequest, configId: string, context: Parameters<AuthStep['authorize']>[1]): Promise<AuthDecision> {
  const span = remoteChildSpan(request.attributes.request.http.headers, `auth step ${step.name}`, { 'auth.config_id': configId, 'auth.step': step.name });
  if (span === undefined) return step.authorize(request, context);
  // The step's span is the parent of what it calls: a plugin's fetches carry it (docs/tracing.md).
  return step.authorize(request, { state: context?.state ?? {}, trace: span.traceHeaders }).then(
    (decision) => {
      span.setAttribute('auth.allowed', decision.allowed);
      if (!decision.allowed) span.setAttribute('http.status_code', decision.status);
      span.end();
      return decision;
    },
    (error: unknown) => {
      span.end((error as Error)?.message ?? 'failed');
      throw error;
    },
  );
}
