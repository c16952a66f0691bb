import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { NODE_FLAGS } from '@gatehouse/plugin-sdk/launch';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { encodeJson, MediaTypes, OciLayout, sha256, writeTar, type TarEntry } from '@gatehouse/plugin-sdk/oci';
import { formatPluginFile } from '@gatehouse/plugin-sdk/plugin-file';
import { main } from './main.ts';

const VERSION = '9.9.9';

/** Writes an image (one manifest, the given layers) into an OCI layout, tagged `tag`. */
async function makeLayout(dir: string, tag: string, layers: TarEntry[][], labels: Record<string, string> = {}): Promise<{ layerDigests: string[] }> {
  const layout = await OciLayout.create(dir);
  const blobs = layers.map((entries) => {
    const tar = writeTar(entries);
    return { tar, gz: gzipSync(tar) };
  });
  for (const b of blobs) await layout.writeBlob(b.gz);
  const config = encodeJson({ architecture: 'amd64', os: 'linux', config: { Labels: labels }, rootfs: { type: 'layers', diff_ids: blobs.map((b) => sha256(b.tar)) } });
  await layout.writeBlob(config);
  const manifest = encodeJson({
    schemaVersion: 2,
    mediaType: MediaTypes.OCI_MANIFEST,
    config: { mediaType: MediaTypes.OCI_CONFIG, digest: sha256(config), size: config.byteLength },
    layers: blobs.map((b) => ({ mediaType: MediaTypes.OCI_LAYER_GZIP, digest: sha256(b.gz), size: b.gz.byteLength })),
  });
  await layout.tag({ mediaType: MediaTypes.OCI_MANIFEST, digest: await layout.writeBlob(manifest), size: manifest.byteLength }, tag);
  return { layerDigests: blobs.map((b) => sha256(b.gz)) };
}

const file = (path: string, text: string): TarEntry => ({ path, type: 'File', data: Buffer.from(text) });
const plugin = (name: string, text = `var ${name} = 1;`) => file(`compiled-auth-plugins/${name}.js`, text);

