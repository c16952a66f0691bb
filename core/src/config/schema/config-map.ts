import Type from 'typebox';
import { Metadata, Strict } from './common.ts';

/** Kubernetes' rule for ConfigMap keys. */
const ConfigMapKey = Type.String({ minLength: 1, maxLength: 253, pattern: '^[-._a-zA-Z0-9]+$' });

/**
 * A Kubernetes core `ConfigMap` manifest (`v1`, `data` text, `binaryData` base64). Like Secret
 * it has no `spec`: a ConfigMap applied to a cluster loads unchanged from a file. Gatehouse
 * reads them for a GraphQLApi's `grpcDescriptorRegistry.protoRefsList` (.proto sources).
 */
export const ConfigMapManifest = Strict({
  apiVersion: Type.String(),
  kind: Type.Literal('ConfigMap'),
  metadata: Metadata,
  data: Type.Optional(Type.Record(ConfigMapKey, Type.String())),
  binaryData: Type.Optional(Type.Record(ConfigMapKey, Type.String({ pattern: '^[A-Za-z0-9+/]*={0,2}$' }))),
  immutable: Type.Optional(Type.Boolean()),
});

/** What Gatehouse keeps of a ConfigMap: every key's text (`binaryData` decoded as UTF-8). */
export const ConfigMapSpec = Strict({
  data: Type.Record(Type.String(), Type.String()),
});
export type ConfigMapSpec = Type.Static<typeof ConfigMapSpec>;

/** Kubernetes' limit for one ConfigMap's data. */
export const MAX_CONFIG_MAP_BYTES = 1024 * 1024;
