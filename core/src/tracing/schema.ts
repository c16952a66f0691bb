import Type from 'typebox';
import { Ignored, ResourceRef, Strict } from '../config/schema/common.ts';

/**
 * Gloo's tracing options (`projects/gloo/api/v1/options/tracing/tracing.proto`): the
 * connection manager's `tracing` (ListenerTracingSettings) and a route's `options.tracing`
 * (RouteTracingSettings). docs/tracing.md says what each field does in Gatehouse.
 */

/** A percentage 0–100 (Gloo's `google.protobuf.FloatValue`). */
const Percentage = Type.Number({ minimum: 0, maximum: 100 });

/** `tracing.options.gloo.solo.io.TracePercentages`. */
export const TracePercentages = Strict({
  clientSamplePercentage: Type.Optional(Percentage),
  randomSamplePercentage: Type.Optional(Percentage),
  overallSamplePercentage: Type.Optional(Percentage),
});

/** `solo.io.envoy.config.trace.v3.OpenTelemetryConfig`: where spans go (OTLP). */
export const OpenTelemetryConfig = Strict({
  collectorUpstreamRef: Type.Optional(ResourceRef),
  clusterName: Type.Optional(Ignored(Type.String(), 'clusterName names a cluster of Envoy\'s bootstrap, which Gatehouse does not have: spans go to collectorUpstreamRef or OTEL_EXPORTER_OTLP_ENDPOINT')),
  serviceName: Type.Optional(Type.String({ maxLength: 256 })),
  grpcService: Type.Optional(Ignored(Type.Unknown(), 'the collector is called over OTLP/gRPC with its Upstream\'s address; grpcService settings are not applied')),
  httpService: Type.Optional(Ignored(Type.Unknown(), 'the collector is called over OTLP/gRPC; httpService is not applied')),
  resourceDetectors: Type.Optional(Ignored(Type.Unknown(), 'resource detectors are not run')),
  sampler: Type.Optional(Ignored(Type.Unknown(), 'sampling follows tracePercentages and the caller\'s sampled flag')),
});

const OTHER_PROVIDER = 'only the OpenTelemetry provider (openTelemetryConfig) is applied: no spans go to this provider';

/** `tracing.options.gloo.solo.io.ListenerTracingSettings` (the connection manager's `tracing`). */
export const ListenerTracingSettings = Strict({
  requestHeadersForTags: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 64 })),
  verbose: Type.Optional(Type.Boolean()),
  tracePercentages: Type.Optional(TracePercentages),
  openTelemetryConfig: Type.Optional(OpenTelemetryConfig),
  zipkinConfig: Type.Optional(Ignored(Type.Unknown(), OTHER_PROVIDER)),
  datadogConfig: Type.Optional(Ignored(Type.Unknown(), OTHER_PROVIDER)),
  openCensusConfig: Type.Optional(Ignored(Type.Unknown(), OTHER_PROVIDER)),
  environmentVariablesForTags: Type.Optional(Type.Array(Strict({ tag: Type.String({ minLength: 1 }), name: Type.String({ minLength: 1 }), defaultValue: Type.Optional(Type.String()) }), { maxItems: 64 })),
  literalsForTags: Type.Optional(Type.Array(Strict({ tag: Type.String({ minLength: 1 }), value: Type.String() }), { maxItems: 64 })),
});
export type ListenerTracingSpec = Type.Static<typeof ListenerTracingSettings>;

/** `tracing.options.gloo.solo.io.RouteTracingSettings` (a route's `options.tracing`). */
export const RouteTracingSettings = Strict({
  routeDescriptor: Type.Optional(Type.String({ maxLength: 256 })),
  tracePercentages: Type.Optional(TracePercentages),
  propagate: Type.Optional(Type.Boolean()),
});
export type RouteTracingSpec = Type.Static<typeof RouteTracingSettings>;
