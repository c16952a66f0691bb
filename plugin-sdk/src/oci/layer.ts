import { gzipSync } from 'node:zlib';
import { Header, Pax } from 'tar';
import { sha256, type Digest } from './digest.ts';

/** One entry of a layer tarball. */
export interface TarEntry {
  path: string;
  type: 'File' | 'Directory' | 'SymbolicLink' | 'Link' | 'CharacterDevice' | 'BlockDevice' | 'FIFO';
  /** Permission bits; default 0644 for files, 0755 for directories. */
  mode?: number;
  data?: Uint8Array;
  linkpath?: string;
}

/** A built layer: the tar (its digest is the config's diff_id) and its gzip form (the blob). */
export interface Layer {
  tar: Buffer;
  diffId: Digest;
  blob: Buffer;
  digest: Digest;
}

const BLOCK = 512;

/**
 * Writes a POSIX tar with every varying field pinned: entries in the given order, uid/gid 0,
 * no user or group names, and one fixed mtime, so equal input gives equal bytes (reproducible
 * builds). Long paths get a pax header, as tar(5) prescribes.
 */
export function writeTar(entries: readonly TarEntry[], mtime: Date = new Date(0)): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    const data = entry.type === 'File' ? Buffer.from(entry.data ?? new Uint8Array()) : Buffer.alloc(0);
    const fields = {
      path: entry.type === 'Directory' && !entry.path.endsWith('/') ? `${entry.path}/` : entry.path,
      mode: entry.mode ?? (entry.type === 'Directory' ? 0o755 : 0o644),
      uid: 0,
      gid: 0,
      size: data.byteLength,
      mtime,
      type: entry.type,
      uname: '',
      gname: '',
      ...(entry.linkpath !== undefined ? { linkpath: entry.linkpath } : {}),
    };
    const header = new Header(fields);
    if (header.encode()) {
      parts.push(new Pax({ path: fields.path, mtime, ...(entry.linkpath !== undefined ? { linkpath: entry.linkpath } : {}) }).encode());
    }
    parts.push(header.block!);
    if (data.byteLength > 0) {
      parts.push(data);
      const pad = (BLOCK - (data.byteLength % BLOCK)) % BLOCK;
      if (pad) parts.push(Buffer.alloc(pad));
    }
  }
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}

/** Builds a gzip-compressed layer from entries (gzip header mtime is 0, so the blob is reproducible too). */
export function buildLayer(entries: readonly TarEntry[], mtime?: Date): Layer {
  const tar = writeTar(entries, mtime);
  const blob = gzipSync(tar, { level: 9 });
  return { tar, diffId: sha256(tar), blob, digest: sha256(blob) };
}
