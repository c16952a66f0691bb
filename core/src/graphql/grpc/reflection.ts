import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { decodeFileDescriptor, rootFromFiles } from './descriptors.ts';

/**
 * A client for gRPC server reflection (grpc.reflection.v1, then v1alpha): fetches the file
 * that defines a symbol and, transitively, the files it imports, and builds a protobufjs root.
 */

const MESSAGES = {
  ServerReflectionRequest: {
    oneofs: { message_request: { oneof: ['file_by_filename', 'file_containing_symbol'] } },
    fields: {
      host: { type: 'string', id: 1 },
      file_by_filename: { type: 'string', id: 3 },
      file_containing_symbol: { type: 'string', id: 4 },
    },
  },
  ServerReflectionResponse: {
    fields: {
      valid_host: { type: 'string', id: 1 },
      file_descriptor_response: { type: 'FileDescriptorResponse', id: 4 },
      error_response: { type: 'ErrorResponse', id: 7 },
    },
  },
  FileDescriptorResponse: { fields: { file_descriptor_proto: { rule: 'repeated', type: 'bytes', id: 1 } } },
  ErrorResponse: { fields: { error_code: { type: 'int32', id: 1 }, error_message: { type: 'string', id: 2 } } },
};

const reflection = protobuf.Root.fromJSON({
  nested: { grpc: { nested: { reflection: { nested: { v1: { nested: MESSAGES }, v1alpha: { nested: MESSAGES } } } } } },
});

interface ReflectionResponse {
  file_descriptor_response?: { file_descriptor_proto: Uint8Array[] };
  error_response?: { error_code: number; error_message: string };
}

/** Fetches the descriptors that define `symbol` from the server behind `client`. */
export async function reflectDescriptors(client: grpc.Client, symbol: string, timeoutMs: number): Promise<protobuf.Root> {
  try {
    return await reflectWith(client, 'v1', symbol, timeoutMs);
  } catch (error) {
    if ((error as { code?: number }).code !== grpc.status.UNIMPLEMENTED) throw error;
    return reflectWith(client, 'v1alpha', symbol, timeoutMs);
  }
}

function reflectWith(client: grpc.Client, version: 'v1' | 'v1alpha', symbol: string, timeoutMs: number): Promise<protobuf.Root> {
  const requestType = reflection.lookupType(`grpc.reflection.${version}.ServerReflectionRequest`);
  const responseType = reflection.lookupType(`grpc.reflection.${version}.ServerReflectionResponse`);
  return new Promise((resolve, reject) => {
    const call = client.makeBidiStreamRequest(
      `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`,
      (value: object) => Buffer.from(requestType.encode(requestType.fromObject(value)).finish()),
      (bytes: Buffer) => responseType.toObject(responseType.decode(bytes), { defaults: true, arrays: true }) as ReflectionResponse,
      new grpc.Metadata(),
      { deadline: Date.now() + timeoutMs },
    );
    const files = new Map<string, object>();
    const requested = new Set<string>();
    let pending = 0;
    let settled = false;
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      call.cancel();
      reject(error);
    };
    const request = (value: { file_by_filename?: string; file_containing_symbol?: string }) => {
      pending++;
      call.write({ host: '', ...value });
    };
    call.on('data', (response: ReflectionResponse) => {
      pending--;
      if (response.error_response) {
        fail(new Error(`server reflection: ${response.error_response.error_message || `error ${response.error_response.error_code}`} (asked for "${symbol}")`));
        return;
      }
      for (const bytes of response.file_descriptor_response?.file_descriptor_proto ?? []) {
        const file = decodeFileDescriptor(bytes);
        files.set(file.name, file);
      }
      for (const file of files.values()) {
        for (const dependency of (file as { dependency?: string[] }).dependency ?? []) {
          if (!files.has(dependency) && !requested.has(dependency)) {
            requested.add(dependency);
            request({ file_by_filename: dependency });
          }
        }
      }
      if (pending === 0 && !settled) {
        settled = true;
        call.end();
        try {
          resolve(rootFromFiles([...files.values()]));
        } catch (error) {
          reject(new Error(`server reflection returned unusable descriptors: ${(error as Error).message}`));
        }
      }
    });
    call.on('error', (error) => fail(error));
    call.on('end', () => fail(new Error('server reflection stream ended before answering')));
    request({ file_containing_symbol: symbol });
  });
}
