import { resourceChecks } from '../resource-checks.ts';
import { lazyGraphQLEndpoints } from '../graphql/execute/lazy-endpoints.ts';
import { ExtAuthCodes } from '../extauth/codes.ts';
import { createLogger } from '../log/logger.ts';
import { runGatewayProcess, type GatewayParts } from '../server/gateway-process.ts';
import { describeFlags, parseFlags, type FlagDef } from './flags.ts';
import { EXTAUTH_TOKEN_FLAGS, GATEWAY_FLAGS, duration, extAuthToken, gatewayFlagValues } from './gateway-flags.ts';

/** Auth flags of the gateway side (both shapes). */
export const AUTH_CLIENT_FLAGS: readonly FlagDef[] = [
  { name: 'extauth-timeout', type: 'string', default: '200ms', description: 'deadline of one auth check' },
  { name: 'extauth-failure-mode-allow', type: 'boolean', description: 'allow requests when extauth fails or times out (default: deny, 403)' },
];

const FLAGS: readonly FlagDef[] = [
  ...GATEWAY_FLAGS,
  { name: 'extauth-address', type: 'string', description: 'host:port of the extauth gRPC server; without it, routes that need auth are denied' },
  { name: 'extauth-warm-up', type: 'string', default: '10s', description: 'at start, wait up to this long for the extauth server connection before taking traffic (0s: do not wait)' },
  ...EXTAUTH_TOKEN_FLAGS,
  ...AUTH_CLIENT_FLAGS,
  { name: 'help', type: 'boolean', description: 'show this help' },
];

/** `gatehouse gateway`: gateway + admin; auth via a separate `gatehouse extauth` (the Kubernetes shape). */
export async function runGateway(argv: string[]): Promise<number | void> {
  const { values } = parseFlags(argv, FLAGS);
  if (values.help) {
    process.stdout.write(`usage: gatehouse gateway --config-dir DIR | --kube [flags]\n\n${describeFlags(FLAGS)}\n`);
    return 0;
  }
  const flags = gatewayFlagValues(values);
  const logger = createLogger('gateway');
  const parts = await gatewayParts();
  const address = values['extauth-address'] as string | undefined;
  if (address) {
    const { GrpcAuthorizer } = await import('../extauth/authorizers.ts');
    const failure = { timeoutMs: duration(values, 'extauth-timeout'), failureModeAllow: values['extauth-failure-mode-allow'] === true, token: extAuthToken(values) };
    // Constructed eagerly so a bad address fails at startup, not on the first request.
    new GrpcAuthorizer(address, { logger, ...failure }).close();
    const warmMs = duration(values, 'extauth-warm-up');
    parts.authorizer = async ({ logger }) => {
      const authorizer = new GrpcAuthorizer(address, { logger, ...failure });
      // Take traffic once the auth server's channel is up (a first check on a cold channel fails
      // closed); not for ever: an auth server that is down must not keep routes without auth down.
      if (warmMs > 0) {
        const started = performance.now();
        if (await authorizer.warm(warmMs)) logger.info({ address, waited_ms: Math.round(performance.now() - started) }, 'the ext_authz channel is ready');
        else logger.warn({ code: ExtAuthCodes.UNAVAILABLE, address, waited_ms: warmMs }, 'the ext_authz server is not reachable yet; serving anyway, and routes with external auth fail closed (403) until it is');
      }
      return authorizer;
    };
  }
  await runGatewayProcess({ ...flags, logger, parts });
}

/** The subsystems every gateway process plugs in (GraphQL, load-time checks); each loads on first use. */
export async function gatewayParts(): Promise<GatewayParts> {
  return { checks: resourceChecks, graphql: lazyGraphQLEndpoints };
}
