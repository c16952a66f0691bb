import Type from 'typebox';
import { Metadata, Strict } from './common.ts';

/** Kubernetes' rule for Secret keys. */
const SecretKey = Type.String({ minLength: 1, maxLength: 253, pattern: '^[-._a-zA-Z0-9]+$' });

/**
 * A Kubernetes core `Secret` manifest (SPEC 2.2: `v1`, `data` base64 or `stringData`, types
 * `Opaque` and `kubernetes.io/tls`). Unlike the other kinds it has no `spec`: the fields are
 * Kubernetes' own, so a Secret applied to a cluster loads unchanged from a file.
 */
export const SecretManifest = Strict({
  apiVersion: Type.String(),
  kind: Type.Literal('Secret'),
  metadata: Metadata,
  type: Type.Optional(Type.String({ minLength: 1, maxLength: 253 })),
  data: Type.Optional(Type.Record(SecretKey, Type.String({ pattern: '^[A-Za-z0-9+/]*={0,2}$', description: 'base64 (standard alphabet, padded)' }))),
  stringData: Type.Optional(Type.Record(SecretKey, Type.String())),
  immutable: Type.Optional(Type.Boolean()),
});

/**
 * What Gatehouse keeps of a Secret (its resource "spec"): the type and every key's value,
 * `data` decoded and `stringData` merged over it (Kubernetes' rule). Values are never logged.
 */
export const SecretSpec = Strict({
  type: Type.String(),
  data: Type.Record(Type.String(), Type.String()),
  /** Other namespaces whose resources may reference it (`*`: any), from its annotation and the global setting (config/secret-grants.ts). */
  referableFrom: Type.Optional(Type.Array(Type.String())),
});
export type SecretSpec = Type.Static<typeof SecretSpec>;

/** Kubernetes' limit for one Secret's data. */
export const MAX_SECRET_BYTES = 1024 * 1024;
