import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createReadStream } from 'node:fs';
import { Parser, type ReadEntry } from 'tar';
import { OciCodes, OciError } from './errors.ts';
import { writeTar, type TarEntry } from './layer.ts';

/** Whether a path names a layout tarball (`.tar`) rather than a layout directory. */
export function isLayoutArchive(path: string): boolean {
  return /\.tar$/i.test(path);
}

/**
 * Writes the layout in `dir` as one uncompressed tar (the `oci-archive:` format skopeo reads):
 * `oci-layout`, `index.json` and `blobs/...`, sorted, with the same pinned metadata as layers,
 * so the tarball is as reproducible as the layout.
 */
export async function packLayout(dir: string, file: string): Promise<void> {
  const entries: TarEntry[] = [
    { path: 'oci-layout', type: 'File', data: await readFile(join(dir, 'oci-layout')) },
    { path: 'index.json', type: 'File', data: await readFile(join(dir, 'index.json')) },
    { path: 'blobs', type: 'Directory' },
  ];
  for (const algorithm of (await readdir(join(dir, 'blobs'))).sort()) {
    entries.push({ path: `blobs/${algorithm}`, type: 'Directory' });
    for (const name of (await readdir(join(dir, 'blobs', algorithm))).sort()) {
      if (name.startsWith('.')) continue;
      entries.push({ path: `blobs/${algorithm}/${name}`, type: 'File', data: await readFile(join(dir, 'blobs', algorithm, name)) });
    }
  }
  await writeFile(file, writeTar(entries));
}

const ALLOWED = /^(oci-layout|index\.json|blobs\/(sha256\/[a-f0-9]{64}|sha512\/[a-f0-9]{128}))$/;

/**
 * Unpacks a layout tarball into a new temporary directory and returns it (the caller removes
 * it). Only the layout's own files are taken (`oci-layout`, `index.json`, `blobs/<alg>/<hex>`,
 * regular files); anything else refuses the archive, so a hostile tarball cannot write elsewhere.
 * Blob contents are verified later, when read through the layout.
 */
export async function unpackLayout(file: string, maxBytes: number = 1024 * 1024 * 1024): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-layout-'));
  try {
    await mkdir(join(dir, 'blobs', 'sha256'), { recursive: true });
    await mkdir(join(dir, 'blobs', 'sha512'), { recursive: true });
    const pending: Promise<void>[] = [];
    let failure: OciError | undefined;
    let total = 0;
    const parser = new Parser({ strict: true });
    parser.on('entry', (entry: ReadEntry) => {
      const path = entry.path.replace(/^\.\//, '').replace(/\/$/, '');
      if (entry.type === 'Directory' && (path === 'blobs' || /^blobs\/(sha256|sha512)$/.test(path) || path === '' || path === '.')) {
        entry.resume();
        return;
      }
      if (entry.type !== 'File' || !ALLOWED.test(path)) {
        failure ??= new OciError(OciCodes.BAD_LAYOUT, `${file}: entry ${JSON.stringify(entry.path)} (${entry.type}) is not part of an OCI image layout; refusing the archive`);
        entry.resume();
        return;
      }
      total += entry.size;
      if (total > maxBytes) {
        failure ??= new OciError(OciCodes.TOO_LARGE, `${file}: more than ${maxBytes} bytes of content`);
        entry.resume();
        return;
      }
      const parts: Buffer[] = [];
      entry.on('data', (chunk: Buffer) => parts.push(chunk));
      pending.push(new Promise((resolve, reject) => entry.on('end', () => writeFile(join(dir, path), Buffer.concat(parts)).then(resolve, reject))));
    });
    await new Promise<void>((resolve, reject) => {
      parser.on('end', () => resolve());
      parser.on('error', (error: Error) => reject(new OciError(OciCodes.BAD_LAYOUT, `${file}: not a tar archive (${error.message})`)));
      createReadStream(file)
        .on('error', (error) => reject(new OciError(OciCodes.BAD_LAYOUT, `cannot read ${file}: ${error.message}`)))
        .pipe(parser);
    });
    await Promise.all(pending);
    if (failure) throw failure;
    return dir;
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}
