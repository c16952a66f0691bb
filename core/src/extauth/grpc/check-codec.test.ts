import { randomBytes } from 'node:crypto';
import type { ServiceDefinition } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { deepFreeze } from '../../config/resource.ts';
import { allow, deny } from '../decision.ts';
import type { AuthDecision } from '../step.ts';
import { checkServerDefinition, decodeCheckRequest, encodeCheckResponse } from './check-codec.ts';
import { checkRequestFromMessage, checkResponseToMessage } from './check-messages.ts';
import { AUTHORIZATION_SERVICE, authorizationPackage } from './protos.ts';

// The reference: proto-loader's codec (what the server used before, and what the gateway's client uses).
const loader = (authorizationPackage()[AUTHORIZATION_SERVICE] as ServiceDefinition).Check!;
const encode = (message: object): Buffer => loader.requestSerialize(message);
const reference = (bytes: Buffer) => checkRequestFromMessage(loader.requestDeserialize(bytes));

const peer = (port: number) => ({ address: { socket_address: { address: '10.0.0.7', port_value: port } } });

/** CheckRequests as Envoy and other callers send them, including every field the contract reads. */
const messages: Record<string, object> = {
  empty: {},
  'no request': { attributes: { context_extensions: { config_id: 'default.basic' } } },
  'request without http': { attributes: { request: { time: { seconds: 1_795_947_980, nanos: 5 } } } },
  envoy: {
    attributes: {
      source: peer(46630),
      destination: { ...peer(10000), principal: 'spiffe://cluster.local/ns/default/sa/app', labels: { app: 'web' } },
      request: {
        time: { seconds: 1_795_947_980, nanos: 185_068_000 },
        http: {
          id: '14816948241092476596',
          method: 'GET',
          headers: { ':authority': 'api.example.com', ':path': '/things?x=1', authorization: 'Basic YWxpY2U6d29uZGVybGFuZA==', 'x-request-id': 'r-1' },
          path: '/things?x=1',
          host: 'api.example.com',
          scheme: 'http',
          protocol: 'HTTP/1.1',
        },
      },
      context_extensions: { config_id: 'default.basic', source_type: 'route' },
      metadata_context: {},
      route_metadata_context: { filter_metadata: { x: { fields: { a: { string_value: 'b' } } } } },
    },
  },
  'mixed-case headers, body, size, query': {
    attributes: { request: { http: { method: 'POST', headers: { 'X-Api-Key': 'k', Accept: '*/*' }, body: '{"a":1}', size: 7, query: 'a=1', fragment: 'f' } } },
  },
  'raw headers and bytes body': {
    attributes: {
      request: {
        http: {
          header_map: {
            headers: [
              { key: 'X-One', value: 'a' },
              { key: 'x-one', raw_value: Buffer.from('b') },
              { key: 'x-raw', raw_value: Buffer.from([0xe2, 0x82, 0xac]) },
              { key: '', value: 'no name' },
            ],
          },
          raw_body: Buffer.from([0, 1, 2, 255]),
          size: '9007199254740993',
        },
      },
    },
  },
  'filter metadata (JWT claims)': {
    attributes: {
      request: { http: { headers: { authorization: 'Bearer x' } } },
      metadata_context: {
        filter_metadata: {
          'envoy.filters.http.jwt_authn': {
            fields: {
              sub: { string_value: 'alice' },
              n: { number_value: 3.5 },
              ok: { bool_value: true },
              none: { null_value: 0 },
              groups: { list_value: { values: [{ string_value: 'a' }, { number_value: 1 }] } },
              nested: { struct_value: { fields: { k: { string_value: 'v' } } } },
            },
          },
        },
      },
    },
  },
  'empty filter metadata': { attributes: { metadata_context: { filter_metadata: {} }, request: { http: { method: 'GET' } } } },
  'pipe and internal addresses': { attributes: { source: { address: { pipe: { path: '/tmp/s', mode: 438 } } }, destination: { address: { envoy_internal_address: { server_listener_name: 'l' } } } } },
  'size zero, empty strings': { attributes: { request: { http: { size: 0, method: '', id: '', headers: {} } } } },
};

