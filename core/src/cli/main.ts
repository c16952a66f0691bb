// The `gatehouse` command. Started through core/bin/gatehouse.js, which picks the compiled
// or the source tree and the Node flags.
import { GatehouseError } from '../errors.ts';
import { flushLogs } from '../log/logger.ts';
import { configLimits } from '../config/limits.ts';

const USAGE = `usage: gatehouse <command> [flags]

commands:
  run        gateway + admin + extauth in one process (the embedded default)
  gateway    gateway + admin only; auth through --extauth-address
  extauth    the external auth server (Envoy ext_authz v3 over gRPC)
  validate   check manifests offline: gatehouse validate PATH...
  version    print the gateway version
  install    Kubernetes manifests: gatehouse install render --values FILE, or install crds
  graphql    gatehouse graphql discover --openapi FILE|URL | --grpc HOST:PORT: write a GraphQLApi
  check      the health of an install in a cluster: gatehouse check [--kubeconfig FILE]

Run "gatehouse <command> --help" for a command's flags.`;

type Command = (argv: string[]) => Promise<number | void>;

const COMMANDS: Record<string, () => Promise<Command>> = {
  run: async () => (await import('./run.ts')).runRun,
  gateway: async () => (await import('./gateway.ts')).runGateway,
  extauth: async () => (await import('./extauth.ts')).runExtAuth,
  validate: async () => (await import('./validate.ts')).runValidate,
  version: async () => (await import('./version.ts')).runVersion,
  install: async () => (await import('./install.ts')).runInstall,
  graphql: async () => (await import('./graphql.ts')).runGraphQL,
  check: async () => (await import('./check.ts')).runCheck,
};

/**
 * Runs one command; resolves with its exit code, or -1 while a server command keeps running.
 * Fatal errors are printed and end the process (servers may already hold open handles).
 */
export async function main(argv: string[]): Promise<number> {
  try {
    return await dispatch(argv);
  } catch (error) {
    if (error instanceof GatehouseError) process.stderr.write(`gatehouse: ${error.message} [${error.code}]\n`);
    else process.stderr.write(`gatehouse: ${(error as Error)?.stack ?? String(error)}\n`);
    flushLogs();
    process.exit(2);
  }
}

async function dispatch(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return name ? 0 : 2;
  }
  const load = COMMANDS[name];
  if (!load) {
    process.stderr.write(`gatehouse: unknown command "${name}"\n\n${USAGE}\n`);
    return 2;
  }
  // The configuration limits' environment variables, checked before any command reads configuration.
  configLimits();
  const code = await (await load())(rest);
  // A long-running command (run, gateway, extauth) returns undefined and keeps the process alive.
  if (code === undefined) return -1;
  flushLogs();
  return code;
}

if (import.meta.main) {
  const code = await main(process.argv.slice(2));
  if (code >= 0) process.exitCode = code;
}
