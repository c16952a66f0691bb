import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeJson, MediaTypes, OciCodes, RegistryClient, sha256, type BlobSource } from '@gatehouse/plugin-sdk/oci';
import { startRegistry, type TestRegistry } from './helpers/registry.ts';
import { startTokenServer, type TokenServer } from './helpers/token-server.ts';

function memorySource(bytes: Buffer): BlobSource & { reads: [number, number][] } {
  const reads: [number, number][] = [];
  return { digest: sha256(bytes), size: bytes.byteLength, reads, read: async (start, end) => (reads.push([start, end]), bytes.subarray(start, end)) };
}

/** A minimal valid image: config + one layer + manifest, pushed with `client`. */
async function pushTinyImage(client: RegistryClient, repository: string, tag: string) {
  const layer = Buffer.from(randomBytes(64));
  const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [sha256(layer)] } }));
  await client.pushBlob(repository, memorySource(layer));
  await client.pushBlob(repository, memorySource(config));
  const manifest = encodeJson({
    schemaVersion: 2,
    mediaType: MediaTypes.OCI_MANIFEST,
    config: { mediaType: MediaTypes.OCI_CONFIG, digest: sha256(config), size: config.byteLength },
    layers: [{ mediaType: MediaTypes.OCI_LAYER, digest: sha256(layer), size: layer.byteLength }],
  });
  const digest = await client.putManifest(repository, tag, manifest, MediaTypes.OCI_MANIFEST);
  return { layer, config, manifest, digest };
}

describe('RegistryClient against docker-registry, anonymous', () => {
  let registry: TestRegistry;
  let client: RegistryClient;
  beforeAll(async () => {
    registry = await startRegistry();
    client = new RegistryClient({ host: registry.host, insecure: true, chunkSize: 1000 });
  });
  afterAll(async () => {
    await client?.close();
    await registry?.close();
  });

  it('passes the version check', async () => {
    await expect(client.ping()).resolves.toBeUndefined();
  });

  it('uploads a small blob in one PUT and skips it when pushed again', async () => {
    const source = memorySource(Buffer.from('monolithic blob'));
    expect(await client.pushBlob('anon/blobs', source)).toBe('uploaded');
    expect(source.reads).toEqual([[0, 15]]);
    expect(await client.pushBlob('anon/blobs', source)).toBe('exists');
    expect(source.reads).toHaveLength(1);
    expect(await client.hasBlob('anon/blobs', source.digest)).toBe(true);
  });

  it('uploads a large blob in PATCH chunks, and reads it back verified', async () => {
    const bytes = randomBytes(4500);
    const source = memorySource(bytes);
    expect(await client.pushBlob('anon/chunked', source)).toBe('uploaded');
    expect(source.reads).toEqual([
      [0, 1000],
      [1000, 2000],
      [2000, 3000],
      [3000, 4000],
      [4000, 4500],
    ]);
    const back = await client.getBlob('anon/chunked', { digest: source.digest, size: bytes.byteLength });
    expect(back.equals(bytes)).toBe(true);
  });

  it('puts and gets manifests by tag and by digest, with the same digest', async () => {
    const { manifest, digest } = await pushTinyImage(client, 'anon/image', 'v1');
    expect(digest).toBe(sha256(manifest));
    const byTag = await client.getManifest('anon/image', 'v1');
    expect(byTag.digest).toBe(digest);
    expect(byTag.mediaType).toBe(MediaTypes.OCI_MANIFEST);
    expect(Buffer.from(byTag.bytes).equals(Buffer.from(manifest))).toBe(true);
    const byDigest = await client.getManifest('anon/image', digest);
    expect(byDigest.digest).toBe(digest);
  });

  it('reports a missing manifest as GH_OCI_NOT_FOUND with the registry error code', async () => {
    await expect(client.getManifest('anon/image', 'no-such-tag')).rejects.toMatchObject({ code: OciCodes.NOT_FOUND, message: expect.stringContaining('MANIFEST_UNKNOWN') });
  });

  it('refuses a blob whose stored content was altered (digest verification)', async () => {
    const bytes = Buffer.from('original content of a layer');
    const source = memorySource(bytes);
    await client.pushBlob('anon/tamper', source);
    const hex = source.digest.slice(7);
    await writeFile(join(registry.storage, 'docker/registry/v2/blobs/sha256', hex.slice(0, 2), hex, 'data'), 'tampered content of a layer');
    await expect(client.getBlob('anon/tamper', { digest: source.digest, size: bytes.byteLength })).rejects.toMatchObject({ code: OciCodes.DIGEST_MISMATCH });
  });

  it('refuses a blob over the size limit before reading it', async () => {
    const source = memorySource(randomBytes(2000));
    await client.pushBlob('anon/limit', source);
    expect(() => client.openBlob('anon/limit', { digest: source.digest, size: 2000 }, 1000)).toThrow(expect.objectContaining({ code: OciCodes.TOO_LARGE }));
  });

  it('fails clearly when HTTPS is used against a plain-HTTP registry', async () => {
    const tls = new RegistryClient({ host: registry.host });
    try {
      await expect(tls.ping()).rejects.toMatchObject({ code: OciCodes.UNREACHABLE, message: expect.stringContaining('--insecure') });
    } finally {
      await tls.close();
    }
  });
});

