import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sha256 } from './digest.ts';
import { OciCodes } from './errors.ts';
import { OciLayout, REF_NAME } from './layout.ts';
import { MediaTypes } from './media-types.ts';

describe('OciLayout', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gh-layout-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('creates oci-layout and an empty index.json', async () => {
    await OciLayout.create(join(dir, 'l'));
    expect(JSON.parse(await readFile(join(dir, 'l/oci-layout'), 'utf8'))).toEqual({ imageLayoutVersion: '1.0.0' });
    expect(JSON.parse(await readFile(join(dir, 'l/index.json'), 'utf8'))).toEqual({ schemaVersion: 2, mediaType: MediaTypes.OCI_INDEX, manifests: [] });
  });

  it('stores blobs by digest and reads them back verified', async () => {
    const layout = await OciLayout.create(dir);
    const digest = await layout.writeBlob(Buffer.from('hello'));
    expect(digest).toBe(sha256('hello'));
    expect((await layout.readBlob({ digest, size: 5 }, 'blob')).toString()).toBe('hello');
    await writeFile(layout.blobPath(digest), 'jello');
    await expect(layout.readBlob({ digest, size: 5 }, 'blob')).rejects.toMatchObject({ code: OciCodes.DIGEST_MISMATCH });
    await expect(layout.readBlob({ digest, size: 6 }, 'blob')).rejects.toMatchObject({ code: OciCodes.DIGEST_MISMATCH });
    await expect(layout.readBlob({ digest: sha256('absent'), size: 1 }, 'blob')).rejects.toMatchObject({ code: OciCodes.NOT_FOUND });
  });

  it('verifies streamed blobs at the end of the stream', async () => {
    const layout = await OciLayout.create(dir);
    const digest = await layout.writeBlob(Buffer.from('streamed'));
    const chunks: Buffer[] = [];
    for await (const c of layout.openBlob({ digest, size: 8 }, 'blob')) chunks.push(Buffer.from(c));
    expect(Buffer.concat(chunks).toString()).toBe('streamed');
    await writeFile(layout.blobPath(digest), 'streaMed');
    await expect(async () => {
      for await (const _ of layout.openBlob({ digest, size: 8 }, 'blob'));
    }).rejects.toMatchObject({ code: OciCodes.DIGEST_MISMATCH });
  });

  it('names images by ref name, replacing an older entry of the same name and keeping others', async () => {
    const layout = await OciLayout.create(dir);
    const one = { mediaType: MediaTypes.OCI_MANIFEST, digest: sha256('1'), size: 1 };
    const two = { mediaType: MediaTypes.OCI_MANIFEST, digest: sha256('2'), size: 1 };
    await layout.tag(one, '0.1.0');
    await layout.tag(one, 'other');
    await layout.tag(two, '0.1.0');
    const index = await layout.readIndex();
    expect(index.manifests.map((m) => [m.annotations?.[REF_NAME], m.digest])).toEqual([
      ['other', one.digest],
      ['0.1.0', two.digest],
    ]);
    expect((await layout.resolve('0.1.0')).digest).toBe(two.digest);
    await expect(layout.resolve('9.9.9')).rejects.toMatchObject({ code: OciCodes.NOT_FOUND, message: expect.stringContaining('"other", "0.1.0"') });
    await expect(layout.resolve(undefined)).rejects.toMatchObject({ code: OciCodes.BAD_LAYOUT });
  });

  it('refuses to create a layout in a directory that holds something else', async () => {
    await writeFile(join(dir, 'notes.txt'), 'mine');
    await expect(OciLayout.create(dir)).rejects.toMatchObject({ code: OciCodes.BAD_LAYOUT, message: expect.stringContaining('is not an OCI image layout') });
  });

  it('refuses a directory that is not a layout', async () => {
    await expect(OciLayout.open(dir)).rejects.toMatchObject({ code: OciCodes.BAD_LAYOUT, message: expect.stringContaining('no oci-layout') });
    await writeFile(join(dir, 'oci-layout'), '{"imageLayoutVersion":"2.0.0"}');
    await expect(OciLayout.open(dir)).rejects.toMatchObject({ code: OciCodes.BAD_LAYOUT });
  });
});
