import { accessSync, constants } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join } from 'node:path';
// proto-loader also adds Google's descriptor protos to protobufjs' common set (validate.proto imports them).
import { loadSync, type Options, type PackageDefinition } from '@grpc/proto-loader';
import protobuf from 'protobufjs';

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

let root: protobuf.Root | undefined;

/**
 * The same protos as {@link authorizationPackage}, as a protobufjs Root (proto field names,
 * include directories resolved as proto-loader does): for the server's own Check codec
 * (grpc/check-codec.ts), without proto-loader's package definition of every loaded type.
 */
export function authorizationRoot(): protobuf.Root {
  if (root) return root;
  const dirs = envoyProtoIncludeDirs();
  const loading = new protobuf.Root();
  const resolve = loading.resolvePath;
  loading.resolvePath = (origin, target) => {
    if (isAbsolute(target)) return target;
    for (const dir of dirs) {
      const path = join(dir, target);
      try {
        accessSync(path, constants.R_OK);
        return path;
      } catch {
        // the next include directory
      }
    }
    return resolve(origin, target);
  };
  loading.loadSync(AUTHORIZATION_PROTO, { keepCase: true });
  loading.resolveAll();
  root = loading;
  return root;
}
