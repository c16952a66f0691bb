import * as grpc from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import type { GrpcResolverSpec } from '../../config/schema/graphql-api.ts';
import { durationMs } from '../../config/schema/common.ts';
import type { UpstreamCluster, UpstreamHost } from '../../proxy/upstream/upstream-cluster.ts';
import { FieldErrorCodes, GraphQLConfigCodes, fieldError, type Problem } from '../compile/errors.ts';
import { findMethod, messageToJson, type MethodTypes } from '../grpc/descriptors.ts';
import { reflectDescriptors } from '../grpc/reflection.ts';
import { JsonTemplate, TemplateSyntaxError, type TemplateSource } from '../compile/template.ts';
import type { OperationBudget } from '../limits/limits.ts';
import { resolverSpan, type TraceHeaders } from '../execute/trace.ts';
import { dedupe, type FieldResolver, type OperationContext, type ResolverMetrics } from './types.ts';

/** Default `grpcResolver.timeout`, the same as the REST resolver's. */
export const DEFAULT_GRPC_TIMEOUT_MS = 1_000;

const SOURCES: readonly TemplateSource[] = ['parent', 'args', 'headers'];

/** A `grpcResolver` with its message template parsed and, given a descriptor registry, its method resolved (load time). */
export interface CompiledGrpc {
  readonly serviceName: string;
  readonly methodName: string;
  readonly message: JsonTemplate;
  readonly metadata: readonly (readonly [string, string])[];
  readonly timeoutMs: number;
  /** Gloo's `spanName`: the name of the call's span when the request is traced (core/src/tracing). */
  readonly spanName: string | undefined;
  /** Resolved from `grpcDescriptorRegistry`; undefined means server reflection at first use. */
  readonly method: MethodTypes | undefined;
}

/** Parses a `grpcResolver`; with `root` (the descriptor registry) the method and message fields are checked too. */
export function compileGrpc(spec: GrpcResolverSpec, root: protobuf.Root | undefined, at: readonly (string | number)[], problems: Problem[]): CompiledGrpc | undefined {
  const transform = spec.requestTransform;
  const error = (path: (string | number)[], code: string, message: string) => problems.push({ path: [...at, ...path], code, message, severity: 'error' });
  let ok = true;
  let message = JsonTemplate.parse({}, SOURCES);
  if (transform.outgoingMessageJson !== undefined) {
    try {
      message = JsonTemplate.parse(transform.outgoingMessageJson, SOURCES);
    } catch (e) {
      if (!(e instanceof TemplateSyntaxError)) throw e;
      error(['requestTransform', 'outgoingMessageJson'], GraphQLConfigCodes.BAD_TEMPLATE, e.message);
      ok = false;
    }
  }
  let method: MethodTypes | undefined;
  if (root) {
    try {
      method = findMethod(root, transform.serviceName, transform.methodName);
    } catch (e) {
      const where = /has no method/.test((e as Error).message) ? 'methodName' : 'serviceName';
      error(['requestTransform', where], GraphQLConfigCodes.UNKNOWN_GRPC_SYMBOL, (e as Error).message);
      ok = false;
    }
    if (method?.streaming) {
      error(['requestTransform', 'methodName'], GraphQLConfigCodes.UNKNOWN_GRPC_SYMBOL, `${transform.serviceName}/${transform.methodName} is a streaming method; only unary methods can resolve a field`);
      ok = false;
    }
    const outgoing = transform.outgoingMessageJson;
    if (method && outgoing && typeof outgoing === 'object' && !Array.isArray(outgoing)) {
      for (const key of Object.keys(outgoing)) {
        if (!method.requestType.fields[key]) {
          error(['requestTransform', 'outgoingMessageJson', key], GraphQLConfigCodes.UNKNOWN_GRPC_SYMBOL, `${method.requestType.fullName.slice(1)} has no field "${key}"; its fields are ${Object.keys(method.requestType.fields).join(', ') || 'none'}`);
          ok = false;
        }
      }
    }
  }
  if (!ok) return undefined;
  return {
    serviceName: transform.serviceName,
    methodName: transform.methodName,
    message,
    metadata: Object.entries(transform.requestMetadata ?? {}).map(([k, v]) => [k.toLowerCase(), v] as const),
    timeoutMs: spec.timeout ? durationMs(spec.timeout) : DEFAULT_GRPC_TIMEOUT_MS,
    spanName: spec.spanName || undefined,
    method,
  };
}

/**
 * gRPC channels to upstream hosts, shared by every resolver of the gateway and keyed by
 * address (so they survive config reloads that keep the host); closed with
 * {@link GrpcChannels.retainOnly} when no served API uses the host any more.
 */
export class GrpcChannels {
  private readonly clients = new Map<string, grpc.Client>();

  /** The channel for an upstream host (`addr:port`, TLS when the upstream uses TLS). */
  client(host: UpstreamHost): grpc.Client {
    const id = GrpcChannels.idOf(host);
    let client = this.clients.get(id);
    if (!client) {
      const tls = host.origin.startsWith('https:');
      const target = `${host.addr.includes(':') ? `[${host.addr}]` : host.addr}:${host.port}`;
      client = new grpc.Client(target, tls ? grpc.credentials.createSsl() : grpc.credentials.createInsecure());
      this.clients.set(id, client);
    }
    return client;
  }

