import { assertNodeVersion } from '../node-version.ts';
import type { PluginHarness, TestMode } from './harness.ts';
import { runEntryInProcess } from './in-process-vm.ts';
import { runInSandbox, type SandboxOptions } from './sandbox.ts';

/** Both modes, for `describe.each(TEST_MODES)`: one suite proves the logic and the sandboxed build. */
export const TEST_MODES: readonly TestMode[] = ['in-process', 'sandbox'];

/**
 * Starts the plugin exported by `entry` under `exportedSymbolName ?? name`, in this process
 * (a `node:vm` context with exactly the sandbox's globals) or in the real sandbox. Same
 * options and same answers either way.
 */
export async function startPlugin(mode: TestMode, options: SandboxOptions): Promise<PluginHarness> {
  assertNodeVersion();
  if (mode === 'sandbox') return runInSandbox(options);
  if (mode !== 'in-process') throw new TypeError(`startPlugin: mode must be "in-process" or "sandbox", got ${JSON.stringify(mode)}`);
  return runEntryInProcess(options);
}
