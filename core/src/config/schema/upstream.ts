import Type from 'typebox';
import { Duration, Strict } from './common.ts';

/** SPEC 3.1: static hosts, load-balanced round-robin with passive health. */
export const UpstreamSpec = Strict({
  static: Strict({
    hosts: Type.Array(
      Strict({
        addr: Type.String({ minLength: 1, description: 'host name or IP address' }),
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
