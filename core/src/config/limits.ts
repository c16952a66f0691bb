import { ErrorCodes, GatehouseError } from '../errors.ts';

/**
 * Process-wide limits on configuration (docs/configuration.md, "Limits"): what no manifest,
 * from any source, may exceed, so that no configuration can stall or exhaust the process.
 * Each one is a setting read from the environment once (every Gatehouse process, its traffic
 * workers and `gatehouse validate` read the same variables, so they all reach the same verdicts).
 */
export interface ConfigLimits {
  /**
   * Largest RE2 program a regex may compile to (Envoy's `re2.max_program_size.error_level`,
   * default 100; Gloo's Settings `gloo.regexMaxProgramSize`).
   */
  readonly regexMaxProgramSize: number;
  /** RouteTables one delegation chain may pass through (a VirtualService's routes are level 0). */
  readonly maxDelegationDepth: number;
  /** Routes (each matcher counting as one, as Gloo expands them for Envoy) one virtual host or RouteTable may expand to. */
  readonly maxRoutesPerVirtualHost: number;
  /** Routes all virtual hosts together may expand to (the walks of one load stop there: its work and the route table's memory are bounded). */
  readonly maxRoutesTotal: number;
}

/** The defaults (see {@link ConfigLimits}). */
export const DEFAULT_CONFIG_LIMITS: ConfigLimits = {
  regexMaxProgramSize: 100,
  maxDelegationDepth: 16,
  maxRoutesPerVirtualHost: 20_000,
  maxRoutesTotal: 100_000,
};

/** Environment variable of each limit. */
export const CONFIG_LIMIT_ENV: { readonly [K in keyof ConfigLimits]: string } = {
  regexMaxProgramSize: 'GATEHOUSE_REGEX_MAX_PROGRAM_SIZE',
  maxDelegationDepth: 'GATEHOUSE_MAX_DELEGATION_DEPTH',
  maxRoutesPerVirtualHost: 'GATEHOUSE_MAX_ROUTES_PER_VIRTUAL_HOST',
  maxRoutesTotal: 'GATEHOUSE_MAX_ROUTES_TOTAL',
};

/** The limits set in `env` over the defaults; a value that is not a positive integer is a {@link GatehouseError} (`GH_BAD_ARGUMENT`). */
export function configLimitsFrom(env: Readonly<Record<string, string | undefined>>): ConfigLimits {
  const out: Record<string, number> = { ...DEFAULT_CONFIG_LIMITS };
  for (const [key, name] of Object.entries(CONFIG_LIMIT_ENV)) {
    const raw = env[name]?.trim();
    if (raw === undefined || raw === '') continue;
    if (!/^[0-9]{1,9}$/.test(raw) || Number(raw) < 1) throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `${name} must be a positive integer, got "${raw.slice(0, 40)}"`);
    out[key] = Number(raw);
  }
  return out as unknown as ConfigLimits;
}

let current: ConfigLimits | undefined;

/** This process's limits (read from `process.env` on first use). */
export function configLimits(): ConfigLimits {
  return (current ??= configLimitsFrom(process.env));
}
