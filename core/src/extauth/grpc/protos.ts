import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { loadSync, type Options, type PackageDefinition } from '@grpc/proto-loader';

/**
 * Envoy's ext_authz v3 protos, as shipped in `@grpc/grpc-js-xds` (its `deps/` folder holds
 * the envoy, xds/udpa, googleapis and protoc-gen-validate trees the files import).
 */
export const AUTHORIZATION_PROTO = 'envoy/service/auth/v3/external_auth.proto';

/** Fully qualified name of the Check service. */
export const AUTHORIZATION_SERVICE = 'envoy.service.auth.v3.Authorization';

/** Include directories for Envoy's protos inside `@grpc/grpc-js-xds`. */
export function envoyProtoIncludeDirs(): string[] {
  const require = createRequire(import.meta.url);
  const root = join(dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');
  return ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((dir) => join(root, dir));
}

/**
 * Loader options: proto field names (snake_case, as the CheckRequest contract uses),
 * enums as numbers (HTTP status codes), int64 as strings, no default values filled in
 * so absent fields stay absent.
 */
export const PROTO_OPTIONS: Options = { keepCase: true, longs: String, enums: Number, defaults: false, oneofs: true };

let cached: PackageDefinition | undefined;

/** The package definition holding `envoy.service.auth.v3.Authorization` (loaded once per process). */
export function authorizationPackage(): PackageDefinition {
  cached ??= loadSync(AUTHORIZATION_PROTO, { ...PROTO_OPTIONS, includeDirs: envoyProtoIncludeDirs() });
  return cached;
}
