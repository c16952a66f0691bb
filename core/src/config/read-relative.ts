import { readFileSync } from 'node:fs';
import { dirname, resolve as resolvePath } from 'node:path';

/**
 * Reads a file a manifest names (`sslFiles.tlsCert`…): a relative path is taken from the
 * manifest's own directory. Throws a message naming the field, the full path and the error code.
 */
export function readManifestFile(manifestFile: string, field: string, path: string): string {
  const full = resolvePath(dirname(manifestFile || '.'), path);
  try {
    return readFileSync(full, 'utf8');
  } catch (error) {
    throw new Error(`${field}: cannot read ${full}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
}
