#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { credentialsFromEnvironment, hostPlatform, OciError, parsePlatform } from '@gatehouse/plugin-sdk/oci';
import { GATEWAY_VERSION } from '@gatehouse/plugin-sdk/version';
import { InitCodes, InitError } from '../errors.ts';
import { installFiles, mergeSources } from '../install.ts';
import { checkPluginVersions } from '../versions.ts';
import { DEFAULT_LIMITS, DEFAULT_TIMEOUT_MS, type Limits } from '../limits.ts';
import { pullImage, readLayout, readRootfs, type PulledPlugins, type PullOptions } from '../pull.ts';

const USAGE = `usage:
  gatehouse-init --image REF [--image REF ...] [--dest /auth-plugins] [--gateway-version V] [--insecure]
  gatehouse-init --layout LAYOUT_DIR|FILE.tar[:TAG] [--layout ...] [--dest DIR] [--gateway-version V]
  gatehouse-init --rootfs DIR --tag TAG [--dest DIR] [--gateway-version V]    (a plugin image run as its own init container)
options:
  --max-file-bytes N    largest plugin file (default ${DEFAULT_LIMITS.maxFileBytes})
  --max-layer-bytes N   largest layer download (default ${DEFAULT_LIMITS.maxLayerBytes})
  --max-total-bytes N   all plugin files together (default ${DEFAULT_LIMITS.maxTotalBytes})
  --max-files N         plugin files together (default ${DEFAULT_LIMITS.maxFiles})
  --timeout SECONDS     deadline for the whole run (default ${DEFAULT_TIMEOUT_MS / 1000}); nothing is written when it passes
  --platform OS/ARCH    image to pick from a multi-platform index (default: this machine)
environment: GATEHOUSE_IMAGES, GATEHOUSE_LAYOUTS (comma-separated), GATEHOUSE_ROOTFS, GATEHOUSE_IMAGE_TAG, GATEHOUSE_DEST,
  GATEHOUSE_GATEWAY_VERSION, GATEHOUSE_INSECURE, GATEHOUSE_MAX_FILE_BYTES, GATEHOUSE_MAX_LAYER_BYTES, GATEHOUSE_MAX_TOTAL_BYTES, GATEHOUSE_MAX_FILES, GATEHOUSE_INIT_TIMEOUT, GATEHOUSE_PLATFORM,
  GATEHOUSE_REGISTRY_USERNAME / GATEHOUSE_REGISTRY_PASSWORD (or a Docker config / REGISTRY_AUTH_FILE)`;

type Io = { out: (line: string) => void; err: (line: string) => void };
const stdio: Io = { out: (line) => process.stdout.write(`${line}\n`), err: (line) => process.stderr.write(`${line}\n`) };

class UsageError extends Error {}

/**
 * gatehouse-init: pulls plugin images (or reads layouts, or its own root filesystem), checks
 * that each is tagged with the gateway version, verifies every digest and extracts the regular
 * files under compiled-auth-plugins/ into --dest. Nothing is written unless every source is good.
 * Returns the exit code: 0 ok, 1 refused or failed, 2 usage error.
 */
