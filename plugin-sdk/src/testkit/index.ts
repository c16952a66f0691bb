/**
 * The plugin test kit: run a plugin in-process (fast, debuggable) or inside the real sandbox
 * with the real host (limits, config decoding and response checks exactly as in production).
 *
 *   import { startPlugin, TEST_MODES } from '@gatehouse/plugin-sdk/testkit';
 *   describe.each(TEST_MODES)('MyPlugin (%s)', (mode) => { ... await startPlugin(mode, { entry, name, config }) ... });
 */
export { checkRequest, toCheckRequest, type CheckRequestInit } from './check-request.ts';
export type { PluginHarness, TestFailure, TestLogLine, TestMode } from './harness.ts';
export { PluginStartError, runInProcess } from './in-process.ts';
export { runInSandbox, type SandboxHarness, type SandboxOptions } from './sandbox.ts';
export { startPlugin, TEST_MODES } from './start-plugin.ts';
export type { PluginDecision } from '../runtime/to-decision.ts';
