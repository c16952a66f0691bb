#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { buildPlugin } from '../build/build-plugin.ts';
import { PluginBuildError } from '../build/errors.ts';
import { SDK_VERSION } from '../build/sdk-version.ts';
import { CodedError } from '../errors.ts';
import { assertNodeVersion } from '../node-version.ts';
import { GATEWAY_VERSION } from '../version.ts';

const USAGE = `usage:
  gatehouse-plugin init DIR [--name NAME] [--sdk SPEC] [--host SPEC]
                                                          a standalone plugin project in DIR (SPEC: a version or file:…tgz)
  gatehouse-plugin build ENTRY --name NAME [--out DIR] [--minify] [--browser]
                                                          writes DIR/NAME.js and its source map DIR/NAME.js.map
                                                          (default DIR: compiled-auth-plugins); --browser prefers
                                                          npm packages' browser builds (no Node.js modules)
  gatehouse-plugin check-node                             exits 1 with a clear message on a Node.js older than 24
  gatehouse-plugin dev [ENTRY] [--name NAME] [--config JSON|FILE.json] [--port 8080]
                                                          a local gateway with the plugin in front of an echo upstream,
                                                          rebuilt on change (default ENTRY: src/index.ts)
  gatehouse-plugin image build --from DIR --tag VERSION --output LAYOUT_DIR [--base REF]
  gatehouse-plugin image push --from LAYOUT_DIR REF [--insecure]
  gatehouse-plugin version                                prints the gateway version plugins are built for`;

type Io = { out: (line: string) => void; err: (line: string) => void };
const stdio: Io = { out: (line) => process.stdout.write(`${line}\n`), err: (line) => process.stderr.write(`${line}\n`) };

async function build(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { name: { type: 'string' }, out: { type: 'string' }, minify: { type: 'boolean' }, browser: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    io.out(USAGE);
    return 0;
  }
  if (positionals.length !== 1 || !values.name) {
    io.err(`gatehouse-plugin build: expected one ENTRY file and --name NAME\n${USAGE}`);
    return 2;
  }
  const result = await buildPlugin({ entry: positionals[0]!, name: values.name, outDir: values.out ?? process.env.GATEHOUSE_PLUGIN_OUT, minify: values.minify === true || process.env.GATEHOUSE_PLUGIN_MINIFY === '1', browser: values.browser === true || process.env.GATEHOUSE_PLUGIN_BROWSER === '1' });
  for (const warning of result.warnings) io.err(`warning: ${warning}`);
  const { metadata } = result;
  io.out(`built ${result.file} (plugin ${metadata.name}, exports ${metadata.exports.join(', ')}, gateway ${metadata.gatewayVersion}, ${metadata.contentHash})`);
  return 0;
}

async function init(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { name: { type: 'string' }, sdk: { type: 'string' }, host: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    io.out(USAGE);
    return 0;
  }
  if (positionals.length !== 1) {
    io.err(`gatehouse-plugin init: expected one DIR\n${USAGE}`);
    return 2;
  }
  const { initProject } = await import('./init.ts');
  const sdk = values.sdk ?? process.env.GATEHOUSE_PLUGIN_SDK;
  const host = values.host ?? process.env.GATEHOUSE_PLUGIN_HOST;
  const result = await initProject({ dir: positionals[0]!, ...(values.name ? { name: values.name } : {}), ...(sdk ? { sdk } : {}), ...(host ? { host } : {}) });
  io.out(`created plugin ${result.name} in ${result.dir}:\n  ${result.files.join('\n  ')}\nnext: cd ${result.dir} && npm install && npm test && npm run build`);
  return 0;
}

async function dev(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { name: { type: 'string' }, config: { type: 'string' }, port: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    io.out(USAGE);
    return 0;
  }
  if (positionals.length > 1) {
    io.err(`gatehouse-plugin dev: expected at most one ENTRY\n${USAGE}`);
    return 2;
  }
  const { startDev, DevCodes } = await import('./dev.ts');
  let config: Record<string, unknown> | undefined;
  if (values.config !== undefined) {
    const text = values.config.trim().startsWith('{') ? values.config : await (await import('node:fs/promises')).readFile(values.config, 'utf8');
    try {
      config = JSON.parse(text) as Record<string, unknown>;
    } catch (error) {
      throw new CodedError(DevCodes.BAD_PROJECT, `--config must be a JSON object or a .json file: ${(error as Error).message}`);
    }
    if (typeof config !== 'object' || config === null || Array.isArray(config)) throw new CodedError(DevCodes.BAD_PROJECT, '--config must be a JSON object (the step\'s config)');
  }
  const port = values.port === undefined ? 8080 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    io.err(`gatehouse-plugin dev: --port must be 0 to 65535\n${USAGE}`);
    return 2;
  }
  const session = await startDev({ dir: process.cwd(), ...(positionals[0] ? { entry: positionals[0] } : {}), ...(values.name ? { name: values.name } : {}), ...(config ? { config } : {}), port, out: io.out, err: io.err });
  const stop = () => void session.stop();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const code = await session.exited;
  return code === 0 || code === null ? 0 : 1;
}

/** `gatehouse-plugin image …` lives in ./image.ts (OCI tooling); loaded only when asked for. */
async function image(argv: string[]): Promise<number> {
  const { runImageCommand } = await import('./image.ts');
  return runImageCommand(argv);
}

/** Runs the CLI; returns the exit code (0 ok, 1 failure, 2 usage error). */
export async function main(argv: string[], io: Io = stdio): Promise<number> {
  const [command, ...rest] = argv;
  try {
    // First: on an older Node.js the failures come later and name the wrong cause (issue 11).
    assertNodeVersion();
    switch (command) {
      case 'init':
        return await init(rest, io);
      case 'build':
        return await build(rest, io);
      case 'dev':
        return await dev(rest, io);
      case 'image':
        return await image(rest);
      case 'version':
        io.out(GATEWAY_VERSION);
        return 0;
      case 'check-node':
        // The check above passed (on an older Node.js, bin/launch.js stops before this module loads).
        return 0;
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        io.out(`gatehouse-plugin ${SDK_VERSION} (gateway ${GATEWAY_VERSION})\n${USAGE}`);
        return command === undefined ? 2 : 0;
      default:
        io.err(`gatehouse-plugin: unknown command ${JSON.stringify(command)}\n${USAGE}`);
        return 2;
    }
  } catch (error) {
    if (error instanceof PluginBuildError || error instanceof CodedError) {
      io.err(`gatehouse-plugin: ${error.message} [${error.code}]`);
      return 1;
    }
    if ((error as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' || (error as { code?: string }).code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
      io.err(`gatehouse-plugin: ${(error as Error).message}\n${USAGE}`);
      return 2;
    }
    throw error;
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
