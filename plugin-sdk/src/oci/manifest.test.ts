import { describe, expect, it } from 'vitest';
import { sha256 } from './digest.ts';
import { OciCodes } from './errors.ts';
import { encodeJson, parseManifest, parsePlatform, selectPlatform, type ImageIndex } from './manifest.ts';
import { MediaTypes } from './media-types.ts';

const d = (mediaType: string, text = 'x') => ({ mediaType, digest: sha256(text), size: text.length });

describe('parseManifest', () => {
  it('reads OCI and Docker manifests and indexes, typed by their own mediaType', () => {
    for (const [type, kind] of [
      [MediaTypes.OCI_MANIFEST, 'manifest'],
      [MediaTypes.DOCKER_MANIFEST, 'manifest'],
      [MediaTypes.OCI_INDEX, 'index'],
      [MediaTypes.DOCKER_MANIFEST_LIST, 'index'],
    ] as const) {
      const doc = kind === 'manifest' ? { schemaVersion: 2, mediaType: type, config: d(MediaTypes.OCI_CONFIG), layers: [d(MediaTypes.OCI_LAYER_GZIP)] } : { schemaVersion: 2, mediaType: type, manifests: [d(MediaTypes.OCI_MANIFEST)] };
      const parsed = parseManifest(encodeJson(doc), undefined, 'test');
      expect(parsed.kind).toBe(kind);
      expect(parsed.mediaType).toBe(type);
    }
  });

  it('takes the media type from the response when the document has none (OCI allows omitting it)', () => {
    const parsed = parseManifest(encodeJson({ schemaVersion: 2, manifests: [] }), MediaTypes.OCI_INDEX, 'test');
    expect(parsed).toMatchObject({ kind: 'index', mediaType: MediaTypes.OCI_INDEX });
  });

  it('refuses a document that contradicts the type it was served as', () => {
    const doc = encodeJson({ schemaVersion: 2, mediaType: MediaTypes.OCI_INDEX, manifests: [] });
    expect(() => parseManifest(doc, MediaTypes.OCI_MANIFEST, 'test')).toThrow(expect.objectContaining({ code: OciCodes.BAD_MANIFEST }));
  });

  it('refuses schema 1, bad descriptors and unknown types with a path to the problem', () => {
    expect(() => parseManifest(encodeJson({ schemaVersion: 1 }), undefined, 'm')).toThrow(/schemaVersion must be 2/);
    expect(() => parseManifest(encodeJson({ schemaVersion: 2, config: { mediaType: 'x', digest: 'sha256:zz', size: 1 }, layers: [] }), undefined, 'm')).toThrow(expect.objectContaining({ code: OciCodes.BAD_DIGEST, message: expect.stringContaining('m: config') }));
    expect(() => parseManifest(encodeJson({ schemaVersion: 2, config: d('x'), layers: [{ ...d('y'), size: -1 }] }), undefined, 'm')).toThrow(/layers\[0\].*size/);
    expect(() => parseManifest(encodeJson({ schemaVersion: 2, mediaType: 'application/vnd.example+json' }), undefined, 'm')).toThrow(expect.objectContaining({ code: OciCodes.UNSUPPORTED_MEDIA_TYPE }));
    expect(() => parseManifest(Buffer.from('{not json'), undefined, 'm')).toThrow(expect.objectContaining({ code: OciCodes.BAD_MANIFEST }));
  });
});

describe('selectPlatform', () => {
  const index: ImageIndex = {
    schemaVersion: 2,
    manifests: [
      { ...d(MediaTypes.OCI_MANIFEST, 'a'), platform: { os: 'linux', architecture: 'amd64' } },
      { ...d(MediaTypes.OCI_MANIFEST, 'b'), platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } },
      { ...d(MediaTypes.OCI_MANIFEST, 'c'), platform: { os: 'unknown', architecture: 'unknown' } },
    ],
  };

  it('picks by os and architecture, ignoring attestation entries', () => {
    expect(selectPlatform(index, parsePlatform('linux/arm64'))?.digest).toBe(sha256('b'));
    expect(selectPlatform(index, parsePlatform('linux/amd64'))?.digest).toBe(sha256('a'));
    expect(selectPlatform(index, parsePlatform('linux/s390x'))).toBeUndefined();
  });

  it('falls back to the only image of an index', () => {
    expect(selectPlatform({ schemaVersion: 2, manifests: [index.manifests[1]!, index.manifests[2]!] }, parsePlatform('linux/amd64'))?.digest).toBe(sha256('b'));
  });

  it('refuses a malformed platform', () => {
    expect(() => parsePlatform('amd64')).toThrow(/os\/arch/);
  });
});