describe('RegistryClient with Basic auth (htpasswd)', () => {
  let registry: TestRegistry;
  beforeAll(async () => {
    registry = await startRegistry({ kind: 'htpasswd', users: { alice: 'wonder:land' } });
  });
  afterAll(async () => {
    await registry?.close();
  });

  it('asks for credentials when none are given', async () => {
    const client = new RegistryClient({ host: registry.host, insecure: true });
    await expect(client.ping()).rejects.toMatchObject({ code: OciCodes.UNAUTHORIZED, message: expect.stringContaining('requires credentials') });
    await client.close();
  });

  it('rejects a wrong password, naming the user', async () => {
    const client = new RegistryClient({ host: registry.host, insecure: true, credentials: { username: 'alice', password: 'nope' } });
    await expect(client.ping()).rejects.toMatchObject({ code: OciCodes.UNAUTHORIZED, message: expect.stringContaining('"alice"') });
    await client.close();
  });

  it('pushes and pulls with the right password (which may contain a colon)', async () => {
    const client = new RegistryClient({ host: registry.host, insecure: true, credentials: { username: 'alice', password: 'wonder:land' } });
    await client.ping();
    const { digest, layer } = await pushTinyImage(client, 'basic/image', '1');
    expect((await client.getManifest('basic/image', '1')).digest).toBe(digest);
    expect((await client.getBlob('basic/image', { digest: sha256(layer), size: layer.byteLength })).equals(layer)).toBe(true);
    await client.close();
  });
});

describe('RegistryClient with Bearer tokens (docker-registry auth.token + a real token server)', () => {
  let tokens: TokenServer;
  let registry: TestRegistry;
  beforeAll(async () => {
    tokens = await startTokenServer({ pusher: { password: 'p4ss', actions: ['pull', 'push'] }, reader: { password: 'r3ad', actions: ['pull'] } });
    registry = await startRegistry({ kind: 'token', realm: tokens.realm, service: tokens.service, issuer: tokens.issuer, certFile: tokens.certFile });
  });
  afterAll(async () => {
    await registry?.close();
    await tokens?.close();
  });

  it('follows the challenge to the token server and pushes with a push-scoped token', async () => {
    const client = new RegistryClient({ host: registry.host, insecure: true, credentials: { username: 'pusher', password: 'p4ss' }, chunkSize: 40 });
    await client.ping();
    const { digest } = await pushTinyImage(client, 'bearer/image', '1');
    expect((await client.getManifest('bearer/image', '1')).digest).toBe(digest);
    const scoped = tokens.requests.filter((r) => r.user === 'pusher' && r.scope.includes('repository:bearer/image:pull,push'));
    expect(scoped.length).toBeGreaterThan(0);
    expect(scoped.every((r) => r.service === tokens.service)).toBe(true);
    await client.close();
  });

  it('lets a pull-only user read but not push', async () => {
    const client = new RegistryClient({ host: registry.host, insecure: true, credentials: { username: 'reader', password: 'r3ad' } });
    expect((await client.getManifest('bearer/image', '1')).mediaType).toBe(MediaTypes.OCI_MANIFEST);
    await expect(client.pushBlob('bearer/image', memorySource(Buffer.from('new blob')))).rejects.toMatchObject({ code: OciCodes.UNAUTHORIZED });
    await client.close();
  });

  it('denies anonymous pulls when the token server grants nothing', async () => {
    const client = new RegistryClient({ host: registry.host, insecure: true });
    await expect(client.getManifest('bearer/image', '1')).rejects.toMatchObject({ code: OciCodes.UNAUTHORIZED });
    await client.close();
  });

  it('reports a wrong password from the token server', async () => {
    const client = new RegistryClient({ host: registry.host, insecure: true, credentials: { username: 'pusher', password: 'wrong' } });
    await expect(client.getManifest('bearer/image', '1')).rejects.toMatchObject({ code: OciCodes.UNAUTHORIZED, message: expect.stringContaining('token server') });
    await client.close();
  });
});
