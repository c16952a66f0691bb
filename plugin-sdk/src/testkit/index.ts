/**
 * The plugin test kit: run a plugin in-process (a `node:vm` context with exactly the sandbox's
 * globals; fast, debuggable) or inside the real sandbox with the real host (limits, config
 * decoding and response checks exactly as in production).
 *
 *   import { startPlugin, TEST_MODES, expectDenied } from '@gatehouse/plugin-sdk/testkit';
 *   describe.each(TEST_MODES)('MyPlugin (%s)', (mode) => { ... await startPlugin(mode, { entry, name, config }) ... });
 */
export { checkRequest, toCheckRequest, type CheckRequestInit } from './check-request.ts';
export { createFakeClock, realClock, type FakeClock } from './clock.ts';
export { expectAllowed, expectDenied, expectFailure } from './expect.ts';
export { failureOf, type PluginHarness, type TestFailure, type TestLogLine, type TestMode } from './harness.ts';
export { PluginStartError, runInProcess } from './in-process.ts';
export { runEntryInProcess } from './in-process-vm.ts';
export { runInSandbox, type SandboxHarness, type SandboxOptions } from './sandbox.ts';
export { startPlugin, TEST_MODES } from './start-plugin.ts';
export type { PluginDecision } from '../runtime/to-decision.ts';
