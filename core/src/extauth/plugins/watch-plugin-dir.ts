import { createHash } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { PluginHostLogger } from './isolate/sandbox-limits.ts';

export interface PluginDirWatcher {
  close(): void;
}

export interface WatchPluginDirOptions {
  /** Quiet time after the last change before reporting (a copy lands in several events). Default 200. */
  debounceMs?: number;
  /** Rescan period as a safety net for missed events or a directory created later. Default 5000. */
  pollMs?: number;
  logger?: PluginHostLogger;
}

async function snapshot(dir: string): Promise<Map<string, string>> {
  const hashes = new Map<string, string>();
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return hashes; // Missing for now: every file counts as removed, then added when it appears.
  }
  for (const entry of entries) {
    // `*.tmp` are half-written files of an atomic write (gatehouse-plugin build, gatehouse-init).
    if (!entry.isFile() || entry.name.endsWith('.tmp')) continue;
    try {
      hashes.set(entry.name, createHash('sha256').update(await readFile(join(dir, entry.name))).digest('hex'));
    } catch {
      // Removed between readdir and read: it shows up as removed.
    }
  }
  return hashes;
}

/**
 * Watches the plugin directory and reports, debounced, the names of files whose content
 * changed, appeared or disappeared. The auth engine rebuilds the AuthConfigs whose
 * `pluginAuth` steps load one of them (see `pluginFileName`) and swaps them in once the new
 * steps have started; the old steps serve until then.
 */
export async function watchPluginDir(pluginDir: string, onChange: (fileNames: string[]) => void, options: WatchPluginDirOptions = {}): Promise<PluginDirWatcher> {
  const { debounceMs = 200, pollMs = 5000, logger } = options;
  let known = await snapshot(pluginDir);
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let scanning: Promise<void> = Promise.resolve();
  let watcher: FSWatcher | undefined;

  const rescan = () => {
    scanning = scanning.then(async () => {
      if (closed) return;
      const next = await snapshot(pluginDir);
      const changed = new Set<string>();
      for (const [name, hash] of next) if (known.get(name) !== hash) changed.add(name);
      for (const name of known.keys()) if (!next.has(name)) changed.add(name);
      known = next;
      if (!watcher) startWatching();
      if (changed.size > 0 && !closed) {
        try {
          onChange([...changed].sort());
        } catch (error) {
          logger?.error({ dir: pluginDir, cause: (error as Error).message }, 'plugin directory change handler failed');
        }
      }
    });
  };
  const schedule = () => {
    clearTimeout(timer);
    timer = setTimeout(rescan, debounceMs);
  };
  const startWatching = () => {
    try {
      watcher = watch(pluginDir, { persistent: false }, schedule);
      watcher.on('error', () => {
        watcher?.close();
        watcher = undefined; // The next poll re-establishes it.
      });
    } catch {
      watcher = undefined; // Directory missing: polling notices when it appears.
    }
  };
  startWatching();
  const poll = setInterval(rescan, pollMs);
  poll.unref();

  return {
    close() {
      closed = true;
      clearTimeout(timer);
      clearInterval(poll);
      watcher?.close();
    },
  };
}
