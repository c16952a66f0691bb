import { randomBytes } from 'node:crypto';
import { lstat, mkdir, readFile, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { InitCodes, InitError } from './errors.ts';
import type { PulledPlugins } from './pull.ts';

export interface InstallResult {
  /** Files written (new or changed), relative to the destination. */
  written: string[];
  /** Files already present with the same content (reruns are idempotent). */
  unchanged: string[];
}

/**
 * Merges the files of every source; the same path from two sources must have the same
 * content (else neither can be trusted to be the one the AuthConfig means).
 */
export function mergeSources(sources: readonly PulledPlugins[]): Map<string, { data: Buffer; source: string }> {
  const merged = new Map<string, { data: Buffer; source: string }>();
  for (const pulled of sources) {
    for (const [path, data] of pulled.files) {
      const existing = merged.get(path);
      if (existing && !existing.data.equals(data)) {
        throw new InitError(InitCodes.CONFLICT, `${path} is provided by both ${existing.source} and ${pulled.source} with different content; give the plugins distinct file names`);
      }
      merged.set(path, { data, source: pulled.source });
    }
  }
  return merged;
}

/**
 * Writes files into `dest` atomically: each goes to a temporary file in its final directory
 * and is renamed into place, so the auth server never reads half a plugin. Files already
 * present with equal content are left alone. Every target is checked to lie inside `dest`,
 * and no directory on the way may be a symbolic link. A failure leaves `dest` as it was: no
 * file, no temporary file, and no directory this run created (`dest` itself included).
 */
export async function installFiles(dest: string, files: Map<string, { data: Buffer }>): Promise<InstallResult> {
  const root = resolve(dest);
  const first = await mkdir(root, { recursive: true }).catch((error: Error) => {
    throw new InitError(InitCodes.WRITE_FAILED, `cannot create --dest ${root}: ${error.message}`, { cause: error });
  });
  // Directories this run creates, outermost first: a failure removes them again (issue 24 finding 14).
  const created: string[] = [];
  if (first !== undefined) for (let d = root; ; d = dirname(d)) {
    created.unshift(d);
    if (d === resolve(first) || dirname(d) === d) break;
  }
  const result: InstallResult = { written: [], unchanged: [] };
  // Two phases, so a failure part-way leaves --dest as it was: every new file is first written
  // to a temporary name next to its target; only when all are written are they renamed into place.
  const staged: { temp: string; target: string; path: string }[] = [];
  try {
    for (const [path, { data }] of [...files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const target = resolve(root, path);
      const inside = relative(root, target);
      // Paths were checked when read; this guards the write itself against any other caller.
      if (inside === '' || inside.startsWith(`..${sep}`) || inside === '..' || isAbsolute(inside)) {
        throw new InitError(InitCodes.UNSAFE_PATH, `${path} resolves outside --dest ${root}; refusing to write it`);
      }
      // Checked before anything is staged: a rename failing in the second phase could not be undone.
      const tooLong = inside.split(sep).find((part) => Buffer.byteLength(part) > 255);
      if (tooLong !== undefined || Buffer.byteLength(target) > 4000) {
        throw new InitError(InitCodes.WRITE_FAILED, `cannot write ${path.slice(0, 80)}…: name too long (ENAMETOOLONG: a file name is at most 255 bytes, a path 4000)`);
      }
      const dir = await ensureDir(root, inside.split(sep).slice(0, -1), created);
      const existing = await lstat(target).catch(() => undefined);
      if (existing?.isFile() && (await readFile(target)).equals(data)) {
        result.unchanged.push(path);
        continue;
      }
      if (existing?.isDirectory()) throw new InitError(InitCodes.WRITE_FAILED, `${target} is a directory; remove it so ${path} can be written`);
      const temp = join(dir, `.${path.split('/').pop()!.slice(0, 64)}.gatehouse-init-${randomBytes(6).toString('hex')}.tmp`);
      staged.push({ temp, target, path });
      await writeFile(temp, data, { mode: 0o644, flag: 'wx' });
    }
    for (const { temp, target, path } of staged) {
      // rename() replaces a link at `target` itself, never the file it points to.
      await rename(temp, target);
      result.written.push(path);
    }
  } catch (error) {
    await Promise.all(staged.map(({ temp }) => rm(temp, { force: true })));
    // Innermost first, and only while empty: rmdir never removes anything this run did not create.
    for (const d of created.reverse()) await rmdir(d).catch(() => undefined);
    if (error instanceof InitError) throw error;
    throw new InitError(InitCodes.WRITE_FAILED, `cannot write into --dest ${root}: ${(error as Error).message}`, { cause: error });
  }
  return result;
}

/** Creates `segments` below `root` one by one (adding them to `created`), refusing any that exists as something other than a real directory. */
async function ensureDir(root: string, segments: string[], created: string[]): Promise<string> {
  let current = root;
  for (const segment of segments) {
    current = join(current, segment);
    const info = await lstat(current).catch(() => undefined);
    if (!info) {
      await mkdir(current);
      created.push(current);
    }
    else if (!info.isDirectory()) throw new InitError(InitCodes.UNSAFE_ENTRY, `${current} exists and is not a directory (${info.isSymbolicLink() ? 'a symbolic link' : 'a file'}); refusing to write through it`);
  }
  return current;
}
