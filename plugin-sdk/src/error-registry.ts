import { BuildCodes } from './build/errors.ts';
import { DevCodes } from './cli/dev.ts';
import { PluginInitCodes } from './cli/init.ts';
import { NODE_VERSION_CODE } from './node-version.ts';
import { OciCodes } from './oci/errors.ts';

/** One `*Codes` table of a package: its codes, the file that defines it (its doc comments describe them), where they show. */
export interface CodeTable {
  readonly name: string;
  readonly file: string;
  readonly codes: Readonly<Record<string, string>>;
  /** Where a code of this table reaches an operator: HTTP header `x-gatehouse-error`, log line, status reason, CLI message. */
  readonly where: string;
  /** Descriptions of entries that have no doc comment in the table, by code. */
  readonly described?: Readonly<Record<string, string>>;
}

/** A code written as a string literal where it is used (no table holds it). */
export interface LiteralCode {
  readonly code: string;
  readonly files: readonly string[];
  readonly where: string;
  readonly description: string;
}

/**
 * The error-code registry of one package (core, plugin-sdk and init-container each have one):
 * `core/scripts/errors-doc.ts` writes docs/errors.md from the three, and a test fails when a
 * `GH_…` code in a package's sources is missing from its registry or from that page.
 */
export interface ErrorRegistry {
  readonly package: string;
  /** Source folders whose `GH_…` literals must all be registered. */
  readonly sources: readonly string[];
  readonly tables: readonly CodeTable[];
  readonly literals: readonly LiteralCode[];
}

const HOST = 'the test kit\'s errors (as the plugin host, @gatehouse/core\'s PluginCodes, reports it)';

/** @gatehouse/plugin-sdk's codes. */
export const SDK_ERRORS: ErrorRegistry = {
  package: '@gatehouse/plugin-sdk',
  sources: ['plugin-sdk/src', 'plugin-sdk/bin'],
  tables: [
    { name: 'OciCodes', file: 'plugin-sdk/src/oci/errors.ts', codes: OciCodes, where: 'CLI message (`gatehouse-plugin image …`), thrown errors\' `code`; gatehouse-init\'s messages' },
    { name: 'BuildCodes', file: 'plugin-sdk/src/build/errors.ts', codes: BuildCodes, where: 'CLI message (`gatehouse-plugin build`), thrown errors\' `code`' },
    { name: 'PluginInitCodes', file: 'plugin-sdk/src/cli/init.ts', codes: PluginInitCodes, where: 'CLI message (`gatehouse-plugin init`)' },
    { name: 'DevCodes', file: 'plugin-sdk/src/cli/dev.ts', codes: DevCodes, where: 'CLI message (`gatehouse-plugin dev`)' },
  ],
  literals: [
    { code: NODE_VERSION_CODE, files: ['plugin-sdk/src/node-version.ts'], where: 'CLI message, the test kit\'s errors', description: 'Node.js is older than 24, which the SDK and the plugin host need.' },
    { code: 'GH_PLUGIN_SYMBOL_NOT_EXPORTED', files: ['plugin-sdk/src/testkit/in-process-vm.ts'], where: HOST, description: 'The exported symbol name is not among the plugin\'s exports.' },
    { code: 'GH_PLUGIN_BAD_EXPORT', files: ['plugin-sdk/src/testkit/in-process.ts', 'plugin-sdk/src/testkit/in-process-vm.ts'], where: HOST, description: 'The exported symbol is not an ExtAuthPlugin (no NewConfigInstance / GetAuthService).' },
    { code: 'GH_PLUGIN_BAD_CONFIG', files: ['plugin-sdk/src/testkit/in-process.ts', 'plugin-sdk/src/testkit/in-process-vm.ts'], where: HOST, description: 'The step\'s `config` does not decode onto the plugin\'s config object.' },
    { code: 'GH_PLUGIN_INIT_FAILED', files: ['plugin-sdk/src/testkit/in-process.ts', 'plugin-sdk/src/testkit/in-process-vm.ts'], where: HOST, description: 'The script, NewConfigInstance or GetAuthService threw.' },
    { code: 'GH_PLUGIN_START_FAILED', files: ['plugin-sdk/src/testkit/in-process.ts', 'plugin-sdk/src/testkit/in-process-vm.ts'], where: HOST, description: 'Start threw or rejected.' },
    { code: 'GH_PLUGIN_THREW', files: ['plugin-sdk/src/testkit/in-process.ts', 'plugin-sdk/src/testkit/in-process-vm.ts'], where: HOST, description: 'Authorize threw or rejected.' },
    { code: 'GH_PLUGIN_TIMEOUT', files: ['plugin-sdk/src/testkit/in-process-vm.ts'], where: HOST, description: 'Authorize ran past its time limit.' },
    { code: 'GH_PLUGIN_BAD_RESPONSE', files: ['plugin-sdk/src/testkit/in-process.ts', 'plugin-sdk/src/testkit/in-process-vm.ts'], where: HOST, description: 'Authorize returned something that is not a valid AuthorizationResponse.' },
  ],
};
