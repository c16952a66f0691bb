import { GatehouseError } from '../../errors.ts';
import { PluginCodes } from './codes.ts';

/** Whether this process runs with `--no-node-snapshot` (argv or NODE_OPTIONS). */
export function hasNoNodeSnapshot(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): boolean {
  return execArgv.includes('--no-node-snapshot') || nodeOptions.split(/\s+/).includes('--no-node-snapshot');
}

/**
 * isolated-vm on Node 20+ needs `--no-node-snapshot` (its README); without it isolates can
 * crash the process. Fail the plugin step with a fix instead of risking the server.
 */
export function assertIsolateFlags(execArgv?: readonly string[], nodeOptions?: string): void {
  if (hasNoNodeSnapshot(execArgv, nodeOptions)) return;
  throw new GatehouseError(
    PluginCodes.NODE_FLAGS,
    'auth plugins need Node.js started with --no-node-snapshot (isolated-vm requirement on Node 20+): start gatehouse through its bin (npx gatehouse …) or set NODE_OPTIONS=--no-node-snapshot',
  );
}
