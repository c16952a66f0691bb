/** Size limits for what gatehouse-init accepts; a plugin is one small script, so these are generous. */
export interface Limits {
  /** Largest single plugin file (uncompressed). */
  maxFileBytes: number;
  /** Largest layer blob downloaded (as stored, usually gzip). */
  maxLayerBytes: number;
  /** All plugin files of all sources together (uncompressed): what is held in memory and written. */
  maxTotalBytes: number;
  /** Plugin files of all sources together. */
  maxFiles: number;
}

export const DEFAULT_LIMITS: Limits = {
  maxFileBytes: 16 * 1024 * 1024,
  maxLayerBytes: 64 * 1024 * 1024,
  maxTotalBytes: 64 * 1024 * 1024,
  maxFiles: 1000,
};

/** Default overall deadline of one gatehouse-init run (`--timeout`). */
export const DEFAULT_TIMEOUT_MS = 5 * 60_000;
