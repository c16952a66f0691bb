import { FieldErrorCodes } from '../compile/errors.ts';

/** What a masked upstream error says. */
const REMOTE_MESSAGE = 'the upstream GraphQL server reported an error';
/** Upstream `extensions.code` values passed on (code-shaped only: no free text). */
const CODE = /^[A-Z][A-Z0-9_]{0,63}$/;

/** The bytes of an `errors` member's name: an answer without them holds no errors (found without parsing). */
export const ERRORS_MEMBER = Buffer.from('"errors"');

/**
 * The answer with each of its `errors` replaced by a generic one (message, `locations`, `path`, a
 * code-shaped `extensions.code`); `log` gets the originals. Answers without errors, or that are
 * not a JSON object, pass unchanged.
 */
export function maskRemoteErrors(body: Buffer, log: (errors: unknown[]) => void): Buffer {
  // Most answers hold no errors: found without parsing.
  if (!body.includes(ERRORS_MEMBER)) return body;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return body;
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return body;
  const result = parsed as Record<string, unknown>;
  if (!Array.isArray(result.errors) || result.errors.length === 0) return body;
  maskResult(result, log);
  return Buffer.from(JSON.stringify(result));
}

/** Replaces the `errors` of a parsed upstream result in place (see {@link maskRemoteErrors}). */
export function maskResult(result: Record<string, unknown>, log: (errors: unknown[]) => void): void {
  if (!Array.isArray(result.errors) || result.errors.length === 0) return;
  log(result.errors);
  result.errors = result.errors.map((e: unknown) => {
    const error = (e && typeof e === 'object' ? e : {}) as { locations?: unknown; path?: unknown; extensions?: { code?: unknown } };
    const code = typeof error.extensions?.code === 'string' && CODE.test(error.extensions.code) ? error.extensions.code : FieldErrorCodes.UPSTREAM_ERROR;
    return {
      message: REMOTE_MESSAGE,
      ...(Array.isArray(error.locations) ? { locations: error.locations } : {}),
      ...(Array.isArray(error.path) ? { path: error.path } : {}),
      extensions: { code },
    };
  });
}
