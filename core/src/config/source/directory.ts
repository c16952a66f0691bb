import { readdirSync, statSync, watch, type FSWatcher } from 'node:fs';
import { readFile, readdir, stat } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';
import { ConfigCodes, type Diagnostic } from '../diagnostic.ts';
import { linesOfText, type ManifestDocument } from '../manifest.ts';
import { parseManifestsOffThread } from './parse-off-thread.ts';

const MANIFEST = /\.(ya?ml|json)$/i;

/** Everything read from a config source in one pass. */
export interface SourceRead {
  readonly documents: ManifestDocument[];
  /** Files that could not be read or parsed. */
  readonly diagnostics: Diagnostic[];
}

/**
 * Reads every `*.yaml`, `*.yml` and `*.json` below `paths` (files or directories,
 * recursively, in sorted order). Hidden entries are skipped: Kubernetes ConfigMap
 * volumes hold a second copy of every file under `..data/`.
 */
export async function readManifests(paths: readonly string[], cache?: ParseCache): Promise<SourceRead> {
  const files: string[] = [];
  const diagnostics: Diagnostic[] = [];
  for (const path of paths) {
    try {
      const info = await stat(path);
      if (info.isDirectory()) files.push(...(await listManifestFiles(path)));
      else files.push(path);
    } catch (error) {
      diagnostics.push({ code: ConfigCodes.READ, severity: 'error', file: path, message: `cannot read: ${(error as Error).message}` });
    }
  }
  const documents: ManifestDocument[] = [];
  // A file named directly and also inside a named directory is read once.
  const seen = new Set<string>();
  for (const file of files) {
    const real = resolve(file);
    if (seen.has(real)) continue;
    seen.add(real);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      // Deleted between listing and reading: the next watch event reloads.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
      diagnostics.push({ code: ConfigCodes.READ, severity: 'error', file, message: `cannot read: ${(error as Error).message}` });
      continue;
    }
    let parsed = cache?.get(file);
    if (!parsed || parsed.text !== text) {
      // An unchanged file keeps its documents (the same objects): the store's validation cache
      // then skips them, so a reload costs what changed, not the whole directory.
      const result = await parseManifestsOffThread(file, text);
      const lines = linesOfText(file, text);
      parsed = { text, documents: result.documents.map((d) => lightDocument(d, lines)), diagnostics: result.diagnostics };
      cache?.set(file, parsed);
    }
    documents.push(...parsed.documents);
    diagnostics.push(...parsed.diagnostics);
  }
  if (cache) for (const file of cache.keys()) if (!seen.has(resolve(file))) cache.delete(file);
  return { documents, diagnostics };
}

/** Parsed files by path, with the text they were parsed from. */
export type ParseCache = Map<string, { text: string; documents: ManifestDocument[]; diagnostics: Diagnostic[] }>;

/** A document without its YAML syntax tree (which costs far more memory than the value); `lines` finds lines again when a diagnostic needs one. */
function lightDocument(doc: ManifestDocument, lines: ReturnType<typeof linesOfText>): ManifestDocument {
  return {
    file: doc.file,
    index: doc.index,
    line: doc.line,
    value: doc.value,
    lineOf: (path) => lines(doc.index, path, doc.line),
    ...(doc.refused !== undefined ? { refused: doc.refused } : {}),
    ...(doc.verdict ? { verdict: doc.verdict } : {}),
  };
}

async function listManifestFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files: string[] = [];
  for (const entry of entries) {
    const full = join(entry.parentPath, entry.name);
    const rel = relative(dir, full);
    if (rel.split(sep).some((part) => part.startsWith('.'))) continue;
    if (!MANIFEST.test(entry.name)) continue;
    if (entry.isFile() || (entry.isSymbolicLink() && (await stat(full).catch(() => undefined))?.isFile())) files.push(full);
  }
  return files.sort();
}

/**
 * Watches a config directory tree and calls `onChange` with a fresh read after changes
 * settle (debounced; editors and deploy tools write files in several steps). Reads never
 * overlap. Every directory gets its own non-recursive watch: Node's recursive watch on
 * Linux stops reporting a file once it has been replaced by rename twice, which is how
 * `kubectl cp`, editors and deploy tools write.
 */
export class DirectoryWatcher {
  private readonly watchers = new Map<string, FSWatcher>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly dir: string;
  private readonly debounceMs: number;
  private readonly onChange: (read: SourceRead) => void | Promise<void>;

  private readonly maxWaitMs: number;
  private pendingSince: number | undefined;
  private readonly onError: ((error: unknown) => void) | undefined;
  private readonly cache: ParseCache | undefined;

  constructor(dir: string, onChange: (read: SourceRead) => void | Promise<void>, options: { debounceMs?: number; maxWaitMs?: number; onError?: (error: unknown) => void; cache?: ParseCache } = {}) {
    this.cache = options.cache;
    this.dir = dir;
    this.onChange = onChange;
    this.debounceMs = options.debounceMs ?? 100;
    this.maxWaitMs = options.maxWaitMs ?? 1_000;
    this.onError = options.onError;
  }

  /** Starts watching. The caller does the first read itself. */
  start(): void {
    this.syncWatches();
  }

  /** Watches every (non-hidden) directory of the tree; drops watches of directories gone. */
  private syncWatches(): void {
    const dirs = new Set([this.dir, ...listDirectories(this.dir)]);
    for (const [dir, watcher] of this.watchers) {
      if (!dirs.has(dir)) {
        watcher.close();
        this.watchers.delete(dir);
      }
    }
    for (const dir of dirs) {
      if (this.watchers.has(dir)) continue;
      try {
        const watcher = watch(dir, (_event, name) => {
          if (name === null || isRelevant(dir, name)) this.schedule();
        });
        watcher.on('error', () => {
          watcher.close();
          this.watchers.delete(dir);
          this.schedule();
        });
        this.watchers.set(dir, watcher);
      } catch {
        // Removed between listing and watching: the parent's watch reports it.
      }
    }
  }

  private schedule(): void {
    if (this.closed) return;
    const now = performance.now();
    this.pendingSince ??= now;
    // A file rewritten every 10 ms kept the debounce from ever settling (issue 17 finding 15):
    // once changes have waited maxWaitMs, the reload runs anyway.
    if (this.timer && now - this.pendingSince >= this.maxWaitMs) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.pendingSince = undefined;
      this.running = this.running
        .then(async () => {
          if (this.closed) return;
          this.syncWatches();
          await this.onChange(await readManifests([this.dir], this.cache));
        })
        // A failed reload must not poison the chain (every later reload would be skipped) or
        // surface as an unhandled rejection; the next change tries again.
        .catch((error: unknown) => this.onError?.(error));
    }, this.debounceMs);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    for (const watcher of this.watchers.values()) watcher.close();
    this.watchers.clear();
    await this.running;
  }
}

function listDirectories(root: string): string[] {
  try {
    return readdirSync(root, { recursive: true, withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => join(e.parentPath, e.name))
      .filter((dir) => !relative(root, dir).split(sep).some((part) => part.startsWith('.')));
  } catch {
    return [];
  }
}

/**
 * Whether a change to `name` can change the configuration: a manifest, a directory, a
 * Kubernetes ConfigMap volume swap (`..data`), or something deleted. Other files (a log
 * written next to the manifests, an editor's swap file) do not trigger a reload.
 */
function isRelevant(dir: string, name: string): boolean {
  if (MANIFEST.test(name) || name.startsWith('..')) return true;
  try {
    return statSync(join(dir, name)).isDirectory();
  } catch {
    return true;
  }
}
