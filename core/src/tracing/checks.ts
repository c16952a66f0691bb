import type { CheckContext } from '../config/check-context.ts';
import { ConfigCodes, type Diagnostic, type PathSegment } from '../config/diagnostic.ts';
import type { Resource } from '../config/resource.ts';
import type { ListenerTracingSpec } from './schema.ts';

const AT: PathSegment[] = ['spec', 'httpGateway', 'options', 'httpConnectionManagerSettings', 'tracing'];

/**
 * Load-time checks of a Gateway's `httpConnectionManagerSettings.tracing` (docs/tracing.md):
 * the collector Upstream exists and has an address; tracing without an OpenTelemetry provider
 * says where spans go. Warnings: a listener whose spans cannot be exported still serves.
 */
export function checkListenerTracing(resource: Resource<'Gateway'>, ctx: CheckContext): Diagnostic[] {
  const tracing = (resource.spec as { httpGateway?: { options?: { httpConnectionManagerSettings?: { tracing?: ListenerTracingSpec } } } }).httpGateway?.options?.httpConnectionManagerSettings?.tracing;
  if (!tracing) return [];
  const otel = tracing.openTelemetryConfig;
  const ref = otel?.collectorUpstreamRef;
  if (!ref) {
    return [ctx.at(AT, ConfigCodes.IGNORED, 'no openTelemetryConfig.collectorUpstreamRef: spans go to OTEL_EXPORTER_OTLP_ENDPOINT when the process has it, else nothing is traced', 'warning')];
  }
  const key = `Upstream/${ref.namespace ?? resource.namespace}/${ref.name}`;
  const upstream = ctx.resources.get(key) as { spec?: { static?: { hosts?: unknown[] }; kube?: unknown } } | undefined;
  const refAt: PathSegment[] = [...AT, 'openTelemetryConfig', 'collectorUpstreamRef'];
  if (!upstream) return [ctx.at(refAt, ConfigCodes.MISSING_REF, `references Upstream ${key.slice('Upstream/'.length)}, which does not exist or is not accepted: this listener's spans are not exported (requests are served)`, 'warning')];
  if (!upstream.spec?.static?.hosts?.length && !upstream.spec?.kube) return [ctx.at(refAt, ConfigCodes.INVALID, `Upstream ${key.slice('Upstream/'.length)} has no static hosts or kube service: this listener's spans are not exported`, 'warning')];
  return [];
}
