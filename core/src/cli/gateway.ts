import { resourceChecks } from '../config/resource-checks.ts';
import { createLogger } from '../log/logger.ts';
import { runGatewayProcess, type GatewayParts } from '../server/gateway-process.ts';
import { describeFlags, parseFlags, type FlagDef, type FlagValues } from './flags.ts';
import { GATEWAY_FLAGS, gatewayFlagValues } from './gateway-flags.ts';

const FLAGS: readonly FlagDef[] = [
  ...GATEWAY_FLAGS,
  { name: 'extauth-address', type: 'string', description: 'host:port of the extauth gRPC server' },
  { name: 'extauth-timeout', type: 'string', default: '200ms', description: 'deadline of one auth check' },
  { name: 'extauth-failure-mode-allow', type: 'boolean', description: 'allow requests when extauth is unreachable (default: deny)' },
  { name: 'help', type: 'boolean', description: 'show this help' },
];

/** `gatehouse gateway`: gateway + admin; auth via a separate `gatehouse extauth` (the Kubernetes shape). */
export async function runGateway(argv: string[]): Promise<number | void> {
  const { values } = parseFlags(argv, FLAGS);
  if (values.help) {
    process.stdout.write(`usage: gatehouse gateway --config-dir DIR [flags]\n\n${describeFlags(FLAGS)}\n`);
    return 0;
  }
  const flags = gatewayFlagValues(values);
  const logger = createLogger('gateway');
  await runGatewayProcess({ ...flags, logger, parts: await gatewayParts(values) });
}

/** The subsystems a gateway process plugs in. */
export async function gatewayParts(_values: FlagValues): Promise<GatewayParts> {
  const { createGraphQLEndpoints } = await import('../graphql/index.ts');
  return { checks: await resourceChecks(), graphql: (deps) => createGraphQLEndpoints(deps) };
}
