import { parseArgs } from 'node:util';
import { ErrorCodes, GatehouseError } from '../errors.ts';

/** One command-line flag. Every flag also reads `GATEHOUSE_<NAME>` (SPEC 9). */
export interface FlagDef {
  readonly name: string;
  readonly type: 'string' | 'boolean';
  readonly multiple?: boolean;
  readonly default?: string;
  readonly description: string;
}

export type FlagValues = Record<string, string | boolean | string[] | undefined>;

/** `config-dir` → `GATEHOUSE_CONFIG_DIR`. */
export function envName(flag: string): string {
  return `GATEHOUSE_${flag.toUpperCase().replace(/-/g, '_')}`;
}

/** Parses flags: command line first, then environment, then defaults. Unknown flags are errors. */
export function parseFlags(argv: readonly string[], defs: readonly FlagDef[], env: NodeJS.ProcessEnv = process.env): { values: FlagValues; positionals: string[] } {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: Object.fromEntries(defs.map((d) => [d.name, { type: d.type, ...(d.multiple ? { multiple: true } : {}) }])),
    });
  } catch (error) {
    throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, (error as Error).message);
  }
  const values: FlagValues = {};
  for (const def of defs) {
    let value = parsed.values[def.name] as string | boolean | string[] | undefined;
    const fromEnv = env[envName(def.name)];
    if (value === undefined && fromEnv !== undefined && fromEnv !== '') {
      value = def.type === 'boolean' ? /^(1|true|yes|on)$/i.test(fromEnv) : def.multiple ? fromEnv.split(',').map((s) => s.trim()) : fromEnv;
    }
    if (value === undefined && def.default !== undefined) value = def.multiple ? [def.default] : def.default;
    values[def.name] = value;
  }
  return { values, positionals: parsed.positionals };
}

/** A port number (0 = pick a free one). */
export function portValue(values: FlagValues, name: string): number {
  const raw = values[name];
  const port = Number(raw);
  if (typeof raw !== 'string' || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--${name} must be a port number from 0 to 65535, got "${raw}"`);
  }
  return port;
}

/** A required string flag. */
export function requiredValue(values: FlagValues, name: string): string {
  const raw = values[name];
  if (typeof raw !== 'string' || raw === '') throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--${name} is required (or set ${envName(name)})`);
  return raw;
}

/** Help text for a command's flags. */
export function describeFlags(defs: readonly FlagDef[]): string {
  return defs
    .map((d) => `  --${d.name}${d.type === 'string' ? ' VALUE' : ''}`.padEnd(34) + `${d.description}${d.default !== undefined ? ` (default ${d.default})` : ''} [${envName(d.name)}]`)
    .join('\n');
}
