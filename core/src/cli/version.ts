import { GATEWAY_VERSION } from '../version.ts';

/** `gatehouse version`: prints the gateway version (SPEC 1). */
export async function runVersion(): Promise<number> {
  process.stdout.write(`${GATEWAY_VERSION}\n`);
  return 0;
}
