/**
 * `crypto.getRandomValues` and `crypto.randomUUID` for the sandbox (SPEC 5.3), backed by the
 * host's CSPRNG through one synchronous callback that returns base64 (a copy, never a host
 * object). Runs inside the isolate.
 */

/** The host's half: `n` random bytes (0 ≤ n ≤ 65536) as base64. */
export type HostRandom = (n: number) => string;

/** WebCrypto's limit for one getRandomValues call. */
export const MAX_RANDOM_BYTES = 65_536;

function domError(name: string, message: string): Error {
  const error = new Error(message);
  error.name = name;
  return error;
}

/** Builds the sandbox's `crypto` object (random parts only) over `hostRandom`. */
export function createRandom(hostRandom: HostRandom, atob: (data: string) => string): { getRandomValues<T extends ArrayBufferView>(view: T): T; randomUUID(): string } {
  const integerViews = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, BigInt64Array, BigUint64Array];
  const fill = (target: Uint8Array): void => {
    const text = atob(hostRandom(target.length));
    if (text.length !== target.length) throw domError('OperationError', 'the host returned too few random bytes');
    for (let i = 0; i < text.length; i++) target[i] = text.charCodeAt(i);
  };
  const getRandomValues = <T extends ArrayBufferView>(view: T): T => {
    if (!integerViews.some((Type) => view instanceof Type)) {
      throw domError('TypeMismatchError', "Failed to execute 'getRandomValues' on 'Crypto': The provided ArrayBufferView is not an integer array type");
    }
    if (view.byteLength > MAX_RANDOM_BYTES) {
      throw domError('QuotaExceededError', `Failed to execute 'getRandomValues' on 'Crypto': The ArrayBufferView's byte length (${view.byteLength}) exceeds the number of bytes of entropy available via this API (${MAX_RANDOM_BYTES})`);
    }
    fill(new Uint8Array(view.buffer, view.byteOffset, view.byteLength));
    return view;
  };
  const randomUUID = (): string => {
    const b = new Uint8Array(16);
    fill(b);
    b[6] = (b[6]! & 0x0f) | 0x40;
    b[8] = (b[8]! & 0x3f) | 0x80;
    let hex = '';
    for (let i = 0; i < 16; i++) hex += (b[i]! + 0x100).toString(16).slice(1);
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  };
  return { getRandomValues, randomUUID };
}
