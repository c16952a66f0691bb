import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { reflectDescriptors } from '../grpc/reflection.ts';
import type { Discovered } from './openapi.ts';
import { camelName, description, graphqlName, manifests, Names, TypeDefinitions } from './sdl.ts';

/**
 * `gatehouse graphql discover --grpc ADDRESS`: a GraphQLApi from a gRPC server's reflection (issue
 * 25 item 13), as Gloo's discovery made one. Every unary method of every service (reflection and
 * health excepted) becomes a root field bound to a `grpcResolver`: methods named Get/List/Search/
 * Find/Read/Lookup/Check… under Query, the others under Mutation. The request message is the
 * `input` argument (an input type), the response message the field's type, with the proto field
 * names the resolver returns. 64-bit integers and bytes are strings (their proto3 JSON form),
 * enums are enums, maps and google.protobuf types are `JSON`. Streaming methods are left out. The
 * API keeps using reflection at run time (no descriptor registry is written).
 */

const READ = /^(get|list|search|find|read|lookup|check|fetch|query|count|describe|batchget)/i;
const SKIPPED_SERVICES = /^grpc\.(reflection|health)\./;

/** Discovers from the server at `host:port` (plaintext). */
export async function discoverGrpc(address: { host: string; port: number }, options: { name?: string | undefined; namespace?: string | undefined; upstream?: string | undefined; timeoutMs?: number }): Promise<Discovered> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const target = `${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`;
  const client = new grpc.Client(target, grpc.credentials.createInsecure());
  try {
    const services = (await listServices(client, timeoutMs)).filter((s) => !SKIPPED_SERVICES.test(s)).sort();
    if (services.length === 0) throw new Error(`${target} lists no services through reflection`);
    const notes: string[] = [];
    const types = new TypeDefinitions();
    const outputs = new Map<string, string>();
    const inputs = new Map<string, string>();
    const enums = new Map<string, string>();
    const query: string[] = [];
    const mutation: string[] = [];
    const resolutions: Record<string, object> = {};
    const fields = new Names();
    const name = options.name ?? (graphqlName(services[0]!.split('.').slice(-1)[0]!).toLowerCase().replace(/_/g, '-') || 'grpc');
    const upstream = options.upstream ?? `${name}-upstream`;

    const enumType = (e: protobuf.Enum): string => {
      const known = enums.get(e.fullName);
      if (known) return known;
      const typeName = types.names.take(graphqlName(e.name));
      enums.set(e.fullName, typeName);
      types.add('enum', typeName, Object.keys(e.values).map(graphqlName));
      return typeName;
    };

    const fieldType = (field: protobuf.Field, input: boolean): string => {
      field.resolve();
      let type: string;
      if (field.map) type = types.json();
      else if (field.resolvedType instanceof protobuf.Enum) type = enumType(field.resolvedType);
      else if (field.resolvedType instanceof protobuf.Type) type = messageType(field.resolvedType, input);
      else type = scalar(field.type);
      return field.repeated && !field.map ? `[${type}]` : type;
    };

    const messageType = (message: protobuf.Type, input: boolean): string => {
      if (message.fullName.startsWith('.google.protobuf.')) return types.json();
      const memo = input ? inputs : outputs;
      const known = memo.get(message.fullName);
      if (known) return known;
      const typeName = types.names.take(graphqlName(message.name) + (input ? 'Input' : ''));
      memo.set(message.fullName, typeName);
      const lines = message.fieldsArray.map((f) => `${f.name}: ${fieldType(f, input)}`);
      if (lines.length === 0) {
        // GraphQL types need a field: an empty message is JSON (`{}`).
        memo.set(message.fullName, types.json());
        return types.json();
      }
      types.add(input ? 'input' : 'type', typeName, lines);
      return typeName;
    };

    for (const service of services) {
      const root = await reflectDescriptors(client, service, timeoutMs);
      const svc = root.lookupService(service);
      for (const method of svc.methodsArray) {
        method.resolve();
        if (method.requestStream || method.responseStream) {
          notes.push(`${service}/${method.name}: streaming; left out`);
          continue;
        }
        const request = method.resolvedRequestType!;
        const response = method.resolvedResponseType!;
        const field = fields.take(camelName(method.name));
        const input = request.fieldsArray.length > 0 ? messageType(request, true) : undefined;
        const key = `${service}|${method.name}`;
        resolutions[key] = {
          grpcResolver: {
            upstreamRef: { name: upstream, ...(options.namespace ? { namespace: options.namespace } : {}) },
            requestTransform: { serviceName: service, methodName: method.name, outgoingMessageJson: input ? '{$args.input}' : {} },
          },
        };
        const line = `${description(method.comment ?? undefined)}${field}${input ? `(input: ${input})` : ''}: ${messageType(response, false)} @resolve(name: "${key}")`;
        (READ.test(method.name) ? query : mutation).push(line);
      }
    }
    if (query.length + mutation.length === 0) throw new Error(`${target} has no unary methods`);
    return { documents: manifests({ name, namespace: options.namespace, upstream, host: address.host, port: address.port, http2: true, sdl: types.sdl(query, mutation), resolutions }), notes };
  } finally {
    client.close();
  }
}

