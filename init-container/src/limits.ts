/** Size limits for what gatehouse-init accepts; a plugin is one small script, so these are generous. */
export interface Limits {
  /** Largest single plugin file (uncompressed). */
  maxFileBytes: number;
  /** Largest layer blob downloaded (as stored, usually gzip). */
  maxLayerBytes: number;
}

export const DEFAULT_LIMITS: Limits = {
  maxFileBytes: 16 * 1024 * 1024,
  maxLayerBytes: 64 * 1024 * 1024,
};
