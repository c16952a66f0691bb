import protobuf from 'protobufjs';
import descriptorExt from 'protobufjs/ext/descriptor/index.js';

/** `google.protobuf` descriptor types (from protobufjs' descriptor extension, which also adds `Root.fromDescriptor`). */
const descriptor = descriptorExt as unknown as {
  FileDescriptorSet: protobuf.Type;
  FileDescriptorProto: protobuf.Type;
};

type RootWithDescriptor = typeof protobuf.Root & { fromDescriptor(set: Uint8Array | object): protobuf.Root };

/** A unary or streaming method with its message types, ready to encode and decode. */
export interface MethodTypes {
  readonly path: string;
  readonly requestType: protobuf.Type;
  readonly responseType: protobuf.Type;
  readonly streaming: boolean;
}

/** Decodes a base64 `FileDescriptorSet` (`protoc --include_imports --descriptor_set_out`). Throws with a plain message. */
export function rootFromDescriptorSet(base64: string): protobuf.Root {
  const bytes = Buffer.from(base64, 'base64');
  if (bytes.length === 0) throw new Error('protoDescriptorBin is empty after base64 decoding');
  let set: protobuf.Message;
  try {
    set = descriptor.FileDescriptorSet.decode(bytes);
  } catch (error) {
    throw new Error(`protoDescriptorBin is not a base64 FileDescriptorSet: ${(error as Error).message}`);
  }
  return rootFromFiles((set as unknown as { file: object[] }).file ?? []);
}

/**
 * Builds a resolved root from `.proto` sources (Gloo's `protoRefsList`: ConfigMaps holding
 * proto files), parsed by protobufjs with field names kept as written. Imports between the
 * sources resolve because all of them share one root; Google's well-known types
 * (`google/protobuf/*.proto`) come from protobufjs' own copies. Throws naming the source.
 */
export function rootFromProtoSources(sources: readonly { name: string; text: string }[]): protobuf.Root {
  if (sources.length === 0) throw new Error('the ConfigMaps hold no .proto sources');
  const root = new protobuf.Root();
  const imports = new Set<string>();
  for (const { name, text } of sources) {
    try {
      const parsed = protobuf.parse(text, root, { keepCase: true, alternateCommentMode: true });
      for (const file of [...(parsed.imports ?? []), ...(parsed.weakImports ?? [])]) imports.add(file);
    } catch (error) {
      throw new Error(`${name} does not parse: ${(error as Error).message}`);
    }
  }
  for (const file of imports) {
    const common = (protobuf.common as unknown as { get(file: string): { nested?: Record<string, protobuf.AnyNestedObject> } | null }).get(file);
    if (common?.nested) root.addJSON(common.nested);
  }
  try {
    root.resolveAll();
  } catch (error) {
    throw new Error(`the .proto sources do not resolve: ${(error as Error).message}`);
  }
  return root;
}

/** Builds a resolved root from decoded `FileDescriptorProto`s (any order). */
export function rootFromFiles(files: readonly object[]): protobuf.Root {
  if (files.length === 0) throw new Error('the descriptor set holds no files');
  const root = (protobuf.Root as RootWithDescriptor).fromDescriptor({ file: files });
  root.resolveAll();
  return root;
}

/** Decodes one serialized `FileDescriptorProto` (as sent by server reflection). */
export function decodeFileDescriptor(bytes: Uint8Array): { name: string; dependency: string[] } & object {
  return descriptor.FileDescriptorProto.decode(bytes) as unknown as { name: string; dependency: string[] };
}

/** Finds `service`/`method` in `root`; throws with a message naming what exists. */
export function findMethod(root: protobuf.Root, serviceName: string, methodName: string): MethodTypes {
  const service = root.lookup(serviceName.replace(/^\./, ''));
  if (!(service instanceof protobuf.Service)) {
    const services = listServices(root);
    throw new Error(`service "${serviceName}" is not in the descriptors${services.length ? `; they define ${services.join(', ')}` : ''}`);
  }
  const method = service.methods[methodName];
  if (!method) {
    throw new Error(`service "${serviceName}" has no method "${methodName}"; it has ${Object.keys(service.methods).join(', ') || 'none'}`);
  }
  method.resolve();
  return {
    path: `/${service.fullName.slice(1)}/${method.name}`,
    requestType: method.resolvedRequestType!,
    responseType: method.resolvedResponseType!,
    streaming: !!(method.requestStream || method.responseStream),
  };
}

function listServices(ns: protobuf.NamespaceBase, out: string[] = []): string[] {
  for (const child of ns.nestedArray) {
    if (child instanceof protobuf.Service) out.push(child.fullName.slice(1));
    else if (child instanceof protobuf.Namespace) listServices(child, out);
  }
  return out;
}

/** Proto3 JSON of a decoded message, with proto field names (SPEC 3.3): int64 as strings, enums as names, bytes base64, defaults included. */
export function messageToJson(type: protobuf.Type, message: protobuf.Message): Record<string, unknown> {
  return type.toObject(message, { longs: String, enums: String, bytes: String, defaults: true, arrays: true, objects: true, json: true });
}
