import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildPlugin } from '../build/build-plugin.ts';
import type { PluginMetadata } from '../build/metadata.ts';
import type { CheckRequest } from '../contract/types.ts';
import type { PluginDecision } from '../runtime/to-decision.ts';
import { toCheckRequest } from './check-request.ts';
import type { PluginHarness, TestFailure, TestLogLine } from './harness.ts';

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
    },
  ): Promise<HostStep>;
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
    const { metadata } = await buildPlugin({ entry, name: options.name, outDir: dir });
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
      const f = fields as { source?: string; code?: string; cause?: string; fields?: unknown };
      if (f.source === 'plugin') logs.push({ level, message, ...(f.fields === undefined ? {} : { fields: f.fields }) });
      else if (level === 'error' && typeof f.code === 'string') failures.push({ code: f.code, message: f.cause ?? message });
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
      },
    );
    return {
      mode: 'sandbox',
      metadata,
      logs,
      failures,
      hostLogs,
      authorize: (request) => step.authorize(toCheckRequest(request)),
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
