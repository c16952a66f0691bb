/**
 * The error shape of every Gatehouse package: a stable `code` that callers match on (never
 * the message) and a message that names what to change. Each subsystem subclasses it with
 * its own name and codes. It lives in the SDK because every other package depends on it.
 */
export class CodedError<Code extends string = string> extends Error {
  readonly code: Code;

  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}