describe('decodeCheckRequest', () => {
  for (const [name, message] of Object.entries(messages)) {
    it(`decodes like proto-loader + checkRequestFromMessage: ${name}`, () => {
      const bytes = encode(message);
      expect(decodeCheckRequest(bytes)).toStrictEqual(reference(bytes));
    });
  }

  it('gives every check its own headers and context extensions (steps and trace context may add to them)', () => {
    const bytes = encode(messages.envoy!);
    const first = decodeCheckRequest(bytes);
    first.attributes.request.http.headers.traceparent = 'x';
    first.attributes.context_extensions.config_id = 'changed';
    expect(decodeCheckRequest(bytes)).toStrictEqual(reference(bytes));
    const empty = decodeCheckRequest(encode({}));
    empty.attributes.context_extensions.x = 'y';
    empty.attributes.request.http.headers.y = 'z';
    expect(decodeCheckRequest(encode({}))).toStrictEqual(reference(encode({})));
  });

  it('decodes malformed input as proto-loader does, or fails (an Error, which grpc-js answers INTERNAL)', () => {
    const envoy = encode(messages.envoy!);
    const inputs = [Buffer.from([0x0a, 0xff]), Buffer.from([0xff, 0xff, 0xff]), envoy.subarray(0, envoy.length - 3)];
    for (let i = 0; i < 300; i++) inputs.push(randomBytes(1 + (i % 64)));
    // Single flipped bytes in a real message.
    for (let i = 0; i < envoy.length; i += 3) {
      const copy = Buffer.from(envoy);
      copy[i] = copy[i]! ^ 0x5a;
      inputs.push(copy);
    }
    for (const input of inputs) {
      let expected: unknown;
      try {
        expected = reference(input);
      } catch {
        // proto-loader also fails converting fields the contract does not carry (a broken Struct in
        // route_metadata_context, say), which are never converted here: then either outcome is fine.
        try {
          expect(decodeCheckRequest(input).attributes.request.http.headers).toBeTypeOf('object');
        } catch (error) {
          expect(error).toBeInstanceOf(Error);
        }
        continue;
      }
      expect(decodeCheckRequest(input)).toStrictEqual(expected);
    }
  });
});

describe('encodeCheckResponse', () => {
  const decisions: Record<string, AuthDecision> = {
    'allow, one header': allow([{ key: 'x-user-id', value: 'bench;alice', append: false }]),
    'allow, nothing': allow(),
    'allow, set, remove, response headers': { ...allow([{ key: 'x-a', value: '1', append: true }], ['x-b']), responseHeaders: [{ key: 'x-rate', value: '5' }] },
    'deny 401 with challenge': deny(401, [{ key: 'www-authenticate', value: 'Basic realm="r"' }]),
    'deny 403 with body': deny(403, [], 'no'),
  };
  for (const [name, decision] of Object.entries(decisions)) {
    it(`encodes like proto-loader: ${name}`, () => {
      expect(encodeCheckResponse(decision)).toEqual(loader.responseSerialize(checkResponseToMessage(decision)));
      expect(checkServerDefinition().Check!.responseDeserialize(encodeCheckResponse(decision))).toStrictEqual(loader.responseDeserialize(loader.responseSerialize(checkResponseToMessage(decision))));
    });
  }

  it('encodes a deep-frozen decision once, and a decision that may change every time', () => {
    const frozen = deepFreeze(allow([{ key: 'x-user-id', value: 'r;alice', append: false }]));
    expect(encodeCheckResponse(frozen)).toBe(encodeCheckResponse(frozen));
    const mutable = allow([{ key: 'x-user-id', value: 'r;alice', append: false }]);
    const before = encodeCheckResponse(mutable);
    mutable.headersToSet[0]!.value = 'r;bob';
    expect(encodeCheckResponse(mutable)).not.toEqual(before);
    expect(encodeCheckResponse(mutable)).toEqual(loader.responseSerialize(checkResponseToMessage(mutable)));
    // Frozen on the outside only: its header list may still change.
    const shallow = Object.freeze(allow([{ key: 'x-user-id', value: 'r;alice', append: false }]));
    encodeCheckResponse(shallow);
    shallow.headersToSet.push({ key: 'x-more', value: '1' });
    expect(encodeCheckResponse(shallow)).toEqual(loader.responseSerialize(checkResponseToMessage(shallow)));
  });
});
