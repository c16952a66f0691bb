import { Parser, type ReadEntry } from 'tar';
import { InitCodes, InitError } from './errors.ts';
import type { Limits } from './limits.ts';

/** The directory of an image that holds compiled plugins (SPEC 6). */
export const PLUGIN_DIR = 'compiled-auth-plugins';

/** Plugin files gathered from an image: path below compiled-auth-plugins/ → content. */
export type PluginFiles = Map<string, Buffer>;

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';

/**
 * Checks an entry path and returns it normalised (no leading `./`, no empty or `.` segments,
 * no trailing `/`). Absolute paths and `..` segments are refused wherever they appear: no
 * well-formed image layer has them, and they are how extraction escapes its directory.
 */
export function checkEntryPath(raw: string, where: string): string {
  if (raw.startsWith('/') || /^[A-Za-z]:/.test(raw) || raw.startsWith('\\')) {
    throw new InitError(InitCodes.UNSAFE_PATH, `${where}: entry ${JSON.stringify(raw)} has an absolute path; refusing the image (layer paths must be relative)`);
  }
  const segments = raw.split(/[/\\]/).filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) {
    throw new InitError(InitCodes.UNSAFE_PATH, `${where}: entry ${JSON.stringify(raw)} contains "..", which could escape the destination; refusing the image`);
  }
  if (segments.some((s) => s.includes('\0'))) throw new InitError(InitCodes.UNSAFE_PATH, `${where}: entry path contains a NUL byte; refusing the image`);
  return segments.join('/');
}

/**
 * Applies one layer to `files`, in layer order: regular files under compiled-auth-plugins/
 * are collected (each at most `maxFileBytes`), whiteouts remove earlier ones (image-spec
 * layer.md), everything else in the image is skipped. A link, device, FIFO or other special
 * entry at or under compiled-auth-plugins/ refuses the image. Nothing is written here: callers
 * commit `files` only after every layer stream has ended with its digest verified.
 */
export async function applyLayer(chunks: AsyncIterable<Uint8Array>, files: PluginFiles, where: string, limits: Limits): Promise<void> {
  // Entries are changed in a copy so a refused layer leaves `files` as it was.
  const next: PluginFiles = new Map(files);
  let failure: unknown;
  // Settles when the parser is done for any reason, so no wait below can outlive a failure.
  let settle!: () => void;
  const settled = new Promise<void>((resolve) => (settle = resolve));
  const fail = (error: unknown) => {
    failure ??= error;
    settle();
  };
  // Not strict, so that a layer missing only its end-of-archive blocks (umoci writes those; Go's
  // archive/tar and umoci read them) is accepted. Every other warning still refuses the layer.
  const parser = new Parser({ strict: false, maxDecompressionRatio: 1000 });
  let truncated: ReadEntry | undefined;
  parser.on('entry', (entry: ReadEntry) => {
    try {
      onEntry(entry, next, where, limits);
    } catch (error) {
      fail(error);
      entry.resume();
    }
  });
  parser.on('warn', (code: string, message: string, data: { entry?: ReadEntry }) => {
    if (code === 'TAR_BAD_ARCHIVE' && message.startsWith('Truncated input') && data.entry) truncated = data.entry;
    else fail(new InitError(InitCodes.BAD_LAYER, `${where}: not a valid tar layer (${code}: ${message})`));
  });
  parser.on('error', (error: Error) => fail(new InitError(InitCodes.BAD_LAYER, `${where}: not a valid tar layer (${error.message})`, { cause: error })));
  parser.on('end', () => settle());
  parser.on('close', () => settle());
  for await (const chunk of chunks) {
    if (failure) {
      // A refusal stops the download; unreadable content is read to the end first, so that
      // tampering is reported as the digest mismatch it is rather than as a broken tar.
      if ((failure as InitError).code === InitCodes.BAD_LAYER) continue;
      break;
    }
    if (!parser.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))) {
      await Promise.race([new Promise<void>((resolve) => parser.once('drain', () => resolve())), settled]);
    }
  }
  if (!failure) {
    parser.end();
    await settled;
  }
  // Missing padding and end blocks are tolerated; missing file content is not.
  if (!failure && truncated && truncated.remain > 0) {
    fail(new InitError(InitCodes.BAD_LAYER, `${where}: not a valid tar layer (entry ${JSON.stringify(truncated.path)} is cut off ${truncated.remain} bytes before its end)`));
  }
  if (failure) throw failure;
  files.clear();
  for (const [path, data] of next) files.set(path, data);
}

