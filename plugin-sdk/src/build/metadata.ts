import { createHash } from 'node:crypto';

/**
 * The compiled plugin file format (SPEC 5.2): one line of metadata, then the script.
 *
 *   // @gatehouse-plugin {"format":1,"name":"RequiredHeader",...}
 *   var __gatehousePlugin = (() => { ... })();
 *
 * The header is a comment, so the file is still a plain script; the host reads it without
 * running anything. `contentHash` covers the script after the header line.
 */
export interface PluginMetadata {
  /** Format of this header; bumped on incompatible changes. */
  format: 1;
  /** The plugin name given to `gatehouse-plugin build --name`. */
  name: string;
  /** Names the entry module exports (what `exportedSymbolName` may be). */
  exports: string[];
  /** The gateway version the plugin was built for; the host loads only an equal version. */
  gatewayVersion: string;
  /** The `@gatehouse/plugin-sdk` version that built it. */
  sdkVersion: string;
  /** `sha256:<hex>` of the script body. */
  contentHash: string;
}

/** The global the script assigns its exports to. */
export const PLUGIN_GLOBAL = '__gatehousePlugin';

const PREFIX = '// @gatehouse-plugin ';

/** Why a file is not a compiled plugin; `reason` is a sentence naming what is wrong. */
export class PluginFileError extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'PluginFileError';
  }
}

/** `sha256:<hex>` of a script body. */
export function contentHash(body: string): string {
  return `sha256:${createHash('sha256').update(body, 'utf8').digest('hex')}`;
}

/** The file text for a script body and its metadata (the hash is computed here). */
export function formatPluginFile(body: string, metadata: Omit<PluginMetadata, 'format' | 'contentHash'>): { text: string; metadata: PluginMetadata } {
  const full: PluginMetadata = { format: 1, ...metadata, contentHash: contentHash(body) };
  return { text: `${PREFIX}${JSON.stringify(full)}\n${body}`, metadata: full };
}

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}

/** Splits a compiled plugin file into metadata and body, verifying the content hash. */
export function parsePluginFile(text: string): { metadata: PluginMetadata; body: string } {
  const newline = text.indexOf('\n');
  if (!text.startsWith(PREFIX) || newline < 0) {
    throw new PluginFileError(`it does not start with a "${PREFIX.trim()}" metadata line; build it with gatehouse-plugin build`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text.slice(PREFIX.length, newline));
  } catch (error) {
    throw new PluginFileError(`its metadata line is not valid JSON (${(error as Error).message})`);
  }
  const m = raw as Partial<PluginMetadata> | null;
  if (typeof m !== 'object' || m === null || m.format !== 1) {
    throw new PluginFileError(`its metadata format is ${JSON.stringify(m?.format)}, this host reads format 1; rebuild it with the gatehouse-plugin of this gateway version`);
  }
  for (const field of ['name', 'gatewayVersion', 'sdkVersion', 'contentHash'] as const) {
    if (typeof m[field] !== 'string' || m[field] === '') throw new PluginFileError(`its metadata has no ${field}`);
  }
  if (!isStringArray(m.exports)) throw new PluginFileError('its metadata has no exports list');
  const body = text.slice(newline + 1);
  const actual = contentHash(body);
  if (actual !== m.contentHash) {
    throw new PluginFileError(`its content hash is ${actual} but its metadata says ${m.contentHash} (the file was changed or truncated after the build)`);
  }
  return { metadata: m as PluginMetadata, body };
}
