import { GatehouseError } from '../errors.ts';
import { renderInstall, toYaml } from '../install/render.ts';
import { loadValues, resolveValues } from '../install/values.ts';
import { GATEWAY_VERSION } from '../version.ts';
import { describeFlags, parseFlags, type FlagDef } from './flags.ts';

const FLAGS: readonly FlagDef[] = [
  { name: 'values', type: 'string', description: 'values file (YAML); without it, the defaults' },
  { name: 'help', type: 'boolean', description: 'show this help' },
];

const USAGE = `usage: gatehouse install render --values FILE     prints Kubernetes manifests (apply with kubectl apply -f -)\n\n${describeFlags(FLAGS)}`;

/** `gatehouse install render --values FILE` (SPEC 6, 9): the manifests on stdout; exit 1 on bad values, 2 on usage errors. */
export async function runInstall(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return sub === undefined ? 2 : 0;
  }
  if (sub !== 'render') {
    process.stderr.write(`gatehouse install: unknown subcommand ${JSON.stringify(sub)}\n\n${USAGE}\n`);
    return 2;
  }
  let file: string | undefined;
  try {
    const { values, positionals } = parseFlags(rest, FLAGS);
    if (values.help) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    if (positionals.length > 0) throw new GatehouseError('GH_BAD_ARGUMENT', `unexpected argument ${JSON.stringify(positionals[0])}`);
    file = values.values as string | undefined;
  } catch (error) {
    process.stderr.write(`gatehouse install render: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  try {
    const resolved = file ? await loadValues(file, GATEWAY_VERSION) : resolveValues({}, GATEWAY_VERSION);
    process.stdout.write(toYaml(renderInstall(resolved)));
    return 0;
  } catch (error) {
    if (error instanceof GatehouseError) {
      process.stderr.write(`gatehouse install render: ${error.message} [${error.code}]\n`);
      return 1;
    }
    throw error;
  }
}