function onEntry(entry: ReadEntry, files: PluginFiles, where: string, limits: Limits): void {
  const path = checkEntryPath(entry.path, where);
  const inPluginDir = path === PLUGIN_DIR || path.startsWith(`${PLUGIN_DIR}/`);
  const name = path.slice(path.lastIndexOf('/') + 1);
  if (name.startsWith(WHITEOUT) && !inPluginDir) {
    // A whiteout of the plugin directory itself (at the root) removes everything below it.
    if (path === `${WHITEOUT}${PLUGIN_DIR}` || (path === OPAQUE)) files.clear();
    entry.resume();
    return;
  }
  if (!inPluginDir) {
    entry.resume();
    return;
  }
  const relative = path === PLUGIN_DIR ? '' : path.slice(PLUGIN_DIR.length + 1);
  const shown = JSON.stringify(entry.path);
  switch (entry.type) {
    case 'Directory':
    case 'GNUDumpDir':
      entry.resume();
      return;
    case 'File':
    case 'OldFile':
    case 'ContiguousFile':
      break;
    case 'SymbolicLink':
    case 'Link':
      throw new InitError(InitCodes.UNSAFE_ENTRY, `${where}: entry ${shown} is a ${entry.type === 'Link' ? 'hard' : 'symbolic'} link (to ${JSON.stringify(entry.linkpath ?? '')}); only regular files are allowed under ${PLUGIN_DIR}/, refusing the image`);
    case 'CharacterDevice':
    case 'BlockDevice':
      throw new InitError(InitCodes.UNSAFE_ENTRY, `${where}: entry ${shown} is a ${entry.type === 'CharacterDevice' ? 'character' : 'block'} device; only regular files are allowed under ${PLUGIN_DIR}/, refusing the image`);
    default:
      throw new InitError(InitCodes.UNSAFE_ENTRY, `${where}: entry ${shown} is a ${entry.type} entry; only regular files are allowed under ${PLUGIN_DIR}/, refusing the image`);
  }
  if (relative === '') throw new InitError(InitCodes.UNSAFE_ENTRY, `${where}: ${PLUGIN_DIR} is a file, not a directory; refusing the image`);
  if (name === OPAQUE) {
    // Opaque directory: nothing from lower layers below this directory survives.
    const dir = relative.slice(0, -OPAQUE.length);
    for (const key of [...files.keys()]) if (key.startsWith(dir)) files.delete(key);
    entry.resume();
    return;
  }
  if (name.startsWith(WHITEOUT)) {
    const target = `${relative.slice(0, relative.length - name.length)}${name.slice(WHITEOUT.length)}`;
    for (const key of [...files.keys()]) if (key === target || key.startsWith(`${target}/`)) files.delete(key);
    entry.resume();
    return;
  }
  if (entry.size > limits.maxFileBytes) {
    throw new InitError(InitCodes.TOO_LARGE, `${where}: ${shown} is ${entry.size} bytes, over the per-file limit of ${limits.maxFileBytes} (raise --max-file-bytes if this is expected)`);
  }
  // Totals over everything gathered so far (a 7.5 MB layer of 120 x 15 MB files reached 1.99 GB
  // of memory and 1.8 GB written: each file was under the per-file limit).
  let total = entry.size;
  for (const [key, data] of files) if (key !== relative) total += data.length;
  if (total > limits.maxTotalBytes) {
    throw new InitError(InitCodes.TOO_LARGE, `${where}: plugin files would total ${total} bytes with ${shown}, over the limit of ${limits.maxTotalBytes} (raise --max-total-bytes if this is expected)`);
  }
  if (!files.has(relative) && files.size + 1 > limits.maxFiles) {
    throw new InitError(InitCodes.TOO_LARGE, `${where}: more than ${limits.maxFiles} plugin files (raise --max-files if this is expected)`);
  }
  const parts: Buffer[] = [];
  entry.on('data', (chunk: Buffer) => parts.push(chunk));
  entry.on('end', () => files.set(relative, Buffer.concat(parts)));
}
