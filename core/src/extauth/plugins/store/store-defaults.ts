import type { RedisSettings } from '../../../redis/client.ts';

/** `--plugin-store-*`: Redis for every plugin step that does not choose its own store (`pluginAuth.store`). */
export interface PluginStoreDefaults {
  redis: RedisSettings;
  /** Longest wait of one operation (default 100 ms), within the call's wall deadline. */
  timeoutMs?: number;
  failOpen?: boolean;
}

let defaults: PluginStoreDefaults | undefined;

/** Sets the auth server's default store backend (the CLI, once, before the first step is built); undefined: memory. */
export function configurePluginStoreDefaults(value: PluginStoreDefaults | undefined): void {
  defaults = value;
}

/** The auth server's default store backend; undefined: memory. */
export function pluginStoreDefaults(): PluginStoreDefaults | undefined {
  return defaults;
}