  static idOf(host: UpstreamHost): string {
    return `${host.origin.startsWith('https:') ? 'tls' : 'plain'}:${host.addr}:${host.port}`;
  }

  /** Closes the channels to hosts whose id is not in `keep`. */
  retainOnly(keep: ReadonlySet<string>): void {
    for (const [id, client] of this.clients) {
      if (keep.has(id)) continue;
      this.clients.delete(id);
      client.close();
    }
  }

  close(): void {
    this.retainOnly(new Set());
  }
}

/** Binds a compiled `grpcResolver` to its upstream cluster. */
export function grpcResolver(compiled: CompiledGrpc, cluster: UpstreamCluster, channels: GrpcChannels, metrics: ResolverMetrics): FieldResolver {
  let method: Promise<MethodTypes> | undefined = compiled.method ? Promise.resolve(compiled.method) : undefined;
  const full = `${compiled.serviceName}/${compiled.methodName}`;
  const staticMessage = compiled.message.constant ? compiled.message.raw : undefined;

  const resolveMethod = (cluster: UpstreamCluster): Promise<MethodTypes> => {
    if (!method) {
      method = reflectDescriptors(channels.client(cluster.pick()), compiled.serviceName, compiled.timeoutMs)
        .then((root) => findMethod(root, compiled.serviceName, compiled.methodName))
        .catch((error: Error) => {
          // Not cached: the next request asks again (the server may come up or be fixed).
          method = undefined;
          throw fieldError(FieldErrorCodes.UPSTREAM_ERROR, `cannot resolve ${full} on upstream ${cluster.name} through server reflection: ${error.message}`);
        });
    }
    return method;
  };

  return async function resolveGrpc(parent: unknown, args: Record<string, unknown>, ctx: OperationContext): Promise<unknown> {
    const value = staticMessage ?? compiled.message.value({ parent, args, headers: ctx.headers });
    const key = `grpc ${cluster.name} ${full} ${JSON.stringify(value)}`;
    const span = resolverSpan(ctx.trace, compiled.spanName ?? `graphql.grpc ${full}`, { 'upstream_cluster': cluster.name, 'rpc.method': full });
    try {
      const result = await dedupe(ctx, key, async () => call(cluster, await resolveMethod(cluster), value, ctx.budget, span ? { ...ctx.trace!, traceparent: span.traceparent } : ctx.trace));
      span?.end();
      metrics.ok();
      return result;
    } catch (error) {
      span?.end((error as Error).message);
      metrics.error();
      throw error;
    }
  };

  function call(cluster: UpstreamCluster, types: MethodTypes, value: unknown, budget: OperationBudget, trace: TraceHeaders | undefined): Promise<unknown> {
    let request: protobuf.Message;
    try {
      request = types.requestType.fromObject((value ?? {}) as Record<string, unknown>);
    } catch (error) {
      return Promise.reject(fieldError(FieldErrorCodes.UPSTREAM_ERROR, `cannot build ${types.requestType.fullName.slice(1)} for ${full}: ${(error as Error).message}`));
    }
    const metadata = new grpc.Metadata();
    if (trace) for (const [k, v] of Object.entries(trace)) metadata.set(k, v);
    // Configured metadata last (its keys are unique): a resolution's own value wins.
    for (const [k, v] of compiled.metadata) metadata.set(k, v);
    const host = cluster.pick();
    const client = channels.client(host);
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        types.path,
        (message: protobuf.Message) => Buffer.from(types.requestType.encode(message).finish()),
        (bytes: Buffer) => bytes,
        request,
        metadata,
        { deadline: Date.now() + compiled.timeoutMs },
        (error, bytes) => {
          if (error) {
            if (error.code === grpc.status.UNAVAILABLE) cluster.eject(host);
            if (error.code === grpc.status.DEADLINE_EXCEEDED) {
              reject(fieldError(FieldErrorCodes.UPSTREAM_TIMEOUT, `upstream ${cluster.name} did not answer ${full} within ${compiled.timeoutMs}ms`, { grpc: { status: error.code } }));
              return;
            }
            reject(fieldError(FieldErrorCodes.UPSTREAM_ERROR, `upstream ${cluster.name} failed ${full}: ${grpc.status[error.code]}${error.details ? `: ${error.details}` : ''}`, { grpc: { status: error.code } }));
            return;
          }
          if (!budget.reserve(bytes!.length)) {
            reject(budget.bufferedError());
            return;
          }
          try {
            resolve(messageToJson(types.responseType, types.responseType.decode(bytes!)));
          } catch (e) {
            reject(fieldError(FieldErrorCodes.BAD_UPSTREAM_RESPONSE, `upstream ${cluster.name} answered ${full} with a message that does not decode as ${types.responseType.fullName.slice(1)}: ${(e as Error).message}`));
          }
        },
      );
    });
  }
}
