import {
  getNamedType,
  GraphQLError,
  isListType,
  isNonNullType,
  isObjectType,
  isInterfaceType,
  Kind,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLOutputType,
  type GraphQLNamedType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';
import { durationMs } from '../../config/schema/common.ts';
import type { GraphQLLimitsSpec } from '../../config/schema/graphql-api.ts';

/**
 * GraphQL limits (SPEC 3.3.1): every API is safe by default. The static limits (depth, aliases,
 * directives, root fields, cost) are measured in ONE walk over the document, each fragment
 * measured once and reused wherever it is spread (so a fan-out of fragments that expands to 2^n
 * fields costs n steps to measure), before graphql-js validates and graphql-jit compiles: both of
 * those expand fragments, so they only ever see documents whose expansion is bounded by `maxCost`.
 * Tokens are bounded by the parser itself (`maxTokens`). The runtime limits (upstream calls, bytes
 * buffered, response bytes, event-loop time) are counted by an {@link OperationBudget}.
 */

/** The limits of one GraphQLApi, every one on by default (see {@link DEFAULT_LIMITS}). */
export interface GraphQLLimits {
  /** Nesting of fields (fragments are transparent): `{ a { b } }` is 2. */
  readonly maxDepth: number;
  /** Aliased fields, counted as executed (a fragment spread twice counts its aliases twice). */
  readonly maxAliases: number;
  /** Lexical tokens of the document (graphql-js parser's `maxTokens`). */
  readonly maxTokens: number;
  /** Directive uses, counted as executed. */
  readonly maxDirectives: number;
  /** Fields at the top of the operation. */
  readonly maxRootFields: number;
  /** Total cost of the operation (see {@link operationCost}). */
  readonly maxCost: number;
  /** Items assumed for a list field without a `first`/`last`/`limit`/`pageSize`/`count`/`take` literal argument. */
  readonly defaultListSize: number;
  /** Bytes of the JSON response. */
  readonly maxResponseBytes: number;
  /** Upstream calls one operation may make (after dedup). */
  readonly maxUpstreamCalls: number;
  /** Bytes of upstream answers one operation may hold at once. */
  readonly maxBufferedBytes: number;
  /** Event-loop time one operation may use, in milliseconds. */
  readonly maxOperationMs: number;
  /** Nesting of the JSON `variables`. */
  readonly maxVariableDepth: number;
  /** Operations in one batched request (a JSON array body); 0 refuses batches. Each runs under all the other limits. */
  readonly maxBatchSize: number;
  /** Operations one graphql-ws connection may run at once. */
  readonly maxSubscriptionsPerConnection: number;
  /** Bytes of one message a graphql-ws client sends. */
  readonly maxMessageBytes: number;
  /** A subscription whose upstream sends nothing (not even a keep-alive) this long ends; a WebSocket with no operation and no message this long is closed. */
  readonly subscriptionIdleMs: number;
}

/**
 * Defaults, chosen after GraphQL Armor (depth 6, aliases 15, tokens 1000, directives 50, cost
 * 5000) and Apollo Router (`limits`, parser `max_tokens` 15000): large enough for the standard
 * introspection query (depth 15, 163 tokens) and generated client documents, small enough that
 * the hostile shapes of issue 25 are refused before they cost anything. See docs/graphql.md.
 */
export const DEFAULT_LIMITS: GraphQLLimits = Object.freeze({
  maxDepth: 15,
  maxAliases: 30,
  maxTokens: 2_000,
  maxDirectives: 50,
  maxRootFields: 20,
  maxCost: 5_000,
  defaultListSize: 10,
  maxResponseBytes: 16 * 1024 * 1024,
  maxUpstreamCalls: 100,
  maxBufferedBytes: 32 * 1024 * 1024,
  maxOperationMs: 1_000,
  maxVariableDepth: 32,
  maxBatchSize: 10,
  maxSubscriptionsPerConnection: 10,
  maxMessageBytes: 64 * 1024,
  subscriptionIdleMs: 300_000,
});

/**
 * Benchmarking only: with `GATEHOUSE_GRAPHQL_LIMITS=off` in the gateway's environment, every API
 * runs with {@link UNLIMITED} and without the per-request accounting (operation time, response
 * measure, upstream call count), so that `npm run bench` can show what the limits cost. The hard
 * caps stay (50,000 expanded fields, the compile threshold, the variables' depth, the bytes held
 * by the whole process, 10 MiB per REST answer). The gateway logs a warning for each API served so.
 */
export const LIMITS_OFF = process.env.GATEHOUSE_GRAPHQL_LIMITS === 'off';

/** What {@link LIMITS_OFF} runs with: the configurable operation limits unbounded. */
export const UNLIMITED: GraphQLLimits = Object.freeze({
  ...DEFAULT_LIMITS,
  maxDepth: Infinity,
  maxAliases: Infinity,
  maxTokens: Infinity,
  maxDirectives: Infinity,
  maxRootFields: Infinity,
  maxCost: Infinity,
  maxResponseBytes: Infinity,
  maxUpstreamCalls: Infinity,
  maxBufferedBytes: Infinity,
  maxOperationMs: Infinity,
});

/** The limits of an API: `spec.limits` over the defaults; Gloo's `maxDepth` when `limits.maxDepth` is not set. */
export function limitsOf(spec: GraphQLLimitsSpec | undefined, glooMaxDepth: number | undefined): GraphQLLimits {
  if (LIMITS_OFF) return UNLIMITED;
  if (!spec && glooMaxDepth === undefined) return DEFAULT_LIMITS;
  const { maxOperationTime, subscriptionIdleTimeout, ...numbers } = spec ?? {};
  const out: GraphQLLimits = {
    ...DEFAULT_LIMITS,
    ...(glooMaxDepth !== undefined ? { maxDepth: glooMaxDepth } : {}),
    ...numbers,
    ...(maxOperationTime !== undefined ? { maxOperationMs: durationMs(maxOperationTime) } : {}),
    // 0 would never expire: at least one second.
    ...(subscriptionIdleTimeout !== undefined ? { subscriptionIdleMs: Math.max(1_000, durationMs(subscriptionIdleTimeout)) } : {}),
  };
  return Object.freeze(out);
}

/** Bytes of upstream answers all operations of the process may hold at once. */
export const MAX_PROCESS_BUFFERED_BYTES = 256 * 1024 * 1024;

/**
 * Fields a document may expand to (fragments spread), whatever the configured limits: validation
 * and execution walk the expansion, so past this no setting may let a document through.
 */
export const MAX_EXPANDED_FIELDS = 50_000;

/** Cost of a field served by a resolver (an upstream call) and of any other field. */
export const RESOLVER_FIELD_COST = 10;
export const FIELD_COST = 1;
/** Arguments read as the size of a list field's answer (an integer literal or variable). */
export const LIST_SIZE_ARGUMENTS: readonly string[] = ['first', 'last', 'limit', 'pageSize', 'count', 'take'];

/** `extensions.code` of a refused operation, per limit (stable). */
export const LimitCodes = {
  DEPTH: 'GRAPHQL_LIMIT_DEPTH',
  ALIASES: 'GRAPHQL_LIMIT_ALIASES',
  TOKENS: 'GRAPHQL_LIMIT_TOKENS',
  DIRECTIVES: 'GRAPHQL_LIMIT_DIRECTIVES',
  ROOT_FIELDS: 'GRAPHQL_LIMIT_ROOT_FIELDS',
  COST: 'GRAPHQL_LIMIT_COST',
  RESPONSE_BYTES: 'GRAPHQL_LIMIT_RESPONSE_BYTES',
  UPSTREAM_CALLS: 'GRAPHQL_LIMIT_UPSTREAM_CALLS',
  BUFFERED_BYTES: 'GRAPHQL_LIMIT_BUFFERED_BYTES',
  TIME: 'GRAPHQL_LIMIT_TIME',
  VARIABLES_DEPTH: 'GRAPHQL_LIMIT_VARIABLES_DEPTH',
  BATCH_SIZE: 'GRAPHQL_LIMIT_BATCH_SIZE',
  SUBSCRIPTIONS: 'GRAPHQL_LIMIT_SUBSCRIPTIONS',
  /** A fragment that spreads itself (directly or through others). */
  FRAGMENT_CYCLE: 'GRAPHQL_FRAGMENT_CYCLE',
} as const;

/** An error naming the limit an operation passed. */
export function limitError(code: string, message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code } });
}

