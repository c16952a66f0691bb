import type { AuthDecision, CheckRequest, HeaderToSet } from '../step.ts';
import { allow, deny } from '../decision.ts';
import { fromStruct, toStruct } from '../pass-through/struct.ts';

/** gRPC status codes used in `CheckResponse.status` (google.rpc.Code). */
const OK = 0;
const PERMISSION_DENIED = 7;
const UNAUTHENTICATED = 16;

/** `envoy.config.core.v3.HeaderValueOption` as decoded/encoded with proto field names. */
interface HeaderValueOptionMessage {
  header?: { key?: string; value?: string; raw_value?: Buffer | Uint8Array };
  append?: { value?: boolean };
  append_action?: number | string;
}

/** `envoy.service.auth.v3.CheckResponse` with proto field names. */
export interface CheckResponseMessage {
  status?: { code?: number; message?: string };
  denied_response?: { status?: { code?: number | string }; headers?: HeaderValueOptionMessage[]; body?: string };
  ok_response?: { headers?: HeaderValueOptionMessage[]; headers_to_remove?: string[] };
}

interface HttpRequestMessage {
  id?: string;
  method?: string;
  headers?: Record<string, string>;
  header_map?: { headers?: { key?: string; value?: string; raw_value?: Buffer | Uint8Array }[] };
  path?: string;
  host?: string;
  scheme?: string;
  query?: string;
  protocol?: string;
  body?: string;
  raw_body?: Buffer | Uint8Array | string;
  size?: string;
}

/** `envoy.service.auth.v3.CheckRequest` as decoded with proto field names (absent fields absent). */
export interface CheckRequestMessage {
  attributes?: {
    source?: { address?: unknown };
    destination?: { address?: unknown };
    request?: { http?: HttpRequestMessage };
    context_extensions?: Record<string, string>;
    /** Envoy's `config.core.v3.Metadata`: filter name → Struct. */
    metadata_context?: { filter_metadata?: Record<string, unknown> };
  };
}

/**
 * Normalizes a decoded CheckRequest to the {@link CheckRequest} contract: every required
 * field present, header names lowercase (Envoy already sends them lowercase; other
 * clients may not), headers from `header_map` when Envoy sends raw headers.
 */
export function checkRequestFromMessage(message: CheckRequestMessage): CheckRequest {
  const attributes = message.attributes ?? {};
  const http = attributes.request?.http ?? {};
  const headers: Record<string, string> = {};
  if (http.headers) {
    for (const [name, value] of Object.entries(http.headers)) headers[name.toLowerCase()] = value;
  }
  for (const entry of http.header_map?.headers ?? []) {
    if (!entry.key) continue;
    const name = entry.key.toLowerCase();
    const value = entry.value || (entry.raw_value ? Buffer.from(entry.raw_value).toString('utf8') : '');
    headers[name] = headers[name] === undefined ? value : `${headers[name]},${value}`;
  }
  const out: CheckRequest['attributes']['request']['http'] = {
    method: http.method ?? '',
    path: http.path ?? '',
    host: http.host ?? '',
    scheme: http.scheme ?? '',
    headers,
  };
  if (http.id) out.id = http.id;
  if (http.query) out.query = http.query;
  if (http.protocol) out.protocol = http.protocol;
  if (http.body) out.body = http.body;
  // bytes → base64, as proto3's JSON mapping does; plugins get them back as a Uint8Array.
  if (http.raw_body && http.raw_body.length > 0) out.raw_body = typeof http.raw_body === 'string' ? http.raw_body : Buffer.from(http.raw_body).toString('base64');
  if (http.size !== undefined && http.size !== '0') out.size = String(http.size);
  return {
    attributes: {
      ...(attributes.source ? { source: attributes.source } : {}),
      ...(attributes.destination ? { destination: attributes.destination } : {}),
      request: { http: out },
      context_extensions: attributes.context_extensions ?? {},
      ...filterMetadataFromMessage(attributes.metadata_context?.filter_metadata),
    },
  };
}

/** Envoy's filter metadata (Structs) as JSON, for steps that read it (the `jwt` step). */
function filterMetadataFromMessage(filterMetadata: Record<string, unknown> | undefined): Pick<CheckRequest['attributes'], 'metadata_context'> {
  if (!filterMetadata || typeof filterMetadata !== 'object') return {};
  const out: Record<string, Record<string, unknown>> = {};
  for (const [name, struct] of Object.entries(filterMetadata)) out[name] = fromStruct(struct);
  return Object.keys(out).length > 0 ? { metadata_context: { filter_metadata: out } } : {};
}

/** The CheckRequest to send over gRPC (it already uses proto field names). */
export function checkRequestToMessage(request: CheckRequest): CheckRequestMessage {
  const filterMetadata = request.attributes.metadata_context?.filter_metadata;
  if (filterMetadata) {
    // JSON values → Structs, as the wire carries them.
    const structs: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(filterMetadata)) structs[name] = toStruct(value);
    request = { ...request, attributes: { ...request.attributes, metadata_context: { filter_metadata: structs } } } as CheckRequest;
  }
  const http = request.attributes.request.http;
  if (typeof http.raw_body !== 'string') return request as CheckRequestMessage;
  // The JSON form carries bytes as base64; the wire wants the bytes.
  return { ...request, attributes: { ...request.attributes, request: { http: { ...http, raw_body: Buffer.from(http.raw_body, 'base64') } } } } as CheckRequestMessage;
}

function headerOption({ key, value, append }: HeaderToSet): HeaderValueOptionMessage {
  // `append` is deprecated in favour of `append_action`, but it is what Envoy's ext_authz
  // filter reads for CheckResponse headers (with false as the default there).
  return { header: { key, value }, append: { value: append === true } };
}

/** Encodes a decision as Envoy expects it: status OK + `ok_response`, or an error status + `denied_response`. */
export function checkResponseToMessage(decision: AuthDecision): CheckResponseMessage {
  if (decision.allowed) {
    return {
      status: { code: OK },
      ok_response: { headers: decision.headersToSet.map(headerOption), headers_to_remove: decision.headersToRemove },
    };
  }
  return {
    status: { code: decision.status === 401 ? UNAUTHENTICATED : PERMISSION_DENIED },
    denied_response: { status: { code: decision.status }, headers: decision.headers.map(headerOption), body: decision.body },
  };
}

/** Decodes a CheckResponse the way Envoy's ext_authz filter reads it. */
export function decisionFromMessage(message: CheckResponseMessage): AuthDecision {
  const toHeaders = (options: HeaderValueOptionMessage[] | undefined): HeaderToSet[] =>
    (options ?? [])
      .filter((o) => o.header?.key)
      .map((o) => ({
        key: o.header!.key!.toLowerCase(),
        value: o.header!.value || (o.header!.raw_value ? Buffer.from(o.header!.raw_value).toString('utf8') : ''),
        append: o.append?.value === true,
      }));
  if ((message.status?.code ?? OK) === OK) {
    return allow(toHeaders(message.ok_response?.headers), (message.ok_response?.headers_to_remove ?? []).map((h) => h.toLowerCase()));
  }
  const denied = message.denied_response;
  const code = Number(denied?.status?.code);
  // Envoy answers 403 when the server denies without an HTTP status.
  const status = Number.isInteger(code) && code >= 200 && code <= 599 ? code : 403;
  return deny(status, toHeaders(denied?.headers), denied?.body ?? '');
}
