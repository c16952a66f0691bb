import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';

/** A gRPC service (reviews.v1.ReviewService) on 127.0.0.1:9103 for the quickstart's GraphQLApi. */
const REVIEWS = [
  { review_id: 'r1', user_id: '1', stars: 5, comment: 'Elegant engine design' },
  { review_id: 'r2', user_id: '1', stars: 4, comment: 'Great notes' },
  { review_id: 'r3', user_id: '2', stars: 5, comment: 'A machine that thinks?' },
];

export default async function start() {
  const proto = fileURLToPath(new URL('./proto/reviews.proto', import.meta.url));
  const definition = protoLoader.loadSync(proto, { keepCase: true, defaults: true });
  const { ReviewService } = (grpc.loadPackageDefinition(definition) as any).reviews.v1;
  const server = new grpc.Server();
  server.addService(ReviewService.service, {
    ListReviews(call: grpc.ServerUnaryCall<{ user_id: string }, unknown>, callback: grpc.sendUnaryData<unknown>) {
      callback(null, { reviews: REVIEWS.filter((r) => r.user_id === call.request.user_id) });
    },
  });
  await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:9103', grpc.ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port))),
  );
  return { name: 'grpc-demo', url: 'grpc://127.0.0.1:9103', close: () => new Promise<void>((r) => server.tryShutdown(() => r())) };
}
