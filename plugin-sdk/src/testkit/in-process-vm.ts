import vm from 'node:vm';
import { fileURLToPath } from 'node:url';
import { bundlePlugin } from '../build/build-plugin.ts';
import { PLUGIN_GLOBAL } from '../build/metadata.ts';
import { stackMapper, withLocation } from '../build/source-map.ts';
import { RUNTIME_INSTALL_GLOBAL, sandboxRuntimeScript } from '../runtime/runtime-script.ts';
import type { HostApi } from '../runtime/host-api.ts';
import type { Outcome, RuntimeApi } from '../runtime/sandbox-runtime.ts';
import { BadResponseError, toDecision, type PluginDecision } from '../runtime/to-decision.ts';
import { createHostCrypto } from '../runtime/host/crypto.ts';
import { hostRandom } from '../runtime/host/random.ts';
import { hostUrl } from '../runtime/host/url.ts';
import { toCheckRequest } from './check-request.ts';
import { realClock } from './clock.ts';
import { withFailure, type PluginHarness, type TestFailure, type TestLogLine } from './harness.ts';
import { HostCalls, SANDBOX_DEFAULTS } from '../runtime/host/host-calls.ts';
import { loadEgress } from './host-calls.ts';
import { PluginStartError } from './in-process.ts';
import { bridge, copyInto, realmOf } from './realm.ts';
import type { SandboxOptions } from './sandbox.ts';
import { createTestStore } from './store.ts';

const DENY = (): PluginDecision => ({ allowed: false, status: 403, headers: [], body: '' });
const LEVELS = new Set(['debug', 'info', 'warn', 'error']);

/** Replaces secret values (4+ characters) in log text, as the host does. */
function redactor(secrets: Readonly<Record<string, string>>): (text: string) => string {
  const values = Object.values(secrets).filter((value) => value.length >= 4).sort((a, b) => b.length - a.length);
  return (text) => values.reduce((out, value) => out.split(value).join('[secret]'), text);
}

/**
 * JavaScript that replaces the context's `Date` with one reading `now()` (a fake clock): `Date.now()`,
 * `new Date()` and `Date()` follow it; everything else is the real `Date`. Shared with sandbox mode.
 */
export const FAKE_DATE_SOURCE = `(function (now) {
  const Real = Date, construct = Reflect.construct, get = Reflect.get;
  const fakeNow = function now() { return nowOf(); };
  const nowOf = now;
  const Fake = new Proxy(Real, {
    construct(target, args, newTarget) { return construct(target, args.length === 0 ? [nowOf()] : args, newTarget === Fake ? target : newTarget); },
    apply() { return new Real(nowOf()).toString(); },
    get(target, key, receiver) { return key === 'now' ? fakeNow : get(target, key, receiver); },
  });
  Object.defineProperty(globalThis, 'Date', { value: Fake, writable: true, configurable: true });
})`;

/**
 * In-process mode: the plugin is bundled as for the sandbox and run in a `node:vm` context that
 * holds exactly the sandbox's globals, installed by the sandbox's own runtime script, over the
 * same host API (crypto, URL and randomness by the host's own code, fetch through the host's
 * egress rules, timers and the store with the host's semantics). Not a security boundary and
 * without the sandbox's CPU and memory limits (sandbox mode has those); fast and debuggable.
 */
