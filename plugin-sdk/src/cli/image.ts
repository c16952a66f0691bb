import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { buildPluginImage } from '../oci/image-build.ts';
import { openImage, splitLayoutName } from '../oci/image-store.ts';
import { credentialsFromEnvironment } from '../oci/credentials.ts';
import { OciError } from '../oci/errors.ts';
import { isLayoutArchive, packLayout, unpackLayout } from '../oci/layout-archive.ts';
import { OciLayout } from '../oci/layout.ts';
import { parsePlatform } from '../oci/manifest.ts';
import { pushImage } from '../oci/push.ts';
import { formatReference, parseReference } from '../oci/reference.ts';
import { RegistryClient } from '../oci/registry-client.ts';
import { GATEWAY_VERSION } from '../version.ts';

const USAGE = `usage:
  gatehouse-plugin image build --from DIR --tag VERSION --output LAYOUT_DIR|FILE.tar [--base REF] [--platform OS/ARCH] [--insecure]
      DIR holds compiled plugins (gatehouse-plugin build output); VERSION must be the gateway version (${GATEWAY_VERSION}).
      REF is a registry reference or oci:LAYOUT_DIR[:TAG] (e.g. the gatehouse-init image, so the plugin image runs as its own init container).
  gatehouse-plugin image push --from LAYOUT_DIR|FILE.tar[:TAG] REF [--insecure] [--chunk-size BYTES]
      REF is registry/repository:TAG; --insecure allows a plain-HTTP registry.
  Credentials: GATEHOUSE_REGISTRY_USERNAME / GATEHOUSE_REGISTRY_PASSWORD, or a Docker config / REGISTRY_AUTH_FILE.`;

type Io = { out: (line: string) => void; err: (line: string) => void };
const stdio: Io = { out: (line) => process.stdout.write(`${line}\n`), err: (line) => process.stderr.write(`${line}\n`) };

/** `gatehouse-plugin image build|push …`; returns the exit code (0 ok, 1 failure, 2 usage error). */
export async function runImageCommand(argv: string[], io: Io = stdio): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'build':
        return await build(rest, io);
      case 'push':
        return await push(rest, io);
      case 'help':
      case '--help':
      case '-h':
        io.out(USAGE);
        return 0;
      default:
        io.err(`gatehouse-plugin image: ${command === undefined ? 'missing command' : `unknown command ${JSON.stringify(command)}`}\n${USAGE}`);
        return 2;
    }
  } catch (error) {
    if (error instanceof OciError) {
      io.err(`gatehouse-plugin image ${command}: ${error.message} [${error.code}]`);
      return 1;
    }
    const code = (error as { code?: string }).code;
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' || code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' || code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      io.err(`gatehouse-plugin image ${command}: ${(error as Error).message}\n${USAGE}`);
      return 2;
    }
    throw error;
  }
}

async function build(argv: string[], io: Io): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      from: { type: 'string' },
      tag: { type: 'string' },
      output: { type: 'string' },
      base: { type: 'string' },
      platform: { type: 'string' },
      insecure: { type: 'boolean' },
    },
  });
  const env = process.env;
  const from = values.from ?? env.GATEHOUSE_IMAGE_FROM;
  const tag = values.tag ?? env.GATEHOUSE_IMAGE_TAG;
  const output = values.output ?? env.GATEHOUSE_IMAGE_OUTPUT;
  const baseName = values.base ?? env.GATEHOUSE_IMAGE_BASE;
  const platform = values.platform ?? env.GATEHOUSE_IMAGE_PLATFORM;
  const missing = [!from && '--from DIR', !tag && '--tag VERSION', !output && '--output LAYOUT_DIR'].filter(Boolean);
  if (missing.length > 0) {
    io.err(`gatehouse-plugin image build: missing ${missing.join(', ')}\n${USAGE}`);
    return 2;
  }
  const base = baseName ? await openImage(baseName, { insecure: insecureFlag(values.insecure), credentials: credentialsFromEnvironment() }) : undefined;
  // A .tar output is built as a layout in a temporary directory, then packed (oci-archive).
  const archive = isLayoutArchive(output!);
  const layoutDir = archive ? await mkdtemp(join(tmpdir(), 'gatehouse-image-')) : output!;
  try {
    const built = await buildPluginImage({
      from: from!,
      tag: tag!,
      output: layoutDir,
      gatewayVersion: GATEWAY_VERSION,
      ...(base ? { base: { store: base.store, reference: base.reference, display: base.display } } : {}),
      ...(platform ? { platform: parsePlatform(platform) } : {}),
    });
    if (archive) await packLayout(layoutDir, output!);
    io.out(`built ${output}:${tag} ${built.digest} (plugins: ${built.plugins.join(', ')}${baseName ? `; base ${baseName}` : ''})`);
    return 0;
  } finally {
    await base?.store.close();
    if (archive) await rm(layoutDir, { recursive: true, force: true });
  }
}

async function push(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { from: { type: 'string' }, insecure: { type: 'boolean' }, 'chunk-size': { type: 'string' } },
  });
  const from = values.from ?? process.env.GATEHOUSE_IMAGE_FROM;
  if (!from || positionals.length !== 1) {
    io.err(`gatehouse-plugin image push: expected --from LAYOUT_DIR and one REF\n${USAGE}`);
    return 2;
  }
  const chunkSize = values['chunk-size'] === undefined ? undefined : Number(values['chunk-size']);
  if (chunkSize !== undefined && (!Number.isSafeInteger(chunkSize) || chunkSize < 1)) {
    io.err(`gatehouse-plugin image push: --chunk-size must be a positive number of bytes (got ${JSON.stringify(values['chunk-size'])})`);
    return 2;
  }
  const target = parseReference(positionals[0]!);
  const { dir: given, tag } = splitLayoutName(from);
  const unpacked = isLayoutArchive(given) ? await unpackLayout(given) : undefined;
  try {
    return await pushLayout(unpacked ?? given, tag, target, values.insecure, chunkSize, io);
  } finally {
    if (unpacked) await rm(unpacked, { recursive: true, force: true });
  }
}

async function pushLayout(dir: string, tag: string | undefined, target: ReturnType<typeof parseReference>, insecure: boolean | undefined, chunkSize: number | undefined, io: Io): Promise<number> {
  const layout = await OciLayout.open(dir);
  // Without a name in --from, a layout with several images is read by the target's tag.
  const descriptor = await layout.resolve(tag ?? ((await layout.readIndex()).manifests.length === 1 ? undefined : target.tag));
  const credentials = credentialsFromEnvironment()(target.registry);
  const client = new RegistryClient({
    host: target.apiHost,
    insecure: insecureFlag(insecure),
    ...(credentials ? { credentials } : {}),
    ...(chunkSize ? { chunkSize } : {}),
  });
  try {
    await client.ping();
    const result = await pushImage(layout, descriptor, client, target);
    io.out(`pushed ${formatReference({ ...target, digest: result.digest })} (${result.uploaded} blob(s) uploaded, ${result.existing} already present)`);
    return 0;
  } finally {
    await client.close();
  }
}

function insecureFlag(flag: boolean | undefined): boolean {
  return flag === true || /^(1|true|yes)$/i.test(process.env.GATEHOUSE_INSECURE ?? '');
}
