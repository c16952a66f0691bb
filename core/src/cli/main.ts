#!/usr/bin/env -S node --no-node-snapshot
// `--no-node-snapshot`: isolated-vm (auth plugins) cannot run on Node 20+ without it.
import { GatehouseError } from '../errors.ts';
import { flushLogs } from '../log/logger.ts';

const USAGE = `usage: gatehouse <command> [flags]

commands:
  run        gateway + admin + extauth in one process (the embedded default)
  gateway    gateway + admin only; auth through --extauth-address
  extauth    the external auth server (Envoy ext_authz v3 over gRPC)
  validate   check manifests offline: gatehouse validate PATH...
  version    print the gateway version
  install    Kubernetes manifests: gatehouse install render --values FILE

Run "gatehouse <command> --help" for a command's flags.`;

type Command = (argv: string[]) => Promise<number | void>;

const COMMANDS: Record<string, () => Promise<Command>> = {
  run: async () => (await import('./run.ts')).runRun,
  gateway: async () => (await import('./gateway.ts')).runGateway,
  validate: async () => (await import('./validate.ts')).runValidate,
  version: async () => (await import('./version.ts')).runVersion,
};

/** Extra commands provided by other subsystems once present (extauth, install). */
const OPTIONAL: Record<string, { module: string; export: string }> = {
  extauth: { module: './extauth.ts', export: 'runExtAuth' },
  install: { module: './install.ts', export: 'runInstall' },
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return name ? 0 : 2;
  }
  let command: Command | undefined;
  if (COMMANDS[name]) command = await COMMANDS[name]();
  else if (OPTIONAL[name]) {
    const spec = OPTIONAL[name];
    const module = (await import(spec.module).catch(() => undefined)) as Record<string, Command> | undefined;
    command = module?.[spec.export];
    if (!command) {
      process.stderr.write(`gatehouse: "${name}" is not available in this build\n`);
      return 2;
    }
  }
  if (!command) {
    process.stderr.write(`gatehouse: unknown command "${name}"\n\n${USAGE}\n`);
    return 2;
  }
  const code = await command(rest);
  // A long-running command (run, gateway, extauth) returns undefined and keeps the process alive.
  return code ?? -1;
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) {
      flushLogs();
      process.exitCode = code;
    }
  },
  (error: unknown) => {
    if (error instanceof GatehouseError) process.stderr.write(`gatehouse: ${error.message} [${error.code}]\n`);
    else process.stderr.write(`gatehouse: ${(error as Error)?.stack ?? String(error)}\n`);
    flushLogs();
    process.exit(2);
  },
);