export async function runEntryInProcess(options: SandboxOptions): Promise<PluginHarness> {
  const entry = options.entry instanceof URL ? fileURLToPath(options.entry) : options.entry;
  const symbol = options.exportedSymbolName ?? options.name;
  const clock = options.clock ?? realClock;
  const wallTimeoutMs = options.wallTimeoutMs ?? SANDBOX_DEFAULTS.wallTimeoutMs;
  const where = `pluginAuth ${options.name} (in-process ${entry})`;
  const fail = (code: string, message: string, cause?: unknown): never => {
    throw new PluginStartError(code, `${where}: ${message}`, { cause });
  };

  const bundle = await bundlePlugin(entry, { name: options.name, browser: options.browser === true });
  if (!bundle.exports.includes(symbol)) {
    fail('GH_PLUGIN_SYMBOL_NOT_EXPORTED', `${entry} does not export "${symbol}" (it exports ${bundle.exports.join(', ') || 'nothing'}); set exportedSymbolName to one of those`);
  }
  // Named as the host names a compiled plugin; stacks are mapped to the sources as the host maps them.
  const scriptUrl = `file:///in-process/${options.name}.js`;
  const mapStack = stackMapper(bundle.map, scriptUrl);
  // Calls come from this process, so a stack goes on into its frames; the sandbox's ends at the plugin.
  const hostFrame = /\((?:node:|\/|file:\/\/(?!\/in-process\/))|at (?:async )?(?:node:|\/|file:\/\/(?!\/in-process\/))/;
  const ownStack = (stack: string): string | undefined => {
    const frames = stack.split('\n').filter((frame) => !hostFrame.test(frame));
    return frames.length ? mapStack(frames.join('\n')) : undefined;
  };
  const withStack = (message: string, stack: string | undefined): string => {
    const mapped = stack === undefined ? undefined : ownStack(stack);
    return mapped === undefined ? message : `${withLocation(message, mapped)}\n${mapped}`;
  };
  const egress = options.egress?.length ? await loadEgress(options.egress, wallTimeoutMs) : undefined;
  // The gateway's own host calls, on the test's clock: the same limits and messages in both modes.
  const calls = new HostCalls(egress, { deadlineMs: wallTimeoutMs, maxFetches: SANDBOX_DEFAULTS.maxFetches, maxTimers: SANDBOX_DEFAULTS.maxTimers }, clock);
  const hostCrypto = createHostCrypto();
  calls.subtle = hostCrypto.subtle;
  const secrets = Object.freeze({ ...(options.secrets ?? {}) });
  const redact = redactor(secrets);
  const logs: TestLogLine[] = [];
  const failures: TestFailure[] = [];

  const context = vm.createContext({}, { name: `gatehouse-plugin ${options.name}`, codeGeneration: { strings: true, wasm: true } });
  const realm = realmOf(context);
  if (options.clock) (vm.runInContext(FAKE_DATE_SOURCE, context) as (now: () => number) => void)(bridge(() => clock.now(), realm) as () => number);

  const waiters = new Map<number, (json: string) => void>();
  const early = new Map<number, string>();
  const host: HostApi = {
    log: (level, rawMessage, rawFields) => {
      if (!LEVELS.has(level) || typeof rawMessage !== 'string') return;
      const message = mapStack(redact(rawMessage));
      const fields = typeof rawFields === 'string' ? mapStack(redact(rawFields)) : rawFields;
      let parsed: unknown = fields;
      if (typeof fields === 'string') {
        try {
          parsed = JSON.parse(fields);
        } catch {
          // Truncated by the runtime: keep the text.
        }
      }
      logs.push({ level, message, ...(parsed === undefined ? {} : { fields: parsed }) });
    },
    random: hostRandom,
    crypto: hostCrypto,
    url: hostUrl,
    call: calls.dispatch,
    done: (id, json) => {
      const waiter = waiters.get(id);
      if (waiter) {
        waiters.delete(id);
        waiter(json);
      } else early.set(id, json);
    },
    store: createTestStore(clock),
  };
  const bridged = Object.fromEntries(Object.entries(host).map(([name, fn]) => [name, bridge(fn as (...args: unknown[]) => unknown, realm)])) as unknown as HostApi;
  // The same Wasm memory budget as the host's (the step's memory limit; 64 MB by default).
  bridged.limits = copyInto({ wasmMemoryMb: options.memoryLimitMb ?? SANDBOX_DEFAULTS.memoryLimitMb }, realm) as HostApi['limits'];

  const run = (code: string, filename: string): unknown => {
    try {
      return new vm.Script(code, { filename }).runInContext(context);
    } catch (error) {
      return fail('GH_PLUGIN_INIT_FAILED', `loading ${filename} threw: ${(error as Error)?.message ?? String(error)}`, error);
    }
  };
  run(await sandboxRuntimeScript(), 'gatehouse:sandbox-runtime.js');
  const install = vm.runInContext(`(() => { const install = globalThis.${RUNTIME_INSTALL_GLOBAL}; delete globalThis.${RUNTIME_INSTALL_GLOBAL}; return install; })()`, context) as (host: HostApi) => RuntimeApi;
  const api = install(bridged);
  run(bundle.code, scriptUrl);

  const outcome = (json: unknown): Outcome => JSON.parse(String(json)) as Outcome;
  calls.begin();
  try {
    const init = outcome(await api.init(symbol, PLUGIN_GLOBAL, JSON.stringify(options.config ?? {}), JSON.stringify(secrets)));
    if ('ok' in init && !init.ok) {
      const code = init.stage === 'export' ? 'GH_PLUGIN_BAD_EXPORT' : init.stage === 'config' ? 'GH_PLUGIN_BAD_CONFIG' : 'GH_PLUGIN_INIT_FAILED';
      const what = init.stage === 'config' ? 'config does not fit the plugin' : init.stage === 'export' ? `export "${symbol}"` : `${init.stage === 'new-config' ? 'NewConfigInstance' : 'GetAuthService'} failed`;
      fail(code, withStack(`${what}: ${init.error}`, init.stack));
    }
    const start = outcome(await api.start());
    if ('ok' in start && !start.ok) fail('GH_PLUGIN_START_FAILED', withStack(`Start failed: ${start.error}`, start.stack));
  } finally {
    calls.end();
  }

  /** The answer of pending call `id`, or a timeout failure at the wall deadline (real time, as in the sandbox). */
  const wait = (id: number): Promise<string | TestFailure> => {
    const ready = early.get(id);
    if (ready !== undefined) {
      early.delete(id);
      return Promise.resolve(ready);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        waiters.delete(id);
        resolve({ code: 'GH_PLUGIN_TIMEOUT', message: `Authorize did not answer within the ${wallTimeoutMs} ms wall deadline` });
      }, wallTimeoutMs);
      waiters.set(id, (json) => {
        clearTimeout(timer);
        resolve(json);
      });
    });
  };
  const decide = (answer: string | TestFailure): PluginDecision => {
    let failure: TestFailure;
    if (typeof answer !== 'string') failure = answer;
    else {
      const result = outcome(answer);
      if ('ok' in result && result.ok) {
        try {
          return toDecision(result.response);
        } catch (error) {
          if (!(error instanceof BadResponseError)) throw error;
          failure = { code: 'GH_PLUGIN_BAD_RESPONSE', message: `bad response: ${error.message}` };
        }
      } else if ('ok' in result) {
        failure = result.stage === 'authorize' ? { code: 'GH_PLUGIN_THREW', message: `Authorize threw: ${result.error}` } : { code: 'GH_PLUGIN_BAD_RESPONSE', message: `bad response: ${result.error}` };
        const stack = result.stack ? ownStack(result.stack) : undefined;
        if (stack) failure.stack = stack;
      } else failure = { code: 'GH_PLUGIN_BAD_RESPONSE', message: 'the sandbox answered with a pending call where an answer was due' };
    }
    failures.push(failure);
    return withFailure(DENY(), failure);
  };

  return {
    mode: 'in-process',
    logs,
    failures,
    clock,
    async authorize(request) {
      const json = JSON.stringify({ CheckRequest: toCheckRequest(request), State: {} });
      calls.begin();
      try {
        const first = outcome(api.authorize(json, true));
        return decide('pending' in first ? await wait(first.pending) : JSON.stringify(first));
      } finally {
        calls.end();
      }
    },
    async close() {
      calls.cancelAll(true);
    },
  };
}