/** Numbers past this are "a lot" (a fan-out of fragments could otherwise reach Infinity). */
const CAP = 1e15;
const add = (a: number, b: number): number => Math.min(a + b, CAP);
const mul = (a: number, b: number): number => Math.min(a * b, CAP);

/** What a selection set adds up to once its fragments are expanded. */
interface Measure {
  depth: number;
  aliases: number;
  directives: number;
  /** Fields directly in the set (fragments expanded): the root fields at the top. */
  fields: number;
  /** Fields once fragments are expanded, at every level (what validation and compilation walk). */
  size: number;
  cost: number;
}

/** The verdict of {@link checkDocument}. */
export interface DocumentMeasure {
  /** The first limit passed. */
  readonly error: GraphQLError | undefined;
  /** The largest expanded size of the document's operations (fields, fragments expanded). */
  readonly size: number;
}

/**
 * Measures every operation of `document` against `limits`: the first limit passed, as an error,
 * or undefined. Time linear in the document: each fragment is measured once (cycles are refused).
 * `resolverFields` holds the `Type.field` coordinates served by a resolver (cost 10 each).
 */
export function checkDocument(document: DocumentNode, schema: GraphQLSchema, limits: GraphQLLimits, resolverFields: ReadonlySet<string>): DocumentMeasure {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION && !fragments.has(d.name.value)) fragments.set(d.name.value, d);
  const measured = new Map<string, Measure>();
  const inProgress = new Set<string>();
  let cycle: string | undefined;

  const measureFragment = (name: string): Measure | undefined => {
    const done = measured.get(name);
    if (done) return done;
    const fragment = fragments.get(name);
    // Unknown fragments are reported by validation.
    if (!fragment) return undefined;
    if (inProgress.has(name)) {
      cycle ??= name;
      return undefined;
    }
    inProgress.add(name);
    const type = schema.getType(fragment.typeCondition.name.value);
    const m = measureSet(fragment.selectionSet, type);
    m.directives = add(m.directives, fragment.directives?.length ?? 0);
    inProgress.delete(name);
    measured.set(name, m);
    return m;
  };

  const measureSet = (set: SelectionSetNode, parent: GraphQLNamedType | undefined): Measure => {
    const out: Measure = { depth: 0, aliases: 0, directives: 0, fields: 0, size: 0, cost: 0 };
    const merge = (m: Measure, extraDirectives: number) => {
      if (m.depth > out.depth) out.depth = m.depth;
      out.aliases = add(out.aliases, m.aliases);
      out.directives = add(out.directives, add(m.directives, extraDirectives));
      out.fields = add(out.fields, m.fields);
      out.size = add(out.size, m.size);
      out.cost = add(out.cost, m.cost);
    };
    for (const selection of set.selections) {
      const directives = selection.directives?.length ?? 0;
      if (selection.kind === Kind.FIELD) {
        const name = selection.name.value;
        const fields = parent && (isObjectType(parent) || isInterfaceType(parent)) ? parent.getFields() : undefined;
        const def = fields?.[name];
        const own = def && resolverFields.has(`${parent!.name}.${name}`) ? RESOLVER_FIELD_COST : FIELD_COST;
        let depth = 1;
        let cost = own;
        let aliases = selection.alias ? 1 : 0;
        let innerDirectives = 0;
        let size = 1;
        if (selection.selectionSet) {
          const inner = measureSet(selection.selectionSet, def ? getNamedType(def.type) : undefined);
          depth += inner.depth;
          aliases = add(aliases, inner.aliases);
          innerDirectives = inner.directives;
          size = add(size, inner.size);
          cost = add(cost, mul(def ? listFactor(def.type, selection.arguments ?? [], limits.defaultListSize) : 1, inner.cost));
        }
        merge({ depth, aliases, directives: innerDirectives, fields: 1, size, cost }, directives);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        const type = selection.typeCondition ? schema.getType(selection.typeCondition.name.value) : parent;
        merge(measureSet(selection.selectionSet, type), directives);
      } else {
        const m = measureFragment(selection.name.value);
        if (m) merge(m, directives);
      }
    }
    return out;
  };

  let size = 0;
  const refuse = (error: GraphQLError): DocumentMeasure => ({ error, size });
  for (const d of document.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue;
    const root = rootType(schema, d);
    const m = measureSet(d.selectionSet, root);
    if (m.size > size) size = m.size;
    if (cycle !== undefined) return refuse(limitError(LimitCodes.FRAGMENT_CYCLE, `fragment "${cycle}" spreads itself`));
    const name = d.name ? `operation "${d.name.value}"` : 'the operation';
    const directives = add(m.directives, d.directives?.length ?? 0);
    if (m.depth > limits.maxDepth) return refuse(limitError(LimitCodes.DEPTH, `${name} is nested ${m.depth} levels deep, more than the ${limits.maxDepth} this API allows (limits.maxDepth)`));
    if (m.fields > limits.maxRootFields) return refuse(limitError(LimitCodes.ROOT_FIELDS, `${name} asks for ${m.fields} root fields, more than the ${limits.maxRootFields} this API allows (limits.maxRootFields)`));
    if (m.aliases > limits.maxAliases) return refuse(limitError(LimitCodes.ALIASES, `${name} uses ${m.aliases} aliases, more than the ${limits.maxAliases} this API allows (limits.maxAliases)`));
    if (directives > limits.maxDirectives) return refuse(limitError(LimitCodes.DIRECTIVES, `${name} uses ${directives} directives, more than the ${limits.maxDirectives} this API allows (limits.maxDirectives)`));
    if (m.size > MAX_EXPANDED_FIELDS) return refuse(limitError(LimitCodes.COST, `${name} expands to ${m.size >= CAP ? 'more than 1e15' : m.size} fields once its fragments are spread, more than the ${MAX_EXPANDED_FIELDS} any API allows`));
    if (m.cost > limits.maxCost) return refuse(limitError(LimitCodes.COST, `${name} costs ${m.cost >= CAP ? 'more than 1e15' : m.cost}, more than the ${limits.maxCost} this API allows (limits.maxCost; docs/graphql.md explains the cost model)`));
  }
  return { error: undefined, size };
}

