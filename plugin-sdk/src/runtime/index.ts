/**
 * The plugin protocol shared by the host (core/src/extauth/plugins) and the test kit:
 * config decoding, response validation, and the script that runs inside the isolate.
 */
export { ConfigDecodeError, decodeConfig } from './decode-config.ts';
export { RUNTIME_INSTALL_GLOBAL, sandboxRuntimeScript } from './runtime-script.ts';
export { LOG_LINES_PER_CALL, type HostAnswer, type HostLog, type Outcome, type RuntimeApi, type Stage } from './sandbox-runtime.ts';
export { BadResponseError, toDecision, type DecisionHeader, type PluginDecision } from './to-decision.ts';
export type { HostApi, HostCall, HostCrypto, HostDone, HostStore, HostUrl, HostUrlParts } from './host-api.ts';
export { checkStoreOp, DEFAULT_STORE_LIMITS, MemoryStore, type StoreCall, type StoreLimits, type StoreOp, type StoreResult } from './memory-store.ts';
export { createHostCrypto } from './host/crypto.ts';
export { HostCalls, SANDBOX_DEFAULTS, WALL_CLOCK, type HostCallLimits, type HostClock, type HostEgress } from './host/host-calls.ts';
export { hostRandom } from './host/random.ts';
export { hostUrl } from './host/url.ts';
