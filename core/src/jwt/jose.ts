/**
 * `jose`, loaded on the first verification (~15 MB resident): a gateway whose routes have no JWT
 * filter never loads it, and the one verifying a token is already asynchronous.
 */
let loaded: Promise<typeof import('jose')> | undefined;

/** The `jose` module (one import per process). */
export function jose(): Promise<typeof import('jose')> {
  return (loaded ??= import('jose'));
}