function rootType(schema: GraphQLSchema, operation: OperationDefinitionNode): GraphQLNamedType | undefined {
  if (operation.operation === 'query') return schema.getQueryType() ?? undefined;
  if (operation.operation === 'mutation') return schema.getMutationType() ?? undefined;
  return schema.getSubscriptionType() ?? undefined;
}

/** How many times a field's sub-selection runs per parent: 1, or the list size (nested lists multiply). */
function listFactor(type: GraphQLOutputType, args: readonly { name: { value: string }; value: ValueNode }[], defaultSize: number): number {
  let factor = 1;
  let t: GraphQLOutputType = type;
  let lists = 0;
  while (true) {
    if (isNonNullType(t)) t = t.ofType;
    else if (isListType(t)) {
      lists++;
      t = t.ofType;
    } else break;
  }
  if (lists === 0) return 1;
  let size = defaultSize;
  for (const arg of args) {
    if (LIST_SIZE_ARGUMENTS.includes(arg.name.value) && arg.value.kind === Kind.INT) {
      size = Math.max(0, Number(arg.value.value));
      break;
    }
  }
  // The size argument sizes the outer list; inner lists get the default.
  factor = Math.max(size, 1);
  for (let i = 1; i < lists; i++) factor = mul(factor, Math.max(defaultSize, 1));
  return factor;
}

