// PLACEHOLDER (being written): HTML's structuredClone for the sandbox.
/** HTML's `structuredClone` (without transfer) in plain JavaScript. Runs inside the isolate. */
export function structuredClone(value: unknown): unknown {
  return value;
}
