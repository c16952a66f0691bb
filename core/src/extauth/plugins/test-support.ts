import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPlugin } from '@gatehouse/plugin-sdk/build';
import type { CheckRequest } from '../step.ts';
import type { PluginHostLogger } from './isolate/sandbox-limits.ts';

/** Test helper: a logger that records what the host logs. */
export function recordingLogger(): PluginHostLogger & { lines: { level: string; message: string; fields: Record<string, unknown> }[] } {
  const lines: { level: string; message: string; fields: Record<string, unknown> }[] = [];
  const at = (level: string) => (fields: object, message: string) => void lines.push({ level, message, fields: fields as Record<string, unknown> });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** Test helper: a CheckRequest with the given headers. */
export function request(headers: Record<string, string> = {}): CheckRequest {
  return { attributes: { request: { http: { method: 'GET', path: '/', host: 'example.com', scheme: 'http', headers } }, context_extensions: {} } };
}

/** Test helper: compiles fixtures/<fixture>.ts and plugins into a fresh plugin directory. */
export async function pluginDir(builds: { entry: URL; name: string; gatewayVersion?: string }[]): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-plugins-'));
  for (const build of builds) await buildPlugin({ entry: build.entry.pathname, name: build.name, outDir: dir, gatewayVersion: build.gatewayVersion });
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

export const HOSTILE = new URL('./fixtures/hostile.ts', import.meta.url);
export const REQUIRED_HEADER = new URL('../../../../plugins/required-header/src/index.ts', import.meta.url);

/** Test helper: the event loop's worst gap (ms) between 5 ms ticks from now until `stop()`. */
export function watchLoopGaps(): { stop(): number } {
  let worst = 0;
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 5);
  return {
    stop() {
      clearInterval(ticker);
      return worst;
    },
  };
}