/** `Type.field` coordinates of the fields bound to a resolver with `@resolve` (cost {@link RESOLVER_FIELD_COST}). */
export function resolverFieldsOf(schema: GraphQLSchema): ReadonlySet<string> {
  const out = new Set<string>();
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__')) continue;
    for (const field of Object.values(type.getFields())) {
      if (field.astNode?.directives?.some((d) => d.name.value === 'resolve')) out.add(`${type.name}.${field.name}`);
    }
  }
  return out;
}

/** True when `value` (JSON from the request) nests deeper than `max` objects/lists. */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  // Iterative: the value may be nested deeper than the stack allows.
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth >= max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return false;
}

/**
 * Whether `value` would serialize to more than `limit` bytes of JSON, found without building the
 * JSON (an estimate from below: strings by their length, escapes not counted) and stopping as soon
 * as the limit is passed, so a response amplified to gigabytes is refused after `limit` bytes of work.
 */
export function jsonLargerThan(value: unknown, limit: number): boolean {
  let size = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') size += v.length + 2;
    else if (v === null || v === undefined || typeof v !== 'object') size += 5;
    else if (Array.isArray(v)) {
      size += 1 + v.length;
      for (let i = 0; i < v.length; i++) stack.push(v[i]);
    } else {
      size += 1;
      for (const key in v) {
        size += key.length + 4;
        stack.push((v as Record<string, unknown>)[key]);
      }
    }
    if (size > limit) return true;
  }
  return false;
}

