import { DirectoryWatcher, readManifests, type ParseCache, type SourceRead } from './directory.ts';
import { ConfigCodes } from '../diagnostic.ts';
import type { Logger } from '../../log/logger.ts';

export type { SourceRead } from './directory.ts';

/**
 * Where manifests come from (SPEC 2.1): a directory, or the Kubernetes API. A source hands on
 * whole reads (every document now in it), so the store's validation and last-accepted rules
 * are the same whatever the source.
 */
export interface ConfigSource<R extends SourceRead = SourceRead> {
  /** The first whole read. */
  read(): Promise<R>;
  /** Calls `listener` with a whole read after each settled change; reads never overlap. */
  watch(listener: (read: R) => Promise<void>): void;
  close(): Promise<void>;
}

/** The directory source: every manifest file below `dir`, re-read after changes settle. */
export class DirectorySource implements ConfigSource {
  private watcher: DirectoryWatcher | undefined;
  private readonly dir: string;
  private readonly logger: Logger;
  private readonly cache: ParseCache = new Map();

  constructor(dir: string, logger: Logger) {
    this.dir = dir;
    this.logger = logger;
  }

  read(): Promise<SourceRead> {
    return readManifests([this.dir], this.cache);
  }

  watch(listener: (read: SourceRead) => Promise<void>): void {
    this.watcher = new DirectoryWatcher(this.dir, listener, {
      cache: this.cache,
      onError: (error) => this.logger.error({ err: error, code: ConfigCodes.RELOAD }, 'reloading configuration failed; the last configuration keeps serving'),
    });
    this.watcher.start();
  }

  async close(): Promise<void> {
    await this.watcher?.close();
  }
}
