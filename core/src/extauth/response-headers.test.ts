import { describe, expect, it } from 'vitest';
import { allow } from './decision.ts';
import { checkResponseToMessage, decisionFromMessage } from './grpc/check-messages.ts';
import { sanitizeDecision, type SanitizeReport } from './sanitize-decision.ts';

describe("an allowing decision's response headers (an OIDC step's refreshed session cookie)", () => {
  const decision = { ...allow([{ key: 'x-user', value: 'a' }]), responseHeadersToAdd: [{ key: 'set-cookie', value: '__session=abc; Path=/; HttpOnly', append: true }] };

  it('cross the ext_authz wire as OkHttpResponse.response_headers_to_add and come back unchanged', () => {
    const message = checkResponseToMessage(decision);
    expect(message.ok_response?.response_headers_to_add).toHaveLength(1);
    expect(decisionFromMessage(message)).toMatchObject({ allowed: true, headersToSet: [{ key: 'x-user', value: 'a' }], responseHeadersToAdd: decision.responseHeadersToAdd });
    expect(decisionFromMessage(checkResponseToMessage(allow()))).not.toHaveProperty('responseHeadersToAdd');
  });

  it('are sanitised: unwritable or gateway-owned ones are dropped and reported, the rest kept', () => {
    const report: SanitizeReport = { dropped: [] };
    const safe = sanitizeDecision({ ...decision, responseHeadersToAdd: [...decision.responseHeadersToAdd, { key: 'set-cookie', value: 'a\r\nx: y' }, { key: 'content-length', value: '5' }, { key: 'bad name', value: 'v' }] }, report);
    expect(safe).toMatchObject({ allowed: true, responseHeadersToAdd: decision.responseHeadersToAdd });
    expect(report.dropped).toEqual(['set-cookie', 'content-length', 'bad name']);
    expect(sanitizeDecision(decision)).toBe(decision);
  });
});