describe('gatehouse-init', () => {
  let sandbox: string;
  let dest: string;
  let out: string[];
  let err: string[];
  const io = { out: (l: string) => out.push(l), err: (l: string) => err.push(l) };
  const run = (...args: string[]) => main([...args, '--dest', dest, '--gateway-version', VERSION], io, {});

  beforeEach(async () => {
    sandbox = await mkdtemp(join(tmpdir(), 'gh-init-'));
    dest = join(sandbox, 'dest');
    out = [];
    err = [];
  });
  afterEach(async () => {
    await rm(sandbox, { recursive: true, force: true });
  });

  /** Everything under the sandbox except the layouts the test made: proves nothing landed outside --dest. */
  async function writtenOutsideDest(): Promise<string[]> {
    const all = (await readdir(sandbox, { recursive: true })) as string[];
    return all.filter((p) => !p.startsWith('layout') && !p.startsWith('dest')).sort();
  }

  it('extracts the plugin files of a layout, then reruns idempotently', async () => {
    await makeLayout(join(sandbox, 'layout'), VERSION, [[plugin('alpha'), file('etc/passwd', 'root:x:0:0')], [plugin('beta')]]);
    expect(await run('--layout', join(sandbox, 'layout'))).toBe(0);
    expect((await readdir(dest)).sort()).toEqual(['alpha.js', 'beta.js']);
    expect(await readFile(join(dest, 'alpha.js'), 'utf8')).toBe('var alpha = 1;');
    expect(out.at(-1)).toContain('wrote 2 file(s)');
    expect(await run('--layout', join(sandbox, 'layout'))).toBe(0);
    expect(out.at(-1)).toContain('wrote 0 file(s), 2 unchanged');
    expect(await writtenOutsideDest()).toEqual([]);
  });

  it('refuses a tag that is not the gateway version, naming both', async () => {
    await makeLayout(join(sandbox, 'layout'), '0.0.1', [[plugin('alpha')]]);
    expect(await run('--layout', join(sandbox, 'layout'))).toBe(1);
    expect(err.join('\n')).toMatch(/image tag 0\.0\.1 does not match gateway version 9\.9\.9.*\[GH_INIT_TAG_MISMATCH\]/);
    expect(await run('--layout', `${join(sandbox, 'layout')}:0.0.1`)).toBe(1);
    expect(err.at(-1)).toContain('GH_INIT_TAG_MISMATCH');
    await expect(readdir(dest)).rejects.toThrow();
  });

  it('refuses an image re-tagged from another gateway version (label check)', async () => {
    await makeLayout(join(sandbox, 'layout'), VERSION, [[plugin('alpha')]], { 'dev.gatehouse.gateway-version': '1.0.0' });
    expect(await run('--layout', join(sandbox, 'layout'))).toBe(1);
    expect(err.at(-1)).toMatch(/labelled for gateway version 1\.0\.0, not 9\.9\.9/);
  });

  it('refuses a layer whose content does not match its digest', async () => {
    const layoutDir = join(sandbox, 'layout');
    const { layerDigests } = await makeLayout(layoutDir, VERSION, [[plugin('alpha')]]);
    const other = gzipSync(writeTar([plugin('alpha', 'var evil = 1;')]));
    const original = await readFile(join(layoutDir, 'blobs/sha256', layerDigests[0]!.slice(7)));
    // Same length, different bytes: only the digest can tell.
    const tampered = Buffer.concat([other, Buffer.alloc(Math.max(0, original.byteLength - other.byteLength))]).subarray(0, original.byteLength);
    await writeFile(join(layoutDir, 'blobs/sha256', layerDigests[0]!.slice(7)), tampered);
    expect(await run('--layout', layoutDir)).toBe(1);
    expect(err.at(-1)).toMatch(/digest mismatch.*\[GH_OCI_DIGEST_MISMATCH\]/);
    await expect(readdir(dest)).rejects.toThrow();
  });

  it.each<[string, TarEntry, string]>([
    ['a traversal path', file('compiled-auth-plugins/../../../escaped.js', 'x'), 'GH_INIT_UNSAFE_PATH'],
    ['an absolute path', file('/tmp/escaped.js', 'x'), 'GH_INIT_UNSAFE_PATH'],
    ['a symbolic link', { path: 'compiled-auth-plugins/link.js', type: 'SymbolicLink', linkpath: '../../../../etc/passwd' }, 'GH_INIT_UNSAFE_ENTRY'],
    ['a hard link', { path: 'compiled-auth-plugins/hard.js', type: 'Link', linkpath: 'etc/passwd' }, 'GH_INIT_UNSAFE_ENTRY'],
    ['a device', { path: 'compiled-auth-plugins/null', type: 'CharacterDevice' }, 'GH_INIT_UNSAFE_ENTRY'],
  ])('refuses an image with %s and writes nothing anywhere', async (_name, entry, code) => {
    await makeLayout(join(sandbox, 'layout'), VERSION, [[plugin('alpha'), entry]]);
    expect(await run('--layout', join(sandbox, 'layout'))).toBe(1);
    expect(err.at(-1)).toContain(`[${code}]`);
    await expect(readdir(dest)).rejects.toThrow();
    expect(await writtenOutsideDest()).toEqual([]);
  });

  it('refuses an oversize layer and an oversize file (limits are configurable)', async () => {
    await makeLayout(join(sandbox, 'layout'), VERSION, [[plugin('alpha', 'x'.repeat(5000))]]);
    expect(await run('--layout', join(sandbox, 'layout'), '--max-layer-bytes', '50')).toBe(1);
    expect(err.at(-1)).toMatch(/over the per-layer limit of 50.*\[GH_INIT_TOO_LARGE\]/);
    expect(await run('--layout', join(sandbox, 'layout'), '--max-file-bytes', '4999')).toBe(1);
    expect(err.at(-1)).toMatch(/5000 bytes, over the per-file limit of 4999.*\[GH_INIT_TOO_LARGE\]/);
    await expect(readdir(dest)).rejects.toThrow();
    expect(await run('--layout', join(sandbox, 'layout'), '--max-file-bytes', '5000')).toBe(0);
  });

  it('refuses many files under the per-file limit that together pass the total or count limit (issue 17 finding 18)', async () => {
    // The attack: a small compressed layer of many large, compressible files.
    const many = Array.from({ length: 12 }, (_, i) => plugin(`p${i}`, 'x'.repeat(1024 * 1024)));
    await makeLayout(join(sandbox, 'layout'), VERSION, [many]);
    expect(await run('--layout', join(sandbox, 'layout'), '--max-total-bytes', String(10 * 1024 * 1024))).toBe(1);
    expect(err.at(-1)).toMatch(/over the limit of 10485760.*\[GH_INIT_TOO_LARGE\]/);
    expect(await run('--layout', join(sandbox, 'layout'), '--max-files', '5')).toBe(1);
    expect(err.at(-1)).toMatch(/more than 5 plugin files.*\[GH_INIT_TOO_LARGE\]/);
    await expect(readdir(dest)).rejects.toThrow();
    expect(await run('--layout', join(sandbox, 'layout'))).toBe(0);
  });

  it('a failure part-way through writing leaves --dest as it was, with a coded error (issue 17 finding 25)', async () => {
    await makeLayout(join(sandbox, 'layout'), VERSION, [[plugin('alpha'), plugin('beta'), plugin(`g${'x'.repeat(300)}`)]]);
    expect(await run('--layout', join(sandbox, 'layout'))).toBe(1);
    expect(err.at(-1)).toMatch(/ENAMETOOLONG.*\[GH_INIT_WRITE_FAILED\]/);
    // alpha and beta sort first and were staged: neither they, their temporary files, nor --dest
    // itself (it did not exist) remain (issue 24 finding 14).
    await expect(readdir(dest)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a failure leaves an existing --dest as it was, subdirectories it created removed, in a real gatehouse-init process (issue 24 finding 14)', async () => {
    const bin = fileURLToPath(new URL('../../bin/gatehouse-init.js', import.meta.url));
    const initProcess = (...args: string[]) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = execFile(process.execPath, [...NODE_FLAGS, bin, ...args, '--gateway-version', VERSION], { timeout: 30_000 }, (_error, _stdout, stderr) => resolve({ code: child.exitCode, stderr }));
      });
    await makeLayout(join(sandbox, 'layout'), VERSION, [[plugin('alpha'), file('compiled-auth-plugins/nested/deeper/beta.js', 'var beta;'), plugin(`g${'x'.repeat(300)}`)]]);
    // A --dest (and parents) that did not exist: nothing of it is left.
    const fresh = join(sandbox, 'new', 'plugins');
    const first = await initProcess('--layout', join(sandbox, 'layout'), '--dest', fresh);
    expect(first.code).toBe(1);
    expect(first.stderr).toMatch(/ENAMETOOLONG.*\[GH_INIT_WRITE_FAILED\]/);
    await expect(readdir(join(sandbox, 'new'))).rejects.toMatchObject({ code: 'ENOENT' });
    // An existing --dest keeps exactly what it held.
    await mkdir(dest);
    await writeFile(join(dest, 'kept.js'), 'var kept;');
    const second = await initProcess('--layout', join(sandbox, 'layout'), '--dest', dest);
    expect(second.code).toBe(1);
    expect(await readdir(dest, { recursive: true })).toEqual(['kept.js']);
  });

  it('gives up at --timeout against a registry that drips a byte every 300 ms, writing nothing (issue 17 finding 14)', async () => {
    const sockets = new Set<import('node:net').Socket>();
    const drip = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      const timer = setInterval(() => res.write(' '), 300);
      res.on('close', () => clearInterval(timer));
    });
    drip.on('connection', (socket) => sockets.add(socket));
    await new Promise<void>((resolve) => drip.listen(0, '127.0.0.1', resolve));
    const port = (drip.address() as import('node:net').AddressInfo).port;
    try {
      const started = performance.now();
      expect(await run('--image', `127.0.0.1:${port}/plugins/alpha:${VERSION}`, '--insecure', '--timeout', '1')).toBe(1);
      expect(performance.now() - started).toBeLessThan(10_000);
      expect(err.at(-1)).toMatch(/did not finish within --timeout 1 s.*\[GH_INIT_TIMEOUT\]/);
      await expect(readdir(dest)).rejects.toThrow();
    } finally {
      for (const socket of sockets) socket.destroy();
      drip.close();
    }
  });

  it('writes nothing when any of several sources is refused', async () => {
    await makeLayout(join(sandbox, 'layout-good'), VERSION, [[plugin('alpha')]]);
    await makeLayout(join(sandbox, 'layout-bad'), VERSION, [[{ path: 'compiled-auth-plugins/x', type: 'SymbolicLink', linkpath: '/' }]]);
    expect(await run('--layout', join(sandbox, 'layout-good'), '--layout', join(sandbox, 'layout-bad'))).toBe(1);
    await expect(readdir(dest)).rejects.toThrow();
  });

  it('refuses an image without plugin files', async () => {
    await makeLayout(join(sandbox, 'layout'), VERSION, [[file('etc/hostname', 'x')]]);
    expect(await run('--layout', join(sandbox, 'layout'))).toBe(1);
    expect(err.at(-1)).toContain('GH_INIT_NO_PLUGINS');
  });

  it('copies from its own root filesystem with --rootfs, refusing links there', async () => {
    const rootfs = join(sandbox, 'rootfs');
    await mkdir(join(rootfs, 'compiled-auth-plugins'), { recursive: true });
    await writeFile(join(rootfs, 'compiled-auth-plugins/alpha.js'), 'A');
    expect(await run('--rootfs', rootfs)).toBe(1);
    expect(err.at(-1)).toContain('GH_INIT_TAG_MISMATCH');
    expect(await run('--rootfs', rootfs, '--tag', '1.0.0')).toBe(1);
    expect(err.at(-1)).toMatch(/image tag 1\.0\.0 does not match gateway version 9\.9\.9/);
    expect(await run('--rootfs', rootfs, '--tag', VERSION)).toBe(0);
    expect(await readFile(join(dest, 'alpha.js'), 'utf8')).toBe('A');
    await symlink('/etc/passwd', join(rootfs, 'compiled-auth-plugins/evil.js'));
    expect(await run('--rootfs', rootfs, '--tag', VERSION)).toBe(1);
    expect(err.at(-1)).toContain('GH_INIT_UNSAFE_ENTRY');
  });

  it('refuses a plugin file built for another gateway version, whatever the tag says (a re-tagged image; issue 27 item 2)', async () => {
    const built = (version: string) => formatPluginFile('var __gatehousePlugin = {};\n', { name: 'RequiredHeader', exports: ['RequiredHeader'], gatewayVersion: version, sdkVersion: version }).text;
    const rootfs = join(sandbox, 'rootfs');
    await mkdir(join(rootfs, 'compiled-auth-plugins'), { recursive: true });
    // Built for 0.1.0, re-tagged 9.9.9: --tag and --gateway-version agree, as under the chart.
    await writeFile(join(rootfs, 'compiled-auth-plugins/RequiredHeader.js'), built('0.1.0'));
    await writeFile(join(rootfs, 'compiled-auth-plugins/RequiredHeader.js.map'), '{}');
    expect(await run('--rootfs', rootfs, '--tag', VERSION)).toBe(1);
    expect(err.at(-1)).toMatch(/RequiredHeader\.js was built for gateway version 0\.1\.0, not 9\.9\.9 \(the image was re-tagged\); rebuild the plugin for 9\.9\.9 .*\[GH_INIT_TAG_MISMATCH\]/);
    await expect(readdir(dest)).rejects.toThrow();
    // The same through a layout; and a file whose header was tampered with.
    await makeLayout(join(sandbox, 'layout'), VERSION, [[file('compiled-auth-plugins/old.js', built('0.1.0'))]]);
    expect(await run('--layout', join(sandbox, 'layout'))).toBe(1);
    expect(err.at(-1)).toContain('old.js was built for gateway version 0.1.0');
    await writeFile(join(rootfs, 'compiled-auth-plugins/RequiredHeader.js'), built(VERSION).replace('var __gatehousePlugin', 'var __evil'));
    expect(await run('--rootfs', rootfs, '--tag', VERSION)).toBe(1);
    expect(err.at(-1)).toMatch(/RequiredHeader\.js is not a readable compiled plugin: its content hash/);
    // Built for this version: accepted, source map and all.
    await writeFile(join(rootfs, 'compiled-auth-plugins/RequiredHeader.js'), built(VERSION));
    expect(await run('--rootfs', rootfs, '--tag', VERSION)).toBe(0);
    expect((await readdir(dest)).sort()).toEqual(['RequiredHeader.js', 'RequiredHeader.js.map']);
  });

  it('exits 2 on usage errors', async () => {
    expect(await main(['--dest', dest], io, {})).toBe(2);
    expect(err.at(-1)).toContain('nothing to do');
    expect(await main(['--image', 'x:1', '--max-layer-bytes', 'lots'], io, {})).toBe(2);
    expect(await main(['--bogus'], io, {})).toBe(2);
  });

  it('takes its settings from the environment', async () => {
    await makeLayout(join(sandbox, 'layout'), VERSION, [[plugin('alpha')]]);
    expect(await main([], io, { GATEHOUSE_LAYOUTS: join(sandbox, 'layout'), GATEHOUSE_DEST: dest, GATEHOUSE_GATEWAY_VERSION: VERSION })).toBe(0);
    expect(await readdir(dest)).toEqual(['alpha.js']);
  });
});
