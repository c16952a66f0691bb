/**
 * Keeping secret values out of log lines (SPEC 5.3: Secrets "are never logged").
 *
 * Text a plugin produces (its error messages, stacks, log lines) is data from an untrusted
 * source: a plugin may put a secret it holds into it verbatim, or encoded so that an exact
 * substring match misses it. {@link createRedactor} replaces, for every secret value a step
 * holds, each of these forms (case-insensitively unless noted) with `[secret]`:
 *
 * - the value itself, and the value reversed;
 * - hex of its UTF-8 bytes; percent-encoding (`encodeURIComponent`, and every byte as `%XX`);
 *   the value as escaped inside a JSON string;
 * - base64 and base64url of it (case-sensitive), at each of the three alignments it can have
 *   inside a longer base64 text, with or without padding.
 *
 * Then the text is searched once more with everything but letters and digits removed and
 * `%XX` escapes decoded (the "skeleton"), for the value's and its reverse's letters and digits,
 * and for its hex and base64: this catches separators between characters (`h u n t e r`,
 * `de:ad:be:ef`), mixed case and partial percent-encoding. A match there cannot be mapped back
 * to a span, so the whole text becomes `[redacted: it held a secret]`.
 *
 * Limits, by design: values under 4 characters are not redacted (they would match everywhere);
 * the skeleton search needs 6 letters or digits; an encoding not listed (rot13, a hash, a
 * value split across two log lines, a prefix of it) is not recognised. Text is cut to
 * {@link MAX_LOGGED_TEXT} characters after redaction (redaction runs on a larger prefix first,
 * so a cut never leaves half a secret).
 */

/** At most this many characters of untrusted text reach a log line. */
export const MAX_LOGGED_TEXT = 2048;
/** Untrusted text is redacted over this prefix, then cut to {@link MAX_LOGGED_TEXT}. */
const REDACT_WINDOW = 16 * 1024;
/** Values shorter than this are not redacted. */
const MIN_SECRET = 4;
/** The skeleton search needs this many letters and digits. */
const MIN_SKELETON = 6;
/** Secrets are searched by their first this-many characters (a longer value cannot fit in the window whole). */
const MAX_SECRET_CHARS = 16 * 1024;

const MASK = '[secret]';
const WHOLE_MASK = '[redacted: it held a secret]';

/** Replaces secret values, in the encodings listed above, in a text. */
export type Redactor = (text: string) => string;

/** Escapes what is special in a `u`-flag pattern (where escaping anything else is an error). */
const escapeRegExp = (text: string): string => text.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&');
const reverse = (text: string): string => [...text].reverse().join('');
/** Letters and digits only, lower case. */
const skeleton = (text: string): string => text.replace(/[^\p{L}\p{N}]+/gu, '').toLowerCase();

/**
 * The part of base64(prefix + value) that depends on `value` alone, for each of the three
 * prefix lengths modulo 3: how the value looks when it sits inside a longer base64 text.
 */
function base64Cores(bytes: Buffer): string[] {
  const out: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
    // The first characters mix in the zero prefix; the last partial group, what follows the value.
    const start = [0, 2, 3][offset]!;
    const end = Math.floor((offset + bytes.length) / 3) * 4;
    if (end - start >= MIN_SECRET) out.push(encoded.slice(start, end));
    if (offset === 0) out.push(encoded, encoded.replace(/=+$/, ''));
  }
  return out;
}

