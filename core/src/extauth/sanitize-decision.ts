import { forbidden, type AuthDecision, type HeaderToSet } from './step.ts';

/** RFC 9110 5.6.2 `token`: what a header name may be. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** RFC 9110 5.5 field-value: visible ASCII, obs-text (0x80–0xFF), space and tab; no CR, LF, NUL, other controls or DEL. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Headers a decision may never set on a response or a request: framing and connection
 * management belong to the gateway (a plugin's `transfer-encoding` next to the gateway's
 * `content-length` would give the client both), and `host` routes the upstream request.
 */
const GATEWAY_OWNED = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'content-length', 'host', 'http2-settings']);

/** Whether `name` may be written as a header name. */
export function isHeaderName(name: unknown): name is string {
  return typeof name === 'string' && name.length > 0 && name.length <= 256 && TOKEN.test(name);
}

/** Whether `value` may be written as a header value (Node's `writeHead` would throw otherwise). */
export function isHeaderValue(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 16384 && FIELD_VALUE.test(value);
}

/** What {@link sanitizeDecision} had to change, for a warning log; empty when nothing. */
export interface SanitizeReport {
  dropped: string[];
  reason?: string;
}

/**
 * Makes a decision from any source (a plugin, a user's pass-through server, a remote extauth)
 * safe to apply. Untrusted decisions reached `res.writeHead` as they were: a control character
 * in a denial header threw outside any handler and took the gateway down.
 *
 * - Denial: headers that are not valid HTTP fields or that the gateway owns are dropped; a
 *   status outside 200–599 becomes 403; 204 and 304 lose their body (RFC 9110 15.3.5, 15.4.5).
 * - Allow: an invalid header to set turns the decision into a fail-closed 403, because dropping
 *   it would let a client-sent header of the same name (an identity, say) through unchanged;
 *   invalid names to remove are ignored.
 */
export function sanitizeDecision(decision: AuthDecision, report?: SanitizeReport): AuthDecision {
  if (decision.allowed) {
    let remove = decision.headersToRemove;
    if (!remove.every(isRemovable)) {
      remove = remove.filter((name) => {
        const ok = isRemovable(name);
        if (!ok) report?.dropped.push(String(name).slice(0, 64));
        return ok;
      });
    }
    for (const header of decision.headersToSet) {
      if (!isHeaderName(header.key) || !isHeaderValue(header.value) || GATEWAY_OWNED.has(header.key.toLowerCase())) {
        if (report) report.reason = `an allowing decision set an invalid or gateway-owned header ${JSON.stringify(String(header.key).slice(0, 64))}; denied (fail closed)`;
        return forbidden();
      }
    }
    let response = decision.responseHeadersToAdd;
    if (response && !response.every(isWritable)) {
      response = response.filter((header) => {
        const ok = isWritable(header) && header.key.toLowerCase() !== 'content-length';
        if (!ok) report?.dropped.push(String(header.key).slice(0, 64));
        return ok;
      });
    }
    if (remove === decision.headersToRemove && response === decision.responseHeadersToAdd) return decision;
    return { ...decision, headersToRemove: remove, ...(response ? { responseHeadersToAdd: response } : {}) };
  }
  let status = decision.status;
  if (!Number.isInteger(status) || status < 200 || status > 599) {
    if (report) report.reason = `a denial with status ${String(status)} became 403`;
    status = 403;
  }
  let headers: HeaderToSet[] = decision.headers;
  if (!headers.every(isWritable)) {
    headers = headers.filter((header) => {
      const ok = isWritable(header);
      if (!ok) report?.dropped.push(String(header.key).slice(0, 64));
      return ok;
    });
  }
  const body = status === 204 || status === 304 || typeof decision.body !== 'string' ? '' : decision.body;
  if (status === decision.status && headers === decision.headers && body === decision.body) return decision;
  return { allowed: false, status, headers, body };
}

/**
 * A denial header that may be sent. `content-length` stays when it is a number (Basic Auth's
 * 401 carries `content-length: 0` to Envoy, SPEC 5.1); the gateway writes its own anyway.
 */
function isWritable(header: HeaderToSet): boolean {
  if (!isHeaderName(header.key) || !isHeaderValue(header.value)) return false;
  const name = header.key.toLowerCase();
  if (name === 'content-length') return /^\d{1,15}$/.test(header.value);
  return !GATEWAY_OWNED.has(name);
}

function isRemovable(name: unknown): boolean {
  return isHeaderName(name) && !GATEWAY_OWNED.has(name.toLowerCase());
}
