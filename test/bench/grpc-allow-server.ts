// The Node limit for an ext_authz server: a minimal @grpc/grpc-js server whose Check always
// allows, decoding Envoy's CheckRequest with the same protos and loader options as
// `gatehouse extauth` and answering with the OK response a Basic Auth check gives (one
// x-user-id header, append false), so only the auth work differs; plus grpc.health.v1 so
// Envoy's health check treats it like the real server. Prints {"msg":"listening","port":N}.
// Usage: node test/bench/grpc-allow-server.ts [port]
import { Server, ServerCredentials, type ServiceDefinition, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { AUTHORIZATION_SERVICE, authorizationPackage } from '../../core/src/extauth/grpc/protos.ts';

const ALLOW = { status: { code: 0 }, ok_response: { headers: [{ header: { key: 'x-user-id', value: 'bench;alice' }, append: { value: false } }], headers_to_remove: [] } };

const server = new Server();
server.addService(authorizationPackage()[AUTHORIZATION_SERVICE] as ServiceDefinition, {
  Check: (_call: unknown, callback: (error: null, response: object) => void) => callback(null, ALLOW),
} as UntypedServiceImplementation);
new HealthImplementation({ '': 'SERVING', [AUTHORIZATION_SERVICE]: 'SERVING' }).addToServer(server);

const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync(`127.0.0.1:${process.argv[2] ?? '0'}`, ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
);
console.log(JSON.stringify({ msg: 'listening', port }));
process.on('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