let processBuffered = 0;

/** Bytes of upstream answers held by all operations of the process (for tests and metrics). */
export function processBufferedBytes(): number {
  return processBuffered;
}

/**
 * The runtime limits of one operation: upstream calls, bytes of upstream answers held (per
 * operation and for the whole process), event-loop time. Resolvers ask it before each call and
 * for each chunk; the endpoint releases it once the response is sent.
 */
export class OperationBudget {
  readonly limits: GraphQLLimits;
  private calls = 0;
  private buffered = 0;
  /** Event-loop milliseconds used so far by the phases the gateway times. */
  private used = 0;
  private released = false;

  constructor(limits: GraphQLLimits) {
    this.limits = limits;
  }

  /** Counts one upstream call; throws a field error when the operation has made its share. */
  call(): void {
    if (++this.calls > this.limits.maxUpstreamCalls) {
      throw limitError(LimitCodes.UPSTREAM_CALLS, `the operation made more than the ${this.limits.maxUpstreamCalls} upstream calls this API allows (limits.maxUpstreamCalls)`);
    }
    if (this.used > this.limits.maxOperationMs) throw this.timeError();
  }

  /** Reserves `bytes` of an upstream answer; false when the operation's or the process's share is spent. */
  reserve(bytes: number): boolean {
    if (this.released) return false;
    if (this.buffered + bytes > this.limits.maxBufferedBytes || processBuffered + bytes > MAX_PROCESS_BUFFERED_BYTES) return false;
    this.buffered += bytes;
    processBuffered += bytes;
    return true;
  }

  /** The error of an answer that did not fit in {@link reserve}. */
  bufferedError(): GraphQLError {
    return limitError(LimitCodes.BUFFERED_BYTES, `the upstream answers of this operation are larger than the ${this.limits.maxBufferedBytes} bytes this API holds for one operation (limits.maxBufferedBytes), or the gateway holds too much for all operations right now`);
  }

  /** Adds event-loop time spent for the operation. */
  spend(ms: number): void {
    this.used += ms;
  }

  get overTime(): boolean {
    return this.used > this.limits.maxOperationMs;
  }

  timeError(): GraphQLError {
    return limitError(LimitCodes.TIME, `the operation used more than the ${this.limits.maxOperationMs} ms of event-loop time this API allows (limits.maxOperationMs)`);
  }

  /** Gives back the bytes held (idempotent). */
  release(): void {
    if (this.released) return;
    this.released = true;
    processBuffered -= this.buffered;
    this.buffered = 0;
  }
}
