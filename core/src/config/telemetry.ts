import { channel } from 'node:diagnostics_channel';
import type { Kind } from './schema/kinds.ts';

/** What {@link ConfigChannels.load} carries: one configuration load's result. */
export interface ConfigLoadMessage {
  /** `rejected`: some resource was rejected. */
  readonly result: 'ok' | 'rejected';
  /** Rejected resources of this load, by kind (every kind, zeros included). */
  readonly rejectedByKind: ReadonlyMap<Kind, number>;
}

/** What the Kubernetes source's result channels carry. */
export interface ConfigResultMessage {
  readonly result: 'ok' | 'error';
}

/**
 * The config subsystem's telemetry, published on `node:diagnostics_channel` channels so that
 * config/ imports no other subsystem: admin/metrics.ts subscribes and turns them into metrics.
 * Publishing to a channel nobody subscribes to costs a property check.
 */
export const ConfigChannels = {
  /** Every configuration load ({@link ConfigLoadMessage}). */
  load: channel('gatehouse:config:load'),
  /** A Kubernetes Event posted ({@link ConfigResultMessage}). */
  kubeEvent: channel('gatehouse:config:kube-event'),
  /** A resource status written to the Kubernetes API ({@link ConfigResultMessage}). */
  kubeStatusWrite: channel('gatehouse:config:kube-status-write'),
  /** This replica took or lost the status Lease: `{ leading: boolean }`. */
  kubeStatusLeader: channel('gatehouse:config:kube-status-leader'),
} as const;
