/**
 * Turns what a plugin's `Authorize` returned (already copied out of the sandbox as JSON)
 * into the auth chain's decision, validating every field: a plugin's output is untrusted.
 * Used by the host and by the test kit's in-process mode, so both judge a response alike.
 */

/** A header to set (Envoy `HeaderValueOption`, flattened). Same shape as core's `HeaderToSet`. */
export interface DecisionHeader {
  key: string;
  value: string;
  append?: boolean;
}

/** Same shape as core's `AuthDecision`. */
export type PluginDecision =
  | { allowed: true; headersToSet: DecisionHeader[]; headersToRemove: string[]; state?: Record<string, unknown>; responseHeaders?: DecisionHeader[] }
  | { allowed: false; status: number; headers: DecisionHeader[]; body: string };

/** The response is not an `AuthorizationResponse`; the message names the offending field. */
export class BadResponseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadResponseError';
  }
}

// RFC 9110 token: what a header name may contain. Pseudo-headers (`:path`) are not allowed.
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Field values must not smuggle a line break or NUL into the upstream request.
const BAD_VALUE = /[\r\n\0]/;
/** Bodies above this are garbage, not denials. */
const MAX_BODY = 64 * 1024;
/** Largest `State` one step may hand to the next (JSON characters). */
const MAX_STATE = 64 * 1024;
const MAX_HEADERS = 64;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function kind(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function fail(path: string, expected: string, got: unknown): never {
  throw new BadResponseError(`${path}: expected ${expected}, got ${kind(got)}`);
}

function headers(value: unknown, path: string): DecisionHeader[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) fail(path, 'an array of {header: {key, value}, append?}', value);
  if (value.length > MAX_HEADERS) throw new BadResponseError(`${path}: more than ${MAX_HEADERS} headers`);
  return value.map((option: unknown, i) => {
    const at = `${path}[${i}]`;
    if (!isObject(option)) fail(at, 'an object {header: {key, value}, append?}', option);
    const header = option.header;
    if (!isObject(header)) fail(`${at}.header`, 'an object {key, value}', header);
    const { key, value: headerValue } = header;
    if (typeof key !== 'string' || !TOKEN.test(key)) throw new BadResponseError(`${at}.header.key: expected a header name, got ${JSON.stringify(key) ?? kind(key)}`);
    if (typeof headerValue !== 'string') fail(`${at}.header.value`, 'a string', headerValue);
    if (BAD_VALUE.test(headerValue)) throw new BadResponseError(`${at}.header.value: contains CR, LF or NUL`);
    const append = option.append;
    if (append !== undefined && append !== null && typeof append !== 'boolean') fail(`${at}.append`, 'a boolean', append);
    return append ? { key, value: headerValue, append: true } : { key, value: headerValue };
  });
}

/** Validates an `AuthorizationResponse` and maps it to a decision; throws {@link BadResponseError}. */
export function toDecision(response: unknown): PluginDecision {
  if (!isObject(response)) fail('response', 'an AuthorizationResponse object', response);
  const check = response.CheckResponse;
  if (!isObject(check)) fail('response.CheckResponse', 'an object', check);
  const status = check.status;
  if (!isObject(status)) fail('response.CheckResponse.status', 'an object {code}', status);
  const code = status.code;
  if (typeof code !== 'number' || !Number.isInteger(code) || code < 0) fail('response.CheckResponse.status.code', 'a gRPC status code (0 allows)', code);

  if (code === 0) {
    const ok = check.ok_response ?? {};
    if (!isObject(ok)) fail('response.CheckResponse.ok_response', 'an object', ok);
    const remove = ok.headers_to_remove ?? [];
    if (!Array.isArray(remove)) fail('response.CheckResponse.ok_response.headers_to_remove', 'an array of header names', remove);
    const headersToRemove = remove.map((name: unknown, i) => {
      if (typeof name !== 'string' || !TOKEN.test(name)) throw new BadResponseError(`response.CheckResponse.ok_response.headers_to_remove[${i}]: expected a header name`);
      return name.toLowerCase();
    });
    const headersToSet = headers(ok.headers, 'response.CheckResponse.ok_response.headers');
    const userInfo = response.UserInfo;
    if (userInfo !== undefined && userInfo !== null) {
      if (!isObject(userInfo)) fail('response.UserInfo', 'an object {UserID}', userInfo);
      const id = userInfo.UserID;
      if (id !== undefined && id !== '') {
        if (typeof id !== 'string' || BAD_VALUE.test(id)) fail('response.UserInfo.UserID', 'a string without CR, LF or NUL', id);
        headersToSet.push({ key: 'x-user-id', value: id });
      }
    }
    // Headers for the client's response (Envoy `response_headers_to_add`); absent from the decision when none.
    const responseHeaders = headers(ok.response_headers_to_add, 'response.CheckResponse.ok_response.response_headers_to_add');
    const extra = responseHeaders.length > 0 ? { responseHeaders } : {};
    const state = response.State;
    if (state === undefined || state === null) return { allowed: true, headersToSet, headersToRemove, ...extra };
    if (!isObject(state)) fail('response.State', 'a JSON object', state);
    if (JSON.stringify(state).length > MAX_STATE) throw new BadResponseError(`response.State: larger than ${MAX_STATE} characters of JSON`);
    return { allowed: true, headersToSet, headersToRemove, state, ...extra };
  }

  const denied = check.denied_response ?? {};
  if (!isObject(denied)) fail('response.CheckResponse.denied_response', 'an object', denied);
  let httpStatus = 403;
  if (denied.status !== undefined && denied.status !== null) {
    if (!isObject(denied.status)) fail('response.CheckResponse.denied_response.status', 'an object {code}', denied.status);
    const value = denied.status.code;
    // Envoy maps an unset (0) HTTP status to 403.
    if (value !== undefined && value !== 0) {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 200 || value > 599) {
        throw new BadResponseError(`response.CheckResponse.denied_response.status.code: expected an HTTP status 200-599, got ${JSON.stringify(value) ?? kind(value)}`);
      }
      httpStatus = value;
    }
  }
  const body = denied.body ?? '';
  if (typeof body !== 'string') fail('response.CheckResponse.denied_response.body', 'a string', body);
  if (body.length > MAX_BODY) throw new BadResponseError(`response.CheckResponse.denied_response.body: longer than ${MAX_BODY} characters`);
  return { allowed: false, status: httpStatus, headers: headers(denied.headers, 'response.CheckResponse.denied_response.headers'), body };
}
