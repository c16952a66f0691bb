import Type from 'typebox';
import { Duration, Strict } from './common.ts';

/** SPEC 3.1: static hosts, load-balanced round-robin with passive health. */
export const UpstreamSpec = Strict({
  static: Strict({
    hosts: Type.Array(
      Strict({
        // A bare host: no scheme, path, query, userinfo or port (those made the pool constructor throw).
        addr: Type.String({
          minLength: 1,
          maxLength: 253,
          pattern: '^(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?(?:\\.[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)*\\.?|[0-9A-Fa-f.]*:[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*)$',
          description: 'host name, IPv4 or IPv6 address (no scheme, port or path)',
        }),
        port: Type.Integer({ minimum: 1, maximum: 65535 }),
      }),
      { minItems: 1 },
    ),
    useTls: Type.Optional(Type.Boolean({ description: 'connect with TLS (SNI = addr)' })),
  }),
  connectionConfig: Type.Optional(
    Strict({
      connectTimeout: Type.Optional(Duration),
    }),
  ),
});
export type UpstreamSpec = Type.Static<typeof UpstreamSpec>;
