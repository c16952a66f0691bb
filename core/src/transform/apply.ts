import type { CompiledStages, StageSelection, TransformFailure, TransformRequest, TransformResponse } from './compile.ts';
import type { Json } from './inja.ts';

/**
 * Runs compiled stages over one exchange in Envoy's filter order (docs/transformations.md,
 * "Stages"): requests go through `early`, then `regular` (then `postRouting`); responses come back
 * through them in reverse. At most one request entry runs per stage; the response transformation
 * of a stage is its selected entry's own, or the first matching `responseTransforms` entry.
 * The proxy filter calls these with the body buffered only when {@link requestNeedsBody} /
 * {@link responseNeedsBody} say so.
 */

const ORDER = ['early', 'regular', 'postRouting'] as const;
type StageName = (typeof ORDER)[number];

/** The request after its transformations, and what the response side needs to know. */
export interface RequestStagesResult {
  readonly ok: true;
  readonly request: TransformRequest & { readonly body: string | Buffer | undefined };
  /** True when the body changed (the filter sends `request.body` instead of the original). */
  readonly bodyChanged: boolean;
  /** Some applied entry had `clearRouteCache`: the route must be matched again. */
  readonly clearRouteCache: boolean;
  /** The selected entry per stage, for the response side. */
  readonly selections: Readonly<Partial<Record<StageName, StageSelection>>>;
  readonly dynamicMetadata: Record<string, Record<string, Json>>;
  readonly spanName: string | undefined;
}

/** The response after its transformations. */
export interface ResponseStagesResult {
  readonly ok: true;
  readonly response: TransformResponse & { readonly body: string | Buffer | undefined };
  readonly bodyChanged: boolean;
  readonly dynamicMetadata: Record<string, Record<string, Json>>;
}

function requestLine(r: TransformRequest) {
  const q = r.path.indexOf('?');
  return { method: r.method, path: q === -1 ? r.path : r.path.slice(0, q), query: q === -1 ? '' : r.path.slice(q + 1), headers: r.headers };
}

function mergeMetadata(into: Record<string, Record<string, Json>>, from: Record<string, Record<string, Json>>): void {
  for (const [ns, values] of Object.entries(from)) Object.assign((into[ns] ??= {}), values);
}

/** True when a request transformation that `request` selects reads the body (decided from the request line and headers alone). */
export function requestNeedsBody(stages: CompiledStages, request: TransformRequest): boolean {
  const line = requestLine(request);
  return ORDER.some((name) => stages[name].selectRequest(line)?.request?.needsBody === true);
}

/** True when some response transformation of these stages may read the response body. */
export function responseNeedsBody(stages: CompiledStages): boolean {
  return ORDER.some((name) => stages[name].responseMayNeedBody);
}

/** Applies the request transformations of every stage, in order. */
export function applyRequestStages(stages: CompiledStages, request: TransformRequest): RequestStagesResult | TransformFailure {
  let current: TransformRequest & { body: string | Buffer | undefined } = { ...request, body: request.body };
  let bodyChanged = false;
  let clearRouteCache = false;
  let spanName: string | undefined;
  const selections: Partial<Record<StageName, StageSelection>> = {};
  const dynamicMetadata: Record<string, Record<string, Json>> = {};
  for (const name of ORDER) {
    // Each stage matches the request as the previous stage left it.
    const selection = stages[name].selectRequest(requestLine(current));
    if (!selection) continue;
    selections[name] = selection;
    if (!selection.request) continue;
    const out = selection.request.transformRequest({ ...current, dynamicMetadata: { ...request.dynamicMetadata, ...dynamicMetadata } });
    if (!out.ok) return out;
    current = { ...current, method: out.message.method, path: out.message.path, headers: out.message.headers, body: out.body ?? current.body };
    if (out.body) bodyChanged = true;
    if (selection.clearRouteCache) clearRouteCache = true;
    if (out.spanName !== undefined) spanName = out.spanName;
    mergeMetadata(dynamicMetadata, out.dynamicMetadata);
  }
  return { ok: true, request: current, bodyChanged, clearRouteCache, selections, dynamicMetadata, spanName };
}

/** Applies the response transformations of every stage, in reverse order; `request` is the request as sent upstream. */
export function applyResponseStages(stages: CompiledStages, selections: RequestStagesResult['selections'], response: TransformResponse, request?: TransformRequest): ResponseStagesResult | TransformFailure {
  let current: TransformResponse & { body: string | Buffer | undefined } = { ...response, body: response.body };
  let bodyChanged = false;
  const dynamicMetadata: Record<string, Record<string, Json>> = {};
  for (const name of [...ORDER].reverse()) {
    const transformation = stages[name].selectResponse(selections[name], current);
    if (!transformation) continue;
    const out = transformation.transformResponse({ ...current, dynamicMetadata: { ...response.dynamicMetadata, ...dynamicMetadata } }, request);
    if (!out.ok) return out;
    current = { ...current, status: out.message.status, headers: out.message.headers, body: out.body ?? current.body };
    if (out.body) bodyChanged = true;
    mergeMetadata(dynamicMetadata, out.dynamicMetadata);
  }
  return { ok: true, response: current, bodyChanged, dynamicMetadata };
}
