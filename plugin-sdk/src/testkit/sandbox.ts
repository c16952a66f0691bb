import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildPlugin } from '../build/build-plugin.ts';
import { formatPluginFile, parsePluginFile, PLUGIN_GLOBAL, type PluginMetadata } from '../build/metadata.ts';
import type { CheckRequest } from '../contract/types.ts';
import type { PluginDecision } from '../runtime/to-decision.ts';
import { toCheckRequest } from './check-request.ts';
import { realClock, type FakeClock } from './clock.ts';
import { withFailure, type PluginHarness, type TestFailure, type TestLogLine } from './harness.ts';
import { FAKE_DATE_SOURCE } from './in-process-vm.ts';

/** The real host lives in @gatehouse/core; loaded by name so the SDK has no build-time dependency on it. */
const HOST_MODULE = '@gatehouse/core/extauth/plugins/index.ts';

type HostLogger = Record<'debug' | 'info' | 'warn' | 'error', (fields: object, message: string) => void>;
interface HostStep {
  authorize(request: CheckRequest): Promise<PluginDecision>;
  close?(): Promise<void>;
}
interface HostModule {
  createPluginStep(
    spec: {
      name: string;
      pluginFileName?: string;
      exportedSymbolName?: string;
      config?: Record<string, unknown>;
      egress?: { url: string }[];
      secretRefs?: Record<string, { name: string; key: string }>;
    },
    options: {
      pluginDir: string;
      memoryLimitMb?: number;
      cpuTimeoutMs?: number;
      callTimeoutMs?: number;
      startTimeoutMs?: number;
      wallTimeoutMs?: number;
      inline?: boolean;
      logger: HostLogger;
      resolveSecret?: (ref: { name: string; namespace: string; key: string }) => string | undefined;
      memoryRoute?: unknown;
    },
  ): Promise<HostStep>;
  /** The host's memory-store hub: each harness gets its own, on the test's clock. */
  MemoryHub: new (now: () => number) => unknown;
}

export interface SandboxOptions {
  /** The plugin's entry module; built with the real compiler (`gatehouse-plugin build`). */
  entry: string | URL;
  /** Plugin name (`--name`, the AuthConfig step's `name`). */
  name: string;
  exportedSymbolName?: string;
  /** The step's `config`. */
  config?: Record<string, unknown>;
  memoryLimitMb?: number;
  cpuTimeoutMs?: number;
  callTimeoutMs?: number;
  startTimeoutMs?: number;
  /** Default true: inline calls while cheap (as in production); false: always on the isolate thread. */
  inline?: boolean;
  /** Per-call wall deadline (default 1000 ms). */
  wallTimeoutMs?: number;
  /** `ctx.secrets` by name (the step's secretRefs, already resolved). */
  secrets?: Record<string, string>;
  /** Origins the plugin may fetch (the step's `egress` URL entries). */
  egress?: string[];
  /**
   * A fake clock (`createFakeClock()`). In-process: `Date`, `performance.now()`, timers and
   * `ctx.store` TTLs follow it. Sandbox: `Date`, `performance.now()` (read when each call
   * starts) and `ctx.store` TTLs follow it; timers keep real time there.
   */
  clock?: FakeClock;
  /** Sandbox mode: build with `--minify` (stacks still name the sources, through the source map). */
  minify?: boolean;
  /** Build with `--browser`: npm packages' browser builds are preferred (both modes). */
  browser?: boolean;
}

/** The field of a CheckRequest that carries the fake time into the sandbox (removed before the plugin sees it). */
const CLOCK_FIELD = '__gatehouseTestClock';

/**
 * Appended to a compiled plugin in sandbox mode with a fake clock: `Date` and `performance`
 * read a time the test kit sends with each call, and the plugin's exports are wrapped to take
 * it off the CheckRequest first. Appended, so the plugin's own line numbers stay.
 */
function clockShim(start: number): string {
  return `
;(() => {
  let time = ${start};
  const origin = time;
  (${FAKE_DATE_SOURCE})(() => time);
  Object.defineProperty(globalThis, 'performance', { value: Object.freeze({ now: () => time - origin, timeOrigin: origin }), writable: true, configurable: true });
  const take = (request) => {
    const check = request && request.CheckRequest;
    if (check && typeof check.${CLOCK_FIELD} === 'number') { time = check.${CLOCK_FIELD}; delete check.${CLOCK_FIELD}; }
  };
  const service = (s) => (s && typeof s.Authorize === 'function' ? { Start: (ctx) => s.Start(ctx), Authorize: (ctx, request) => { take(request); return s.Authorize(ctx, request); } } : s);
  const exported = globalThis.${PLUGIN_GLOBAL}, wrapped = {};
  for (const key of Object.keys(exported)) {
    const plugin = exported[key];
    wrapped[key] = plugin && typeof plugin.GetAuthService === 'function' ? {
      NewConfigInstance: (ctx) => plugin.NewConfigInstance(ctx),
      GetAuthService: (ctx, config) => { const s = plugin.GetAuthService(ctx, config); return s && typeof s.then === 'function' ? s.then(service) : service(s); },
    } : plugin;
  }
  globalThis.${PLUGIN_GLOBAL} = wrapped;
})();
`;
}

