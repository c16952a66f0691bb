import { CodedError } from '../errors.ts';
import type { AuthService, Context, ExtAuthPlugin, PluginLogger, PluginStore } from '../contract/types.ts';
import { checkStoreOp, MemoryStore } from '../runtime/memory-store.ts';
import { decodeConfig } from '../runtime/decode-config.ts';
import { BadResponseError, toDecision, type PluginDecision } from '../runtime/to-decision.ts';
import { toCheckRequest } from './check-request.ts';
import { realClock } from './clock.ts';
import { withFailure, type PluginHarness, type TestFailure, type TestLogLine } from './harness.ts';

/** An error while starting a plugin in-process; `code` is the one the host would use. */
export class PluginStartError extends CodedError {
  override name = 'PluginStartError';
}

const DENY = (): PluginDecision => ({ allowed: false, status: 403, headers: [], body: '' });

/**
 * Runs a plugin object as it is, in this process's own realm, with the host's config decoding
 * and response validation. The plugin sees Node's globals here, not the sandbox's: prefer
 * `startPlugin('in-process', { entry, … })`, which runs the module with exactly the sandbox's
 * globals (./in-process-vm.ts). Kept for unit tests of plain objects.
 */
export async function runInProcess(plugin: ExtAuthPlugin, config: unknown = {}, secrets: Record<string, string> = {}): Promise<PluginHarness> {
  const logs: TestLogLine[] = [];
  const failures: TestFailure[] = [];
  const line = (level: TestLogLine['level']) => (message: string, fields?: Record<string, unknown>) => {
    // Through JSON, as in the sandbox: fields that would not survive the boundary do not here either.
    logs.push({ level, message: String(message), ...(fields === undefined ? {} : { fields: JSON.parse(JSON.stringify(fields) ?? 'null') }) });
  };
  const logger: PluginLogger = { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') };
  // As in the sandbox: secrets by name, and the memory store's JSON copies, bounds and TTLs (real time).
  const kept = new MemoryStore();
  const run = async (op: string, key: string, arg?: string | number, ttlMs?: number) => kept.run(checkStoreOp(op, key, arg, ttlMs, kept.limits));
  const json = (value: unknown): string => {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError('ctx.store: the value must be JSON-serialisable (not undefined or a function)');
    return text;
  };
  const store: PluginStore = Object.freeze({
    get: async (key: string): Promise<unknown> => {
      const text = await run('get', key);
      return typeof text === 'string' ? JSON.parse(text) : undefined;
    },
    set: async (key: string, value: unknown, options?: { ttlMs?: number }): Promise<void> => void (await run('set', key, json(value), options?.ttlMs)),
    delete: async (key: string): Promise<boolean> => (await run('delete', key)) === true,
    increment: async (key: string, by = 1, options?: { ttlMs?: number }): Promise<number> => (await run('increment', key, by, options?.ttlMs)) as number,
    setIfAbsent: async (key: string, value: unknown, options?: { ttlMs?: number }): Promise<boolean> => (await run('setIfAbsent', key, json(value), options?.ttlMs)) === true,
  });
  const ctx: Context = Object.freeze({ logger, secrets: Object.freeze({ ...secrets }), store });

  if (typeof plugin?.NewConfigInstance !== 'function' || typeof plugin.GetAuthService !== 'function') {
    throw new PluginStartError('GH_PLUGIN_BAD_EXPORT', 'not an ExtAuthPlugin: NewConfigInstance and GetAuthService are required');
  }
  const stage = async <T>(code: string, what: string, run: () => T | Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      throw new PluginStartError(code, `${what}: ${(error as Error).message}`, { cause: error });
    }
  };
  const defaults = await stage('GH_PLUGIN_INIT_FAILED', 'NewConfigInstance failed', () => plugin.NewConfigInstance(ctx));
  // Config arrives as JSON from a manifest; copy it so the test's object is not shared.
  const decoded = await stage('GH_PLUGIN_BAD_CONFIG', 'config does not fit the plugin', () => decodeConfig(defaults, JSON.parse(JSON.stringify(config ?? null))));
  const service: AuthService = await stage('GH_PLUGIN_INIT_FAILED', 'GetAuthService failed', () => plugin.GetAuthService(ctx, decoded));
  if (typeof service?.Start !== 'function' || typeof service.Authorize !== 'function') {
    throw new PluginStartError('GH_PLUGIN_INIT_FAILED', 'GetAuthService returned no AuthService (an object with Start and Authorize methods)');
  }
  await stage('GH_PLUGIN_START_FAILED', 'Start failed', () => service.Start(ctx));

  return {
    mode: 'in-process',
    logs,
    clock: realClock,
    failures,
    async authorize(request) {
      const checkRequest = JSON.parse(JSON.stringify(toCheckRequest(request)));
      let response: unknown;
      try {
        response = await service.Authorize(ctx, { CheckRequest: checkRequest, State: {} });
      } catch (error) {
        const failure = { code: 'GH_PLUGIN_THREW', message: `Authorize threw: ${(error as Error)?.message ?? String(error)}` };
        failures.push(failure);
        return withFailure(DENY(), failure);
      }
      try {
        const json = JSON.stringify(response);
        if (json === undefined) throw new BadResponseError(`Authorize returned ${typeof response}, not an AuthorizationResponse`);
        return toDecision(JSON.parse(json));
      } catch (error) {
        const failure = { code: 'GH_PLUGIN_BAD_RESPONSE', message: `bad response: ${(error as Error).message}` };
        failures.push(failure);
        return withFailure(DENY(), failure);
      }
    },
    async close() {},
  };
}
