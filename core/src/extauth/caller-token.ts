import { readFileSync } from 'node:fs';
import { ErrorCodes, GatehouseError } from '../errors.ts';

/** Shortest caller token accepted: a guessable token would reopen the password oracle. */
export const MIN_TOKEN_CHARS = 16;
/** How often a token file is read again (a rotated Kubernetes Secret reaches mounted files within about a minute). */
const REREAD_MS = 5_000;
/** How long the previous token is still accepted after the file changed: pods see a rotation at different moments. */
const PREVIOUS_GRACE_MS = 5 * 60_000;

/**
 * The ext_authz caller token (docs/auth.md#callers): fixed, or read from a file (a mounted
 * Secret) and read again while the process runs, so that a rotated Secret needs no restart.
 */
export interface CallerToken {
  /** Tokens accepted now, newest first (the previous one for a while after a rotation). */
  accepted(): readonly string[];
}

function checked(token: string, what: string): string {
  if (token.length < MIN_TOKEN_CHARS || /\s/.test(token)) {
    throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `${what}: the ext_authz caller token must be at least ${MIN_TOKEN_CHARS} characters without spaces (e.g. openssl rand -hex 32)`);
  }
  return token;
}

/** A token given as is. Throws `GH_BAD_ARGUMENT` when too short. */
export function fixedCallerToken(token: string): CallerToken {
  const tokens = [checked(token, 'the token')];
  return { accepted: () => tokens };
}

/**
 * A token read from `path` (trimmed), now and again every few seconds when asked. Throws
 * `GH_BAD_ARGUMENT` when the file cannot be read or holds no valid token at start; later, a
 * bad read keeps the last good token.
 */
export function fileCallerToken(path: string, now: () => number = Date.now): CallerToken {
  const read = (): string => {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      throw new GatehouseError(ErrorCodes.BAD_ARGUMENT, `--extauth-token-file ${path} cannot be read: ${(error as Error).message}`);
    }
    return checked(text.trim(), `--extauth-token-file ${path}`);
  };
  let current = read();
  let previous: { token: string; until: number } | undefined;
  let readAt = now();
  let tokens: readonly string[] = [current];
  return {
    accepted() {
      const at = now();
      if (at - readAt >= REREAD_MS) {
        readAt = at;
        try {
          const fresh = read();
          if (fresh !== current) {
            previous = { token: current, until: at + PREVIOUS_GRACE_MS };
            current = fresh;
          }
        } catch {
          // A Secret being rewritten, or removed: keep what worked.
        }
        if (previous && at >= previous.until) previous = undefined;
        tokens = previous ? [current, previous.token] : [current];
      }
      return tokens;
    },
  };
}