/** Every form of `value` matched as a span (see the module comment). */
function spanForms(value: string): { caseless: string[]; exact: string[] } {
  const bytes = Buffer.from(value, 'utf8');
  const hex = bytes.toString('hex');
  const caseless = [value, reverse(value), hex, encodeURIComponent(value), hex.replace(/../g, '%$&'), JSON.stringify(value).slice(1, -1)];
  const exact: string[] = [];
  for (const core of base64Cores(bytes)) exact.push(core, core.replace(/\+/g, '-').replace(/\//g, '_'));
  return { caseless: caseless.filter((f) => f.length >= MIN_SECRET), exact: exact.filter((f) => f.length >= MIN_SECRET) };
}

/** Decodes `%XX` escapes (invalid ones stay): the skeleton then sees the bytes a URL carries. */
function percentDecoded(text: string): string {
  if (!text.includes('%')) return text;
  return text.replace(/(?:%[0-9a-fA-F]{2})+/g, (run) => {
    try {
      return decodeURIComponent(run);
    } catch {
      return Buffer.from(run.replace(/%/g, ''), 'hex').toString('latin1');
    }
  });
}

/** A redactor for the given secret values (every key of every Secret a step reads). */
export function createRedactor(values: Iterable<string>): Redactor {
  const caseless = new Set<string>();
  const exact = new Set<string>();
  const skeletons = new Set<string>();
  for (const raw of values) {
    if (typeof raw !== 'string' || raw.length < MIN_SECRET) continue;
    const value = raw.length > MAX_SECRET_CHARS ? raw.slice(0, MAX_SECRET_CHARS) : raw;
    const forms = spanForms(value);
    for (const f of forms.caseless) caseless.add(f);
    for (const f of forms.exact) exact.add(f);
    const bytes = Buffer.from(value, 'utf8');
    for (const form of [value, reverse(value), bytes.toString('hex'), bytes.toString('base64')]) {
      const s = skeleton(form);
      if (s.length >= MIN_SKELETON) skeletons.add(s);
    }
  }
  if (caseless.size === 0 && exact.size === 0) return bound;
  // Longest first: a value that contains another is masked whole. Literal alternatives only:
  // no backtracking whatever the text.
  const byLength = (a: string, b: string): number => b.length - a.length;
  const caselessRe = caseless.size ? new RegExp([...caseless].sort(byLength).map(escapeRegExp).join('|'), 'giu') : undefined;
  const exactRe = exact.size ? new RegExp([...exact].sort(byLength).map(escapeRegExp).join('|'), 'gu') : undefined;
  const skeletonList = [...skeletons];
  return (text) => {
    let out = typeof text === 'string' ? text : String(text);
    if (out.length > REDACT_WINDOW) out = out.slice(0, REDACT_WINDOW);
    if (caselessRe) out = out.replace(caselessRe, MASK);
    if (exactRe) out = out.replace(exactRe, MASK);
    if (skeletonList.length > 0) {
      const flat = skeleton(percentDecoded(out));
      if (skeletonList.some((s) => flat.includes(s))) return WHOLE_MASK;
    }
    return bound(out);
  };
}

/** Cuts untrusted text to {@link MAX_LOGGED_TEXT} characters, saying how much was cut. */
export function bound(text: string, max = MAX_LOGGED_TEXT): string {
  const s = typeof text === 'string' ? text : String(text);
  return s.length <= max ? s : `${s.slice(0, max)}… [${s.length - max} more characters]`;
}

/** The fields and message of a log call. */
export interface LineLogger {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** Strings in `value` redacted and bounded, errors as `{type, message, stack}`; depth- and size-bounded. */
function redactValue(value: unknown, redact: Redactor, depth: number): unknown {
  if (typeof value === 'string') return redact(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth > 6) return '[too deep]';
  if (value instanceof Error) {
    const code = (value as { code?: unknown }).code;
    return { type: value.name, message: redact(value.message), ...(typeof code === 'string' ? { code: bound(code, 128) } : {}), ...(value.stack ? { stack: redact(value.stack) } : {}) };
  }
  if (Array.isArray(value)) return value.slice(0, 100).map((v) => redactValue(v, redact, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value).slice(0, 100)) out[bound(key, 128)] = redactValue(v, redact, depth + 1);
  return out;
}

/**
 * A logger that passes every line's message and string fields (errors included) through
 * `redact` first: given to a step whose logs may quote what a plugin wrote.
 */
export function redactingLogger<L extends LineLogger>(logger: L, redact: Redactor): LineLogger {
  const wrap =
    (level: keyof LineLogger) =>
    (fields: object, message: string): void =>
      logger[level](redactValue(fields, redact, 0) as object, redact(message));
  return { debug: wrap('debug'), info: wrap('info'), warn: wrap('warn'), error: wrap('error') };
}
