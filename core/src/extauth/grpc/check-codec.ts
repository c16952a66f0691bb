import type { ServiceDefinition } from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import type { AuthDecision, CheckRequest } from '../step.ts';
import { checkRequestFromMessage, checkResponseToMessage, type CheckRequestMessage, type CheckResponseMessage } from './check-messages.ts';
import { AUTHORIZATION_SERVICE, PROTO_OPTIONS, authorizationRoot } from './protos.ts';

type Attributes = NonNullable<CheckRequestMessage['attributes']>;
type HttpRequestMessage = NonNullable<NonNullable<Attributes['request']>['http']>;
/** A message as protobufjs decodes it: fields off the wire are own properties, defaults live on the prototype. */
type Decoded = Record<string, unknown>;

interface Types {
  request: protobuf.Type;
  response: protobuf.Type;
  peer: protobuf.Type;
  headerMap: protobuf.Type;
  metadata: protobuf.Type;
}
let types: Types | undefined;

function codecTypes(): Types {
  if (types) return types;
  const root = authorizationRoot();
  types = {
    request: root.lookupType('envoy.service.auth.v3.CheckRequest'),
    response: root.lookupType('envoy.service.auth.v3.CheckResponse'),
    peer: root.lookupType('envoy.service.auth.v3.AttributeContext.Peer'),
    headerMap: root.lookupType('envoy.config.core.v3.HeaderMap'),
    metadata: root.lookupType('envoy.config.core.v3.Metadata'),
  };
  return types;
}

/** A field the message carried, as protobufjs' toObject reads it (`defaults: false`). */
function field(message: Decoded, name: string): unknown {
  return Object.hasOwn(message, name) && message[name] != null ? message[name] : undefined;
}

/** A map field with entries (protobufjs leaves a shared empty object when there are none). */
function entries(message: Decoded, name: string): Record<string, string> | undefined {
  const map = field(message, name) as Record<string, string> | undefined;
  return map && Object.keys(map).length > 0 ? map : undefined;
}

function httpFromDecoded(http: Decoded, t: Types): HttpRequestMessage {
  const out: HttpRequestMessage = {};
  for (const name of ['id', 'method', 'path', 'host', 'scheme', 'query', 'protocol', 'body'] as const) {
    const value = field(http, name);
    if (value !== undefined) out[name] = value as string;
  }
  const headers = entries(http, 'headers');
  if (headers) out.headers = headers;
  const headerMap = field(http, 'header_map');
  if (headerMap) out.header_map = t.headerMap.toObject(headerMap as protobuf.Message, PROTO_OPTIONS);
  const rawBody = field(http, 'raw_body');
  if (rawBody !== undefined) out.raw_body = rawBody as Buffer;
  // int64: a Long (or a number), as a decimal string like `longs: String`.
  const size = field(http, 'size');
  if (size !== undefined) out.size = String(size);
  return out;
}

/**
 * Decodes a CheckRequest straight to the {@link CheckRequest} contract: the same result as
 * proto-loader's deserializer followed by {@link checkRequestFromMessage}, without building a
 * plain copy of the whole message first (the request time, route metadata and TLS session,
 * which the contract does not carry, are never converted).
 */
export function decodeCheckRequest(buffer: Uint8Array): CheckRequest {
  const t = codecTypes();
  const message = t.request.decode(buffer) as unknown as Decoded;
  const attributes = field(message, 'attributes') as Decoded | undefined;
  if (!attributes) return checkRequestFromMessage({});
  const light: Attributes = {};
  const source = field(attributes, 'source');
  if (source) light.source = t.peer.toObject(source as protobuf.Message, PROTO_OPTIONS);
  const destination = field(attributes, 'destination');
  if (destination) light.destination = t.peer.toObject(destination as protobuf.Message, PROTO_OPTIONS);
  const request = field(attributes, 'request') as Decoded | undefined;
  if (request) {
    const http = field(request, 'http') as Decoded | undefined;
    light.request = http ? { http: httpFromDecoded(http, t) } : {};
  }
  const extensions = entries(attributes, 'context_extensions');
  if (extensions) light.context_extensions = extensions;
  const metadata = field(attributes, 'metadata_context') as Decoded | undefined;
  if (metadata && entries(metadata, 'filter_metadata')) light.metadata_context = t.metadata.toObject(metadata as unknown as protobuf.Message, PROTO_OPTIONS);
  return checkRequestFromMessage({ attributes: light });
}

/** Encoded responses of decisions that cannot change (a step's cached, deep-frozen answer). */
const encodedOf = new WeakMap<AuthDecision, Buffer>();

function encodeMessage(message: CheckResponseMessage): Buffer {
  const t = codecTypes();
  const bytes = t.response.encode(t.response.fromObject(message)).finish();
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * A decision as the CheckResponse bytes {@link checkResponseToMessage} describes. A decision that
 * is frozen all the way down (Basic Auth's cached answers, say) is encoded once.
 */
export function encodeCheckResponse(decision: AuthDecision): Buffer {
  const cached = encodedOf.get(decision);
  if (cached) return cached;
  const bytes = encodeMessage(checkResponseToMessage(decision));
  if (isDeepFrozen(decision)) encodedOf.set(decision, bytes);
  return bytes;
}

/** Whether nothing a CheckResponse is made of can change any more. */
function isDeepFrozen(decision: AuthDecision): boolean {
  if (!Object.isFrozen(decision)) return false;
  const headers = (list: readonly object[] | undefined) => list === undefined || (Object.isFrozen(list) && list.every((h) => Object.isFrozen(h)));
  if (!decision.allowed) return headers(decision.headers);
  return headers(decision.headersToSet) && Object.isFrozen(decision.headersToRemove) && headers(decision.responseHeaders);
}

/**
 * `envoy.service.auth.v3.Authorization` for a gRPC server: Check's request arrives decoded as a
 * {@link CheckRequest} ({@link decodeCheckRequest}); its response is the bytes of
 * {@link encodeCheckResponse} (or a CheckResponse message, encoded here).
 */
export function checkServerDefinition(): ServiceDefinition {
  const t = codecTypes();
  return {
    Check: {
      path: `/${AUTHORIZATION_SERVICE}/Check`,
      requestStream: false,
      responseStream: false,
      originalName: 'check',
      requestSerialize: (value: CheckRequestMessage) => Buffer.from(t.request.encode(t.request.fromObject(value)).finish()),
      requestDeserialize: decodeCheckRequest,
      responseSerialize: (value: Buffer | CheckResponseMessage) => (Buffer.isBuffer(value) ? value : encodeMessage(value)),
      responseDeserialize: (buffer: Buffer) => t.response.toObject(t.response.decode(buffer), PROTO_OPTIONS) as CheckResponseMessage,
    },
  } as ServiceDefinition;
}
