// Upstreams for the protocol rows, in their own process so the bench's load generator does not
// share their event loop: `ws` echoes every WebSocket message; `grpc` is a @grpc/grpc-js server
// whose test.Echo/Unary returns its request. Prints {"msg":"listening","port":N}.
// Usage: node test/bench/echo-servers.ts ws|grpc
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { WebSocketServer } from 'ws';
import { ECHO_PROTO_FILE } from './grpc-echo.ts';

const kind = process.argv[2];
if (kind === 'ws') {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
  server.on('connection', (socket) => socket.on('message', (data, binary) => socket.send(data, { binary })));
  await once(server, 'listening');
  console.log(JSON.stringify({ msg: 'listening', port: (server.address() as AddressInfo).port }));
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
} else if (kind === 'grpc') {
  const Echo = (grpc.loadPackageDefinition(protoLoader.loadSync(ECHO_PROTO_FILE, { keepCase: true })).bench as grpc.GrpcObject).Echo as grpc.ServiceClientConstructor;
  const server = new grpc.Server();
  server.addService(Echo.service, { Unary: (call: grpc.ServerUnaryCall<object, object>, callback: grpc.sendUnaryData<object>) => callback(null, call.request) });
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))));
  console.log(JSON.stringify({ msg: 'listening', port }));
  process.on('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
} else {
  console.error('usage: echo-servers.ts ws|grpc');
  process.exit(2);
}
