import { createLogger } from '../log/logger.ts';
import { runGatewayProcess } from '../server/gateway-process.ts';
import { describeFlags, parseFlags, type FlagDef } from './flags.ts';
import { gatewayParts } from './gateway.ts';
import { GATEWAY_FLAGS, gatewayFlagValues } from './gateway-flags.ts';

const FLAGS: readonly FlagDef[] = [
  ...GATEWAY_FLAGS,
  { name: 'extauth-port', type: 'string', default: '8083', description: 'port of the embedded extauth gRPC server' },
  { name: 'plugin-dir', type: 'string', default: '/auth-plugins', description: 'directory of compiled auth plugins' },
  { name: 'help', type: 'boolean', description: 'show this help' },
];

/** `gatehouse run`: gateway + admin + extauth in one process (SPEC 1, the embedded default). */
export async function runRun(argv: string[]): Promise<number | void> {
  const { values } = parseFlags(argv, FLAGS);
  if (values.help) {
    process.stdout.write(`usage: gatehouse run --config-dir DIR [flags]\n\n${describeFlags(FLAGS)}\n`);
    return 0;
  }
  const flags = gatewayFlagValues(values);
  const logger = createLogger('gatehouse');
  await runGatewayProcess({ ...flags, logger, parts: await gatewayParts(values) });
}