/**
 * Log lines come out of the isolate as fire-and-forget callbacks, a turn of the event loop
 * after the call that wrote them: two check phases later they have all arrived.
 */
function logsArrived(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}

/** A sandboxed harness also says what was built. */
export interface SandboxHarness extends PluginHarness {
  readonly metadata: PluginMetadata;
  /** Host log lines that are not plugin lines or failures (e.g. "plugin isolate rebuilt"). */
  readonly hostLogs: TestLogLine[];
}

/**
 * Builds the plugin with the real compiler and runs it in the real host: its own isolate,
 * memory and CPU limits, config decoding, response validation. Needs `@gatehouse/core`
 * installed and Node started with `--no-node-snapshot` (isolated-vm).
 */
export async function runInSandbox(options: SandboxOptions): Promise<SandboxHarness> {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-plugin-test-'));
  try {
    const entry = options.entry instanceof URL ? fileURLToPath(options.entry) : options.entry;
    const built = await buildPlugin({ entry, name: options.name, outDir: dir, minify: options.minify === true, browser: options.browser === true });
    let metadata = built.metadata;
    const clock = options.clock ?? realClock;
    if (options.clock) {
      const { metadata: m, body } = parsePluginFile(await readFile(built.file, 'utf8'));
      const file = formatPluginFile(body + clockShim(options.clock.now()), { name: m.name, exports: m.exports, gatewayVersion: m.gatewayVersion, sdkVersion: m.sdkVersion });
      await writeFile(built.file, file.text);
      metadata = file.metadata;
    }
    let host: HostModule;
    try {
      host = (await import(HOST_MODULE)) as HostModule;
    } catch (error) {
      throw new Error(`sandbox mode needs @gatehouse/core (the real plugin host): ${(error as Error).message}`, { cause: error });
    }
    const secrets = Object.entries(options.secrets ?? {});
    const logs: TestLogLine[] = [];
    const failures: TestFailure[] = [];
    const hostLogs: TestLogLine[] = [];
    const record = (level: TestLogLine['level']) => (fields: object, message: string) => {
      const f = fields as { source?: string; code?: string; cause?: string; fields?: unknown; stack?: string };
      if (f.source === 'plugin') logs.push({ level, message, ...(f.fields === undefined ? {} : { fields: f.fields }) });
      else if (level === 'error' && typeof f.code === 'string') failures.push({ code: f.code, message: f.cause ?? message, ...(typeof f.stack === 'string' ? { stack: f.stack } : {}) });
      else hostLogs.push({ level, message, fields });
    };
    const logger: HostLogger = { debug: record('debug'), info: record('info'), warn: record('warn'), error: record('error') };
    const step = await host.createPluginStep(
      {
        name: options.name,
        ...(options.exportedSymbolName ? { exportedSymbolName: options.exportedSymbolName } : {}),
        config: options.config ?? {},
        ...(options.egress?.length ? { egress: options.egress.map((url) => ({ url })) } : {}),
        // Each secret as its own test Secret: `secrets` is what the plugin sees.
        ...(secrets.length ? { secretRefs: Object.fromEntries(secrets.map(([name]) => [name, { name: 'test', key: name }])) } : {}),
      },
      {
        pluginDir: dir,
        memoryLimitMb: options.memoryLimitMb,
        cpuTimeoutMs: options.cpuTimeoutMs,
        callTimeoutMs: options.callTimeoutMs,
        startTimeoutMs: options.startTimeoutMs,
        wallTimeoutMs: options.wallTimeoutMs,
        inline: options.inline,
        logger,
        resolveSecret: (ref) => options.secrets?.[ref.key],
        // A memory store of this harness alone, whose TTLs follow the test's clock.
        memoryRoute: new host.MemoryHub(() => clock.now()),
      },
    );
    return {
      mode: 'sandbox',
      metadata,
      logs,
      failures,
      hostLogs,
      clock,
      async authorize(request) {
        const check = toCheckRequest(request);
        const sent = options.clock ? { ...check, [CLOCK_FIELD]: options.clock.now() } : check;
        const before = failures.length;
        const decision = await step.authorize(sent);
        await logsArrived();
        // A denial with a failure logged during this call is the host's, not the plugin's.
        return decision.allowed ? decision : withFailure(decision, failures.length > before ? failures[failures.length - 1] : undefined);
      },
      async close() {
        await step.close?.();
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}