/** The GraphQL scalar of a proto scalar type (its proto3 JSON form). */
function scalar(type: string): string {
  switch (type) {
    case 'double':
    case 'float':
      return 'Float';
    case 'int32':
    case 'uint32':
    case 'sint32':
    case 'fixed32':
    case 'sfixed32':
      return 'Int';
    case 'bool':
      return 'Boolean';
    default:
      // string, bytes (base64), and 64-bit integers (strings in proto3 JSON).
      return 'String';
  }
}

const LIST = protobuf.Root.fromJSON({
  nested: {
    v1: {
      nested: {
        Request: { fields: { host: { type: 'string', id: 1 }, list_services: { type: 'string', id: 7 } } },
        Response: { fields: { list_services_response: { type: 'ListServiceResponse', id: 6 }, error_response: { type: 'ErrorResponse', id: 7 } } },
        ListServiceResponse: { fields: { service: { rule: 'repeated', type: 'ServiceResponse', id: 1 } } },
        ServiceResponse: { fields: { name: { type: 'string', id: 1 } } },
        ErrorResponse: { fields: { error_code: { type: 'int32', id: 1 }, error_message: { type: 'string', id: 2 } } },
      },
    },
  },
});

/** The services the server lists through reflection (v1, then v1alpha). */
async function listServices(client: grpc.Client, timeoutMs: number): Promise<string[]> {
  try {
    return await listWith(client, 'v1', timeoutMs);
  } catch (error) {
    if ((error as { code?: number }).code !== grpc.status.UNIMPLEMENTED) throw error;
    return listWith(client, 'v1alpha', timeoutMs);
  }
}

function listWith(client: grpc.Client, version: 'v1' | 'v1alpha', timeoutMs: number): Promise<string[]> {
  const requestType = LIST.lookupType('v1.Request');
  const responseType = LIST.lookupType('v1.Response');
  type Answer = { list_services_response?: { service: { name: string }[] }; error_response?: { error_message: string } };
  return new Promise((resolve, reject) => {
    const call = client.makeBidiStreamRequest(
      `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`,
      (value: object) => Buffer.from(requestType.encode(requestType.fromObject(value)).finish()),
      (bytes: Buffer) => responseType.toObject(responseType.decode(bytes), { defaults: true, arrays: true }) as Answer,
      new grpc.Metadata(),
      { deadline: Date.now() + timeoutMs },
    );
    let done = false;
    call.on('data', (answer: Answer) => {
      if (done) return;
      done = true;
      call.end();
      if (answer.error_response) reject(new Error(`server reflection: ${answer.error_response.error_message}`));
      else resolve((answer.list_services_response?.service ?? []).map((s) => s.name));
    });
    call.on('error', (error) => {
      if (!done) {
        done = true;
        reject(error);
      }
    });
    call.on('end', () => {
      if (!done) {
        done = true;
        reject(new Error('server reflection: the stream ended without an answer'));
      }
    });
    call.write({ host: '', list_services: '*' });
  });
}