export async function main(argv: string[], io: Io = stdio, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        image: { type: 'string', multiple: true },
        layout: { type: 'string', multiple: true },
        rootfs: { type: 'string' },
        tag: { type: 'string' },
        dest: { type: 'string' },
        'gateway-version': { type: 'string' },
        insecure: { type: 'boolean' },
        'max-file-bytes': { type: 'string' },
        'max-layer-bytes': { type: 'string' },
        'max-total-bytes': { type: 'string' },
        'max-files': { type: 'string' },
        timeout: { type: 'string' },
        platform: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) {
      io.out(USAGE);
      return 0;
    }
    const images = values.image ?? list(env.GATEHOUSE_IMAGES);
    const layouts = values.layout ?? list(env.GATEHOUSE_LAYOUTS);
    const rootfs = values.rootfs ?? (env.GATEHOUSE_ROOTFS || undefined);
    if (images.length + layouts.length === 0 && rootfs === undefined) throw new UsageError('nothing to do: give --image REF, --layout DIR or --rootfs DIR');
    const gatewayVersion = values['gateway-version'] ?? (env.GATEHOUSE_GATEWAY_VERSION || GATEWAY_VERSION);
    const dest = values.dest ?? (env.GATEHOUSE_DEST || '/auth-plugins');
    const limits: Limits = {
      maxFileBytes: bytes('--max-file-bytes', values['max-file-bytes'] ?? env.GATEHOUSE_MAX_FILE_BYTES, DEFAULT_LIMITS.maxFileBytes),
      maxLayerBytes: bytes('--max-layer-bytes', values['max-layer-bytes'] ?? env.GATEHOUSE_MAX_LAYER_BYTES, DEFAULT_LIMITS.maxLayerBytes),
      maxTotalBytes: bytes('--max-total-bytes', values['max-total-bytes'] ?? env.GATEHOUSE_MAX_TOTAL_BYTES, DEFAULT_LIMITS.maxTotalBytes),
      maxFiles: bytes('--max-files', values['max-files'] ?? env.GATEHOUSE_MAX_FILES, DEFAULT_LIMITS.maxFiles),
    };
    const timeoutMs = bytes('--timeout', values.timeout ?? env.GATEHOUSE_INIT_TIMEOUT, DEFAULT_TIMEOUT_MS / 1000) * 1000;
    const platformValue = values.platform ?? (env.GATEHOUSE_PLATFORM || undefined);
    const options: PullOptions = {
      gatewayVersion,
      limits,
      platform: platformValue ? parsePlatform(platformValue) : hostPlatform(),
      access: { insecure: values.insecure === true || /^(1|true|yes)$/i.test(env.GATEHOUSE_INSECURE ?? ''), credentials: credentialsFromEnvironment(env) },
    };

    // Everything is read and verified before anything is written. One deadline for all of it:
    // a registry that drips a byte every few seconds never trips a per-read timeout.
    const sources: PulledPlugins[] = [];
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new InitError(InitCodes.TIMEOUT, `did not finish within --timeout ${timeoutMs / 1000} s (a slow or stalled registry?); nothing was written`)), timeoutMs);
    });
    const gather = async () => {
      for (const image of images) sources.push(await pullImage(image, options));
      for (const layout of layouts) sources.push(await readLayout(layout, options));
      if (rootfs !== undefined) sources.push(await readRootfs(rootfs, values.tag ?? (env.GATEHOUSE_IMAGE_TAG || undefined), options));
      // The version each plugin file was built for, whatever its image's tag says.
      checkPluginVersions(sources, gatewayVersion);
      const merged = mergeSources(sources);
      let total = 0;
      for (const { data } of merged.values()) total += data.length;
      if (total > limits.maxTotalBytes || merged.size > limits.maxFiles) {
        throw new InitError(InitCodes.TOO_LARGE, `all sources together give ${merged.size} plugin files of ${total} bytes, over the limits (${limits.maxFiles} files, ${limits.maxTotalBytes} bytes)`);
      }
      return merged;
    };
    let merged;
    try {
      merged = await Promise.race([gather(), deadline]);
    } finally {
      clearTimeout(timer);
    }
    const result = await installFiles(dest, merged);

    for (const source of sources) {
      io.out(`gatehouse-init: ${source.source}${source.digest ? `@${source.digest}` : ''}: ${[...source.files.keys()].sort().join(', ')}`);
    }
    io.out(`gatehouse-init: ${dest}: wrote ${result.written.length} file(s)${result.written.length ? ` (${result.written.join(', ')})` : ''}, ${result.unchanged.length} unchanged (gateway ${gatewayVersion})`);
    return 0;
  } catch (error) {
    if (error instanceof InitError || error instanceof OciError) {
      io.err(`gatehouse-init: error: ${error.message} [${error.code}]`);
      return 1;
    }
    const code = (error as { code?: string }).code;
    if (error instanceof UsageError || code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' || code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' || code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
      io.err(`gatehouse-init: ${(error as Error).message}\n${USAGE}`);
      return 2;
    }
    io.err(`gatehouse-init: unexpected error: ${(error as Error).stack ?? String(error)}`);
    return 1;
  }
}

function list(value: string | undefined): string[] {
  return (value ?? '').split(/[,\s]+/).filter(Boolean);
}

function bytes(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new UsageError(`${flag} must be a positive number of bytes (got ${JSON.stringify(value)})`);
  return n;
}

if (import.meta.main) {
  // Exit at once: after a timeout, a stalled download may still hold a socket open.
  process.exit(await main(process.argv.slice(2)));
}
