import { pathToFileURL } from 'node:url';
import type { ExtAuthPlugin } from '../contract/types.ts';
import type { PluginHarness, TestMode } from './harness.ts';
import { PluginStartError, runInProcess } from './in-process.ts';
import { runInSandbox, type SandboxOptions } from './sandbox.ts';

/** Both modes, for `describe.each(TEST_MODES)`: one suite proves the logic and the sandboxed build. */
export const TEST_MODES: readonly TestMode[] = ['in-process', 'sandbox'];

/**
 * Starts the plugin exported by `entry` under `exportedSymbolName ?? name`, in this process
 * or in the real sandbox. Same options and same answers either way.
 */
export async function startPlugin(mode: TestMode, options: SandboxOptions): Promise<PluginHarness> {
  if (mode === 'sandbox') return runInSandbox(options);
  const url = options.entry instanceof URL ? options.entry.href : pathToFileURL(options.entry).href;
  const symbol = options.exportedSymbolName ?? options.name;
  const module = (await import(url)) as Record<string, unknown>;
  if (!(symbol in module)) {
    throw new PluginStartError('GH_PLUGIN_SYMBOL_NOT_EXPORTED', `${url} does not export "${symbol}" (it exports ${Object.keys(module).join(', ') || 'nothing'})`);
  }
  return runInProcess(module[symbol] as ExtAuthPlugin, options.config ?? {}, options.secrets);
}
