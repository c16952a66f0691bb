import { watch, type FSWatcher } from 'node:fs';
import { readFile, readdir, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { ConfigCodes, type Diagnostic } from '../diagnostic.ts';
import { parseManifests, type ManifestDocument } from '../manifest.ts';

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
export async function readManifests(paths: readonly string[]): Promise<SourceRead> {
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
  for (const file of files) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      // Deleted between listing and reading: the next watch event reloads.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
      diagnostics.push({ code: ConfigCodes.READ, severity: 'error', file, message: `cannot read: ${(error as Error).message}` });
      continue;
    }
    const parsed = parseManifests(file, text);
    documents.push(...parsed.documents);
    diagnostics.push(...parsed.diagnostics);
  }
  return { documents, diagnostics };
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
 * Watches a config directory and calls `onChange` with a fresh read after changes settle
 * (debounced; editors write files in several steps). Reads never overlap.
 */
export class DirectoryWatcher {
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly dir: string;
  private readonly debounceMs: number;
  private readonly onChange: (read: SourceRead) => void | Promise<void>;

  constructor(dir: string, onChange: (read: SourceRead) => void | Promise<void>, options: { debounceMs?: number } = {}) {
    this.dir = dir;
    this.onChange = onChange;
    this.debounceMs = options.debounceMs ?? 100;
  }

  /** Starts watching. The caller does the first read itself. */
  start(): void {
    this.watcher = watch(this.dir, { recursive: true }, () => this.schedule());
    this.watcher.on('error', () => this.schedule());
  }

  private schedule(): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.running = this.running.then(async () => {
        if (this.closed) return;
        await this.onChange(await readManifests([this.dir]));
      });
    }, this.debounceMs);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.watcher?.close();
    await this.running;
  }
}
