import { CheckCodes } from './cli/check.ts';
import { ConfigCodes } from './config/diagnostic.ts';
import { KubeCodes } from './config/source/kube.ts';
import { ErrorCodes } from './errors.ts';
import { ExtAuthCodes } from './extauth/codes.ts';
import { PluginCodes } from './extauth/plugins/codes.ts';
import { GraphQLConfigCodes } from './graphql/compile/errors.ts';
import { InstallCodes } from './install/values.ts';
import { RateLimitCodes } from './ratelimit/codes.ts';
import { RedisCodes } from './redis/client.ts';
import { InjaCodes } from './transform/inja.ts';
import { TransformCodes } from './transform/compile.ts';
import { JwtCodes } from './jwt/codes.ts';
import { OAuth2Codes } from './extauth/oauth2/codes.ts';
import { FilterCodes } from './proxy/filters/chain.ts';
// Type only (erased): the registry shape is the SDK's, the lowest package.
import type { ErrorRegistry } from '../../plugin-sdk/src/error-registry.ts';

const STATUS = 'status reason (resource `status`, `gatehouse validate`, admin `/config`), log line';

/** @gatehouse/core's codes. */
export const CORE_ERRORS: ErrorRegistry = {
  package: '@gatehouse/core',
  sources: ['core/src', 'core/bin'],
  tables: [
    { name: 'ErrorCodes', file: 'core/src/errors.ts', codes: ErrorCodes, where: 'HTTP header `x-gatehouse-error` (local replies), log line, CLI message' },
    {
      name: 'ConfigCodes',
      file: 'core/src/config/diagnostic.ts',
      codes: ConfigCodes,
      where: STATUS,
      described: {
        GH_CONFIG_PARSE: 'A manifest file is not valid YAML or JSON.',
        GH_CONFIG_NOT_A_RESOURCE: 'A document is not an object with `apiVersion`, `kind` and `metadata.name`.',
        GH_CONFIG_UNKNOWN_KIND: 'A `kind` Gatehouse does not serve.',
        GH_CONFIG_API_VERSION: 'An `apiVersion` that is not the kind\'s group and version.',
        GH_CONFIG_UNKNOWN_FIELD: 'A field the kind\'s schema does not have.',
        GH_CONFIG_SCHEMA: 'A field with the wrong type or value for the kind\'s schema.',
        GH_CONFIG_DUPLICATE: 'A second definition of the same kind, namespace and name (ignored).',
        GH_CONFIG_MISSING_REF: 'A reference to a resource that does not exist or is not accepted.',
        GH_CONFIG_REJECTED_REF: 'A reference to an AuthConfig that is rejected: its requests are denied until it is accepted (warning).',
        GH_CONFIG_DOMAIN_CONFLICT: 'A domain another VirtualService already serves on the same listener.',
        GH_CONFIG_BAD_DOMAIN: 'A domain that is not a host name, `*` or a one-label wildcard.',
        GH_CONFIG_BAD_REGEX: 'A regular expression RE2 does not accept (or a bad substitution).',
        GH_CONFIG_INVALID: 'A field value the load-time checks refuse (the message names the rule).',
        GH_CONFIG_READ: 'A manifest file or directory cannot be read.',
      },
    },
    {
      name: 'KubeCodes',
      file: 'core/src/config/source/kube.ts',
      codes: KubeCodes,
      where: 'log line',
      described: {
        GH_KUBE_WATCH: 'A Kubernetes list or watch failed; it is retried and the last configuration keeps serving.',
        GH_KUBE_STATUS: 'Writing a resource\'s `status` to the API server failed.',
        GH_KUBE_LEASE: 'Taking or renewing the status-writer Lease failed.',
      },
    },
    { name: 'RedisCodes', file: 'core/src/redis/client.ts', codes: RedisCodes, where: 'log line; in the message of a rate-limit backend failure' },
    { name: 'RateLimitCodes', file: 'core/src/ratelimit/codes.ts', codes: RateLimitCodes, where: `${STATUS}; RateLimitService answers` },
    { name: 'GraphQLConfigCodes', file: 'core/src/graphql/compile/errors.ts', codes: GraphQLConfigCodes, where: STATUS },
    { name: 'InstallCodes', file: 'core/src/install/values.ts', codes: InstallCodes, where: 'CLI message (`gatehouse install`)' },
    { name: 'InjaCodes', file: 'core/src/transform/inja.ts', codes: InjaCodes, where: `${STATUS}; HTTP header \`x-gatehouse-error\` (400)` },
    { name: 'TransformCodes', file: 'core/src/transform/compile.ts', codes: TransformCodes, where: `${STATUS}; HTTP header \`x-gatehouse-error\` (400, 413)` },
    { name: 'CheckCodes', file: 'core/src/cli/check.ts', codes: CheckCodes, where: 'CLI message (`gatehouse check`)' },
    { name: 'ExtAuthCodes', file: 'core/src/extauth/codes.ts', codes: ExtAuthCodes, where: 'log line; AuthConfig status reason (step build); HTTP header `x-gatehouse-error` (denials)' },
    { name: 'PluginCodes', file: 'core/src/extauth/plugins/codes.ts', codes: PluginCodes, where: 'log line; AuthConfig status reason (plugin load); the test kit\'s errors' },
    { name: 'JwtCodes', file: 'core/src/jwt/codes.ts', codes: JwtCodes, where: `HTTP header \`x-gatehouse-error\` (401, 403); ${STATUS}` },
    { name: 'OAuth2Codes', file: 'core/src/extauth/oauth2/codes.ts', codes: OAuth2Codes, where: 'log line (the denial or redirect the client gets names no cause)' },
    { name: 'FilterCodes', file: 'core/src/proxy/filters/chain.ts', codes: FilterCodes, where: 'HTTP header `x-gatehouse-error` (500), log line, `gatehouse_filter_failures_total`' },
  ],
  literals: [
    { code: 'GH_EXTAUTH_ERROR', files: ['core/src/proxy/filters/extauth.ts'], where: 'HTTP header `x-gatehouse-error` (403)', description: 'The auth check failed (the auth server errored or could not be asked): the request is denied.' },
    { code: 'GH_GRAPHQL_INTERNAL', files: ['core/src/proxy/gateway.ts'], where: 'HTTP header `x-gatehouse-error` (500)', description: 'The GraphQL endpoint failed unexpectedly while serving a request.' },
    { code: 'GH_FILTER_BUILD', files: ['core/src/proxy/routing/route-table.ts'], where: 'HTTP header `x-gatehouse-error` (500), log line', description: 'A route\'s filter could not be built from options that passed their checks (a bug): the route answers 500, never runs without the filter.' },
    { code: 'GH_CLIENT_GONE', files: ['core/src/proxy/filters/chain.ts'], where: 'access log (status 499)', description: 'The client left while a filter ran (auth, a body read): nothing is answered or sent upstream.' },
    { code: 'GH_CORS_PREFLIGHT', files: ['core/src/proxy/filters/cors.ts'], where: 'access log', description: 'A CORS preflight answered by the gateway (not an error: the code marks the local reply).' },
    { code: 'GH_BUFFER_TOO_LARGE', files: ['core/src/proxy/filters/buffer.ts'], where: 'HTTP header `x-gatehouse-error` (413)', description: 'A request body over the route\'s `bufferPerRoute` (or the Gateway\'s `buffer`) `maxRequestBytes`: refused before it reaches the upstream (docs/compression.md).' },
    { code: 'GH_GRPC_WEB_BAD_REQUEST', files: ['core/src/proxy/filters/grpc-web.ts'], where: 'log line', description: 'A gRPC-Web text request whose body is not base64 (or ends inside a group): the upstream call is cancelled (docs/grpc-web.md).' },
    { code: 'GH_FAULT_ABORT', files: ['core/src/proxy/filters/fault.ts'], where: 'HTTP header `x-gatehouse-error` (the configured status)', description: 'The route\'s `faults.abort` answered the request, as configured.' },
    { code: 'GH_ROUTE_DESTINATION', files: ['core/src/proxy/routing/route-table.ts'], where: 'log line', description: 'A route\'s destination could not be built from the served config; the route answers as unavailable.' },
    { code: 'GH_HTTPS_LISTEN', files: ['core/src/server/gateway-process.ts'], where: 'log line', description: 'The `--port` or `--https-port` listener could not bind its port (after Gateway resources went away, or the HTTPS listener on demand).' },
    { code: 'GH_GATEWAY_LISTEN', files: ['core/src/server/gateway-listeners.ts'], where: 'log line', description: 'A Gateway resource\'s listener could not bind (port taken, bad address); tried again with the next configuration (docs/gateway.md).' },
    { code: 'GH_TRACING_UNAVAILABLE', files: ['core/src/tracing/tracing.ts'], where: 'log line', description: 'The OpenTelemetry SDK could not be loaded for a configured collector: requests are served, not traced (docs/tracing.md).' },
    { code: 'GH_ACCESS_LOG_OPEN', files: ['core/src/server/gateway-listeners.ts'], where: 'log line', description: 'A Gateway access-log file sink cannot be opened; that listener serves without access lines (docs/gateway.md).' },
    { code: 'GH_TCP_PROXY', files: ['core/src/server/gateway-listeners.ts', 'core/src/server/tcp-proxy.ts'], where: 'log line', description: 'A tcpGateway host cannot forward (its certificate cannot be used, its Upstream has no hosts) and closes its connections, or a TCP proxy listener failed to accept (docs/tcp-proxy.md).' },
    { code: 'GH_WORKER_EXITED', files: ['core/src/server/gateway-process.ts'], where: 'log line', description: 'A traffic worker process died (or its replacement failed to start); a new one is forked.' },
    { code: 'GH_UNHANDLED', files: ['core/src/server/process-guards.ts'], where: 'log line', description: 'An unhandled error or rejection, logged and survived (too many in a minute: the process exits to be restarted).' },
    { code: 'GH_PLUGIN_CATASTROPHIC', files: ['core/src/server/process-guards.ts'], where: 'log line (stderr, fatal)', description: 'A plugin isolate failed catastrophically: the process is killed to be restarted.' },
    { code: 'GH_WATCHDOG', files: ['core/src/server/process-guards.ts'], where: 'log line (stderr, fatal)', description: 'The event loop stalled past the watchdog\'s limit: the process is killed to be restarted.' },
    { code: 'GH_WATCHDOG_MEMORY', files: ['core/src/server/process-guards.ts'], where: 'log line (stderr, fatal)', description: 'The process\'s resident memory passed its limit: it is killed to be restarted.' },
  ],
};
